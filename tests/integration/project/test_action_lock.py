"""requirements.lock resolves on its own in a fresh virtual environment: complete, exact and
hashed; models.lock pins with hashes exactly the packaged models the corpus knows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from ditox_ci.ci.action import adapter_lock
from ditox_ci.optimizers import ADAPTERS
from tests.helpers import ROOT


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(lock: Path) -> dict[str, str]:
    """name → version of `name==version` lines, each followed by its `--hash` lines."""
    text = lock.read_text()
    pins = {_normalize(n): v for n, v in re.findall(r"^([A-Za-z0-9_.\-]+)==([^\s\\]+)", text, re.M)}
    blocks = re.split(r"^(?=[A-Za-z0-9_.\-]+==)", text, flags=re.M)[1:]
    unhashed = [block.split()[0] for block in blocks if "--hash=sha256:" not in block]
    assert not unhashed, f"{lock.name}: pins without a hash: {unhashed}"
    return pins


def _resolved(tmp_path: Path, *locks: Path) -> dict[str, str]:
    """What pip picks, dependencies included, for these locks together in a fresh environment."""
    venv.create(tmp_path / "venv", with_pip=True)
    report = tmp_path / "resolution.json"
    subprocess.run(
        [
            str(tmp_path / "venv" / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--dry-run",
            "--ignore-installed",
            "--report",
            str(report),
            *(arg for lock in locks for arg in ("-r", str(lock))),
        ],
        check=True,
        timeout=300,
    )
    return {
        _normalize(item["metadata"]["name"]): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }


def test_lock_resolves_to_exactly_its_pins(tmp_path: Path) -> None:
    pins = _pins(ROOT / "requirements.lock")
    resolved = _resolved(tmp_path, ROOT / "requirements.lock")
    assert resolved == pins, "the lock is missing a dependency or pins one pip would not pick"
    assert {"onnx", "onnxoptimizer", "onnxruntime", "pygithub"} <= set(pins)


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_each_adapter_lock_completes_the_image_with_a_release_its_extra_takes(
    tmp_path: Path, name: str
) -> None:
    """What the Action installs as root for `optimizer: <name>` (--require-hashes --no-deps): the
    image's pins and the adapter's lock together resolve to exactly their pins, and the adapter's
    package is a version ditox-ci's extra takes. ONNX Runtime's are the image's own."""
    lock = adapter_lock(name)
    requirement = Requirement(ADAPTERS[name].requirement)
    if lock is None:
        assert _normalize(requirement.name) in _pins(ROOT / "requirements.lock")
        return
    image, own = _pins(ROOT / "requirements.lock"), _pins(lock)
    assert not set(image) & set(own), "a package the image pins is pinned again"
    assert requirement.specifier.contains(own[_normalize(requirement.name)])
    assert _resolved(tmp_path, ROOT / "requirements.lock", lock) == {**image, **own}


def test_models_lock_pins_the_packaged_models_with_hashes() -> None:
    wanted = subprocess.run(
        [sys.executable, "-m", "ditox_ci.corpus.packaged"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert _pins(ROOT / "models.lock") == {
        _normalize(name): version for name, version in (line.split("==") for line in wanted)
    }
