"""requirements.lock resolves on its own in a fresh virtual environment: complete and exact."""

from __future__ import annotations

import json
import re
import subprocess
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_lock_resolves_to_exactly_its_pins(tmp_path: Path) -> None:
    pins = {
        _normalize(name): version
        for name, version in re.findall(
            r"^([A-Za-z0-9_.\-]+)==(\S+)$", (ROOT / "requirements.lock").read_text(), re.M
        )
    }
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
