"""The built wheel, installed non-editable, renders everything: templates ship as package data.

The wheel is built from a copy of the files it is made of (the shared checkout stays clean) and
installed with `pip --no-deps --target`; its dependencies come from the test's own environment.
The sweep runs from another folder, so neither the checkout nor its `templates/` can be reached.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import FAKES, ROOT
from tests.integration.action_models import write_wrong_add


def _build_wheel(tmp: Path) -> Path:
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("ditox_ci", "templates"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp / "dist"), str(source)],
        check=True,
        timeout=300,
    )
    (wheel,) = (tmp / "dist").glob("ditox_ci-*.whl")
    return wheel


def test_installed_wheel_sweeps_and_renders_from_another_folder(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        timeout=300,
    )
    assert (site / "ditox_ci" / "templates" / "issue.md.j2").is_file()
    assert (site / "ditox_ci" / "report" / "schema.json").is_file()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(FAKES / "faulty_optimizers.py", elsewhere)
    write_wrong_add(elsewhere / "models" / "add.onnx")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(site), str(elsewhere)]),
        "DITOX_CACHE": str(tmp_path / "cache"),
    }
    where = subprocess.run(
        [sys.executable, "-c", "import ditox_ci.report.render as r; print(r.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(site), "the test must use the installed wheel"

    sweep = subprocess.run(
        [
            str(site / "bin" / "ditox-ci"),
            "sweep",
            "--models",
            "models",
            "--configs",
            "default",
            "--optimizer",
            "faulty_optimizers:optimize",
            "--jobs",
            "1",
            "--out",
            "out",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert sweep.returncode == 1, sweep.stderr  # the planted bug is a new finding
    out = elsewhere / "out"
    assert "add.onnx" in (out / "summary.md").read_text()
    bundles = list((out / "repro").glob("*/repro.py"))
    assert bundles and (bundles[0].parent / "README.md").is_file()

    published = subprocess.run(
        [str(site / "bin" / "ditox-ci"), "publish", "--report", "out/report.json", "--dry-run"],
        cwd=elsewhere,
        env={**env, "GITHUB_REPOSITORY": "onnx/optimizer", "GITHUB_SHA": "a" * 40},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert published.returncode == 0, published.stderr
    assert "would create check run ditox-ci (failure)" in published.stdout
