"""requirements.lock resolves on its own in a fresh virtual environment: complete, exact and
hashed; models.lock pins with hashes exactly the packaged models the corpus knows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
from pathlib import Path

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


def test_lock_resolves_to_exactly_its_pins(tmp_path: Path) -> None:
    pins = _pins(ROOT / "requirements.lock")
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
            "-r",
            str(ROOT / "requirements.lock"),
        ],
        check=True,
        timeout=300,
    )
    resolved = {
        _normalize(item["metadata"]["name"]): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    assert resolved == pins, "the lock is missing a dependency or pins one pip would not pick"
    assert {"onnx", "onnxoptimizer", "onnxruntime", "pygithub"} <= set(pins)


def test_models_lock_pins_the_packaged_models_with_hashes() -> None:
    wanted = subprocess.run(
        [sys.executable, "-m", "ditox_ci.corpus.packaged"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert _pins(ROOT / "models.lock") == {
        _normalize(name): version for name, version in (line.split("==") for line in wanted)
    }
