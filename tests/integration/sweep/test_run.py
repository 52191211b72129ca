"""The sweep end to end: real onnxoptimizer, real ONNX Runtime, planted faulty optimizers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.helpers import FAKES, sweep

FAULTY = FAKES / "faulty_optimizers.py"


def _model(name: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    weight = onnx.numpy_helper.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "w")
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Add", ["i", "w"], ["a"]),
        helper.make_node("Tanh", ["a"], ["y"]),
    ]
    graph = helper.make_graph(nodes, name, [x], [y], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    (folder / "nested").mkdir(parents=True)
    for name in ("good", "segv", "hang", "wrong"):
        onnx.save(_model(name), folder / f"{name}.onnx")
    onnx.save(_model("good2"), folder / "nested" / "good2.onnx")
    (folder / "truncated.onnx").write_bytes(_model("t").SerializeToString()[:40])
    return folder


def by_model_config(report: dict) -> dict[tuple[str, str], dict]:
    return {(f["model"], f["config"]): f for f in report["findings"]}


def test_real_optimizer_finds_nothing_and_runs_each_original_once(corpus: Path, tmp_path: Path):
    configs = "default,pass:eliminate_identity,pass:eliminate_deadend,pass:fuse_bn_into_conv"
    code, report, stderr = sweep(
        "--models", str(corpus), "--configs", configs, "--samples", "2", out=tmp_path / "r"
    )
    assert code == 0, stderr
    assert report["findings"] == []
    statuses = {m["id"]: m["status"] for m in report["models"]}
    assert statuses["truncated.onnx"] == "skipped"
    assert statuses["nested/good2.onnx"] == "ok"
    ok = sum(1 for s in statuses.values() if s == "ok")
    # 2 samples per original, the wide-range one and the sign-structured one; each pass that
    # rewrites produces the same Identity-free model, which is judged once per model: so 4 runs for
    # the original, 4 more for its noise floor (ONNX Runtime's own optimizations on) and 4 for that
    # one optimized model.
    assert report["stats"]["runtime_runs"] == ok * 12
    assert report["coverage"]["eliminate_identity"] == {"models_changed": ok, "models_checked": ok}
    assert report["coverage"]["fuse_bn_into_conv"]["models_changed"] == 0
    assert (tmp_path / "r" / "summary.md").read_text().count("eliminate_identity") >= 1


def test_planted_faults_become_findings_and_the_sweep_completes(corpus: Path, tmp_path: Path):
    code, report, stderr = sweep(
        "--models",
        str(corpus),
        "--optimizer",
        f"{FAULTY}:optimize",
        "--configs",
        "single",
        "--timeout",
        "3",
        "--localize",
        "off",
        out=tmp_path / "r",
    )
    assert code == 1, stderr
    findings = by_model_config(report)
    crash = findings[("segv.onnx", "pass:eliminate_identity")]
    assert crash["kind"] == "optimizer-crash"
    assert crash["evidence"]["signal"] == "SIGSEGV"
    assert findings[("hang.onnx", "pass:fuse_bn_into_conv")]["kind"] == "optimizer-timeout"
    wrong = findings[("wrong.onnx", "pass:eliminate_identity")]
    assert wrong["kind"] == "output-mismatch"
    assert wrong["culprit"] == {
        "scope": "pass",
        "passes": ["eliminate_identity"],
        "method": "single-pass",
        "optimizer_runs": 0,
    }
    assert wrong["evidence"]["max_abs"] > 0.1
    assert ("wrong.onnx", "pass:eliminate_deadend") not in findings
    # every step of the crashing models was still tried, and the healthy models are clean
    assert {c for m, c in findings if m == "segv.onnx"} == {
        "pass:eliminate_identity",
        "pass:eliminate_deadend",
        "pass:fuse_bn_into_conv",
    }
    assert not [k for k in findings if k[0] in ("good.onnx", "nested/good2.onnx")]
    assert report["stats"]["worker_restarts"] == 6


def test_fault_in_every_run_is_one_infrastructure_finding(corpus: Path, tmp_path: Path):
    good = tmp_path / "good.onnx"
    onnx.save(_model("good"), good)
    code, report, _ = sweep(
        "--models",
        str(good),
        "--optimizer",
        f"{FAULTY}:optimize_always_broken",
        "--configs",
        "default,pass:eliminate_identity,pass:eliminate_deadend",
        out=tmp_path / "r",
    )
    assert code == 1
    assert len(report["findings"]) == 1
    finding = report["findings"][0]
    assert finding["config"] == "nop"
    assert finding["culprit"]["scope"] == "infrastructure"
    assert "pass:eliminate_identity" in finding["evidence"]["also_in"]


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--passes", "no_such_pass"], 2, "unknown pass"),
        (["--configs", "bogus"], 2, "unknown config"),
        (["--models", "/does/not/exist.onnx"], 4, "does not exist"),
        (["--optimizer", "no_such_module:optimize"], 5, "cannot import"),
        (["--shard", "4/4"], 2, "out of range"),
    ],
)
def test_bad_input_is_one_line_and_a_distinct_exit_code(tmp_path: Path, corpus: Path, args, code, needle):
    models = [] if "--models" in args else ["--models", str(corpus / "good.onnx")]
    proc = subprocess.run(
        [sys.executable, "-m", "ditox_ci", "sweep", "--out", str(tmp_path / "r"), *models, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == code
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and needle in errors[0] and "Traceback" not in proc.stderr


def test_a_comparator_that_raises_is_an_internal_error_naming_the_model(corpus: Path, tmp_path: Path):
    # a detection comparator cannot decode a [2, 3] tensor: ditox-ci's problem, not the optimizer's,
    # and never a silent skip that leaves the gate green
    code, _, stderr = sweep(
        "--models",
        str(corpus / "good.onnx"),
        "--configs",
        "pass:eliminate_identity",
        "--comparator",
        "detection",
        out=tmp_path / "r",
    )
    assert code == 70
    [line] = [line for line in stderr.splitlines() if "internal error" in line]
    assert "good.onnx (pass:eliminate_identity:" in line and "Traceback" not in stderr


def test_a_bug_of_ours_on_one_model_is_recorded_the_sweep_goes_on_and_exits_70_at_the_end(
    tmp_path: Path,
):
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("ours", "fine"):
        onnx.save(_model(name), folder / f"{name}.onnx")
    # upstream's test_not_eliminate_shape_op_with_negative_dim: valid (it passes the checker), and
    # once the end of every sweep that met it
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3])
    shape = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    nodes = [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Shape", ["i"], ["shape"])]
    negative = helper.make_model(
        helper.make_graph(nodes, "negative", [x], [shape]), opset_imports=[helper.make_opsetid("", 17)]
    )
    negative.ir_version = 8
    onnx.checker.check_model(negative, full_check=True)
    onnx.save(negative, folder / "negative.onnx")

    code, report, stderr = sweep(
        "--models",
        str(folder),
        "--optimizer",
        f"{FAKES / 'internal_fault.py'}:optimize",
        "--configs",
        "default",
        out=tmp_path / "r",
    )

    assert code == 70, stderr
    statuses = {m["id"]: (m["status"], m["reason"]) for m in report["models"]}
    assert statuses["fine.onnx"] == ("ok", "") and statuses["negative.onnx"] == ("ok", "")
    status, reason = statuses["ours.onnx"]
    assert status == "internal-error" and reason.startswith("default: KeyError: 'planted bug in the oracle'")
    [line] = [line for line in stderr.splitlines() if "internal error" in line]
    assert "1 model(s)" in line and "ours.onnx (default: KeyError" in line and "Traceback" not in stderr
    assert (tmp_path / "r" / "summary.md").is_file()
