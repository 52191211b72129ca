"""`sweep --base-optimizer`: real wheels installed by real pip, real workers on both builds.

The build under test (planted_opt 2.0) has two planted bugs; the base build (1.0) has only the
first. Only the second may block the PR.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from wheels import PACKAGE, planted_build

OLD_BUG, NEW_BUG = "eliminate_identity", "eliminate_deadend"
CONFIGS = f"pass:{OLD_BUG},pass:{NEW_BUG},pass:eliminate_nop_transpose"


def _model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    weight = onnx.numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    nodes = [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Add", ["i", "w"], ["y"])]
    model = helper.make_model(
        helper.make_graph(nodes, "small", [x], [y], [weight]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The base wheel, the build under test installed where PYTHONPATH finds it, and a model."""
    root = tmp_path_factory.mktemp("builds")
    base = planted_build(root / "dist", "1.0", [OLD_BUG])
    head = planted_build(root / "dist", "2.0", [OLD_BUG, NEW_BUG])
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(root / "head"),
            str(head),
        ],
        check=True,
    )
    models = root / "models"
    models.mkdir()
    onnx.save(_model(), models / "small.onnx")
    return {"base": base, "head": root / "head", "models": models}


def sweep(builds: dict[str, Path], tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    out = tmp_path / "report"
    env = {**os.environ, "PYTHONPATH": str(builds["head"])}
    env.pop("GITHUB_ACTIONS", None)
    proc = subprocess.run(
        [
            sys.executable, "-m", "ditox_ci", "sweep",
            "--models", str(builds["models"]),
            "--optimizer", f"{PACKAGE}:optimize",
            "--configs", CONFIGS,
            "--cache-dir", str(tmp_path.parent / "cache"),
            "--out", str(out),
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )  # fmt: skip
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return proc.returncode, report, proc.stderr


def test_only_what_the_base_build_does_not_show_is_new(builds: dict[str, Path], tmp_path: Path):
    code, report, stderr = sweep(builds, tmp_path, "--base-optimizer", str(builds["base"]))
    assert code == 1, stderr
    assert report["optimizer"]["version"] == "2.0"
    found = {f["config"]: f for f in report["findings"]}
    assert set(found) == {f"pass:{OLD_BUG}", f"pass:{NEW_BUG}"}

    old = found[f"pass:{OLD_BUG}"]
    assert old["status"] == "known"
    assert old["evidence"]["known_by"] == "base-optimizer"
    assert old["evidence"]["base_optimizer"] == f"{builds['base']} (1.0)"
    # pre-existing: localized but not shrunk into a repro bundle
    assert old["repro"] is None

    new = found[f"pass:{NEW_BUG}"]
    assert new["status"] == "new"
    assert new["evidence"]["on_base"] == "no failure"
    assert new["repro"] and (tmp_path / "report" / new["repro"] / "repro.py").is_file()

    base = report["stats"]["base_optimizer"]
    assert (base["findings_checked"], base["reproduced"], base["models"]) == (2, 1, 1)
    assert f"{NEW_BUG}" in (tmp_path / "report" / "summary.md").read_text()


def test_without_a_base_both_bugs_are_new(builds: dict[str, Path], tmp_path: Path):
    code, report, stderr = sweep(builds, tmp_path, "--localize", "off")
    assert code == 1, stderr
    assert {f["status"] for f in report["findings"]} == {"new"}
    assert "base_optimizer" not in report["stats"]


def test_a_wheel_is_installed_once_per_cache(builds: dict[str, Path], tmp_path: Path):
    args = ("--base-optimizer", str(builds["base"]), "--localize", "off")
    first = sweep(builds, tmp_path / "a", *args)
    second = sweep(builds, tmp_path / "b", *args)
    assert "pip install --no-deps" in first[2] and "cached in" not in first[2]
    assert "cached in" in second[2] and "pip install" not in second[2]
    assert [f["status"] for f in first[1]["findings"]] == [f["status"] for f in second[1]["findings"]]


def test_a_base_build_that_cannot_be_had_is_a_one_line_error(builds: dict[str, Path], tmp_path: Path):
    missing = tmp_path / "onnxoptimizer-9.9-py3-none-any.whl"
    code, report, stderr = sweep(builds, tmp_path, "--base-optimizer", str(missing), "--quiet")
    assert (code, report) == (5, {})
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and f"--base-optimizer {missing}: no such wheel file" in lines[0], stderr
    broken = tmp_path / "broken-1.0-py3-none-any.whl"
    broken.write_bytes(b"not a zip")
    code, report, stderr = sweep(builds, tmp_path, "--base-optimizer", str(broken), "--quiet")
    lines = stderr.strip().splitlines()
    assert (code, report) == (5, {}) and len(lines) == 1 and "pip could not install" in lines[0], stderr


def test_a_base_that_does_not_provide_the_module_is_a_one_line_error(builds: dict[str, Path], tmp_path: Path):
    """The wheel installs, but has no planted_opt: found when the base workers start."""
    from wheels import write_wheel

    other = write_wheel(tmp_path / "dist", "unrelated", "1.0", {"unrelated/__init__.py": ""})
    code, _, stderr = sweep(builds, tmp_path, "--base-optimizer", str(other), "--quiet", "--localize", "off")
    assert code == 5
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].count("--base-optimizer") == 1 and PACKAGE in lines[0], stderr
