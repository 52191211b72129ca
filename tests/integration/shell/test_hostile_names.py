"""A model file name is anyone's to choose (threat model items 5 and 6): bytes that are not UTF-8, a
line break and a workflow command in it. The real sweep on GitHub's environment reports the model
under an escaped id, writes summary.md, and never lets the name start a line of the log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.integration.action_models import write_models

HOSTILE = b"re\xfflu\n::warning title=forged::all green.onnx"


def test_a_hostile_file_name_is_reported_escaped_and_the_summary_is_written(tmp_path: Path) -> None:
    models = tmp_path / "models"
    write_models(models)
    os.rename(models / "relu.onnx", os.path.join(os.fsencode(models), HOSTILE))
    summary = tmp_path / "step_summary"
    env = {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    process = subprocess.run(
        [sys.executable, "-P", "-m", "ditox_ci", "sweep", "--models", str(models), "--configs", "default",
         "--jobs", "1", "--out", str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        errors="backslashreplace",
        timeout=300,
    )
    assert process.returncode in (0, 1), process.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert "re\\xfflu\\n::warning title=forged::all green.onnx" in [model["id"] for model in report["models"]]
    assert {model["status"] for model in report["models"]} == {"ok"}
    assert (tmp_path / "out" / "summary.md").read_text(encoding="utf-8").startswith("## ditox-ci sweep")
    assert summary.read_text(encoding="utf-8").strip()
    log = (process.stdout + process.stderr).splitlines()
    assert not [line for line in log if line.lstrip().startswith("::warning title=forged")]
