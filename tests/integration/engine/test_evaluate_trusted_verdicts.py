"""Verdicts a gate can trust: real onnxoptimizer and ONNX Runtime, planted faulty optimizers."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import write_recorded_inputs
from ditox_ci.engine.evaluate import EvalSettings, prepare, run_step
from ditox_ci.engine.plan import Step
from ditox_ci.optimizers import load_optimizer
from tests import helpers
from tests.helpers import FAKES
from tests.integration.sequence_models import plain_model, sequence_output_model

PLANTED = "faulty_optimizers:optimize"  # importable from FAKES


def sweep(*args: str, out: Path) -> tuple[int, dict, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])}
    return helpers.sweep("--jobs", "1", *args, out=out, env=env)


def sweep_planted(tmp_path: Path, model: onnx.ModelProto, *args: str) -> tuple[int, dict, str]:
    """Sweep `model` with the planted optimizer, which picks the models it breaks by graph name."""
    path = tmp_path / f"{model.graph.name}.onnx"
    onnx.save(model, path)
    return sweep("--models", str(path), "--optimizer", PLANTED, *args, out=tmp_path / "r")




def test_a_miscompiling_pass_on_a_model_whose_nop_fails_the_checker_is_found_and_blamed(tmp_path: Path):
    args = ("--configs", "default,single", "--reduce-budget", "0")
    code, report, stderr = sweep_planted(tmp_path, sequence_output_model("wrong_seq"), *args)
    assert code == 1, stderr
    findings = {f["config"]: f for f in report["findings"]}
    nop = findings["nop"]
    assert (nop["kind"], nop["culprit"]["scope"]) == ("invalid-model", "infrastructure")
    # the passes that only show nop's checker failure fold into it; the miscompiling one does not
    assert set(nop["evidence"]["also_in"]) == {"pass:eliminate_deadend", "pass:fuse_bn_into_conv"}
    for config in ("default", "pass:eliminate_identity"):
        finding = findings[config]
        assert finding["kind"] == "output-mismatch"
        assert finding["culprit"]["passes"] == ["eliminate_identity"]
        assert "is required but missing" in finding["evidence"]["checker"]
    assert findings["default"]["fingerprint"] == findings["pass:eliminate_identity"]["fingerprint"]


RETYPED = "graph output #0 ('y') element type changed: FLOAT -> DOUBLE"


def test_a_retyped_result_on_a_model_whose_nop_fails_the_checker_is_not_folded_into_nop(tmp_path: Path):
    """The pass's result fails the checker like nop's does, declares an output double, and ONNX
    Runtime refuses it for that: its own verdicts are the refusal and the interface change, the
    checker's is the round trip's (context); every one is judged, the most severe heads it."""
    args = ("--configs", "single", "--reduce-budget", "0")
    code, report, stderr = sweep_planted(tmp_path, sequence_output_model("retype_seq"), *args)
    assert code == 1, stderr
    findings = {f["config"]: f for f in report["findings"]}
    assert findings["nop"]["culprit"]["scope"] == "infrastructure"
    assert "pass:eliminate_identity" not in findings["nop"]["evidence"]["also_in"]
    retyped = findings["pass:eliminate_identity"]
    assert retyped["verdicts"] == ["runtime-load-error", "interface-change"]
    assert (retyped["kind"], retyped["culprit"]["passes"]) == ("runtime-load-error", ["eliminate_identity"])
    assert retyped["evidence"]["other_verdicts"] == {"interface-change": RETYPED}
    assert "is required but missing" in retyped["evidence"]["checker"]


def test_a_retyped_and_invalid_result_is_an_invalid_model_first_and_one_bug_whatever_the_control(
    tmp_path: Path,
):
    """The nop control passes the checker here; the pass's result declares an output double, which
    the checker's inference contradicts: invalid first, then ONNX Runtime's refusal, then the
    interface change. Its fingerprint is that of the same result where nop fails the checker: one
    output is one bug whichever build's round trip it met."""
    args = ("--configs", "single", "--reduce-budget", "0")
    code, report, stderr = sweep_planted(tmp_path, plain_model("retype_plain"), *args)
    assert code == 1, stderr
    [retyped] = [f for f in report["findings"] if f["config"] == "pass:eliminate_identity"]
    assert retyped["verdicts"] == ["invalid-model", "runtime-load-error", "interface-change"]
    assert (retyped["kind"], retyped["culprit"]["passes"]) == ("invalid-model", ["eliminate_identity"])
    assert retyped["evidence"]["other_verdicts"]["interface-change"] == RETYPED
    assert "checker" in retyped["evidence"] and "control" not in retyped["evidence"]
    assert not [f for f in report["findings"] if f["config"] == "nop"]
    (tmp_path / "seq").mkdir()
    code, seq_report, stderr = sweep_planted(tmp_path / "seq", sequence_output_model("retype_plain"), *args)
    assert code == 1, stderr
    [on_seq] = [f for f in seq_report["findings"] if f["config"] == "pass:eliminate_identity"]
    assert on_seq["fingerprint"] == retyped["fingerprint"]


def test_a_real_bugs_fingerprint_does_not_depend_on_the_reduction_budget(tmp_path: Path):
    prints = set()
    for budget in ("0.001", "60"):
        code, report, stderr = sweep(
            "--models",
            "onnx-node:test_group_normalization_example_expanded",
            "--configs",
            "pass:eliminate_consecutive_idempotent_ops",
            "--reduce-budget",
            budget,
            out=tmp_path / budget,
        )
        assert code == 1, stderr
        [finding] = report["findings"]
        prints.add(finding["fingerprint"])
        reductions = finding["evidence"]["reduction"]
        assert reductions["reason"] == ("budget" if budget == "0.001" else "minimal")
    assert len(prints) == 1



def test_an_empty_corpus_or_one_where_nothing_ran_is_exit_4_in_one_line(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, stderr = sweep("--models", str(empty), out=tmp_path / "r")
    assert code == 4 and stderr.strip().count("\n") == 0 and "the corpus is empty" in stderr
    truncated = empty / "truncated.onnx"
    truncated.write_bytes(sequence_output_model("t").SerializeToString()[:40])
    code, report, stderr = sweep("--models", str(empty), out=tmp_path / "r2")
    assert code == 4 and "no model ran: all 1 were skipped" in stderr
    assert report["models"][0]["status"] == "skipped"


def test_max_skipped_gates_when_more_of_the_corpus_was_skipped(tmp_path: Path):
    corpus = tmp_path / "models"
    corpus.mkdir()
    onnx.save(plain_model("good"), corpus / "good.onnx")
    (corpus / "truncated.onnx").write_bytes(sequence_output_model("t").SerializeToString()[:40])
    base = ("--models", str(corpus), "--configs", "pass:eliminate_deadend")
    code, _, stderr = sweep(*base, "--max-skipped", "0.5", out=tmp_path / "r")
    assert code == 0, stderr
    code, _, stderr = sweep(*base, "--max-skipped", "0.4", out=tmp_path / "r2")
    assert code == 1 and "50.0% of the corpus was skipped, more than --max-skipped 0.4" in stderr
    summary = (tmp_path / "r2" / "summary.md").read_text()
    assert "50.0% of the models skipped (**more than --max-skipped 0.4**)" in summary


def test_every_comparator_runs_records_its_numbers_and_the_first_failing_one_gates(tmp_path: Path):
    args = ("--configs", "pass:eliminate_identity", "--comparator", "embedding", "--localize", "off")
    code, report, stderr = sweep_planted(tmp_path, plain_model("wrong"), *args)
    assert code == 1, stderr
    [finding] = report["findings"]
    evidence = finding["evidence"]
    assert evidence["comparator"] == "tensor"
    assert set(evidence["comparators"]) == {"tensor", "embedding"}
    assert evidence["comparators"]["tensor"]["passed"] is False
    embedding = evidence["comparators"]["embedding"]
    assert len([key for key in embedding if key not in ("passed", "message")]) > 0


def test_a_random_ops_output_is_not_a_mismatch_but_its_shape_still_counts(tmp_path: Path):
    # Bernoulli without a seed draws anew on every run: two runs of the original already differ
    code, report, stderr = sweep(
        "--models",
        "onnx-node:test_bernoulli",
        "--configs",
        "pass:rename_input_output",
        "--localize",
        "off",
        out=tmp_path / "r",
    )
    assert code == 0, stderr
    assert report["findings"] == [] and report["models"][0]["status"] == "ok"


def gemm_model(name: str) -> onnx.ModelProto:
    """y = float(x)·W + 100: the bias dominates, so a 0.2 % error in W is within rtol 1e-3 of y; the
    input is an integer one, so no wide-magnitude sample blows the error up past the tolerances."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.INT32, [4, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    weight = onnx.numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    bias = onnx.numpy_helper.from_array(np.full(8, 100.0, np.float32), "c")
    nodes = [
        helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
        helper.make_node("Gemm", ["xf", "w", "c"], ["y"]),
    ]
    graph = helper.make_graph(nodes, name, [x], [y], [weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_small_miscompilation_the_fixed_tolerances_let_through_is_found_against_the_noise_floor(
    tmp_path: Path,
):
    model = tmp_path / "gemm"
    x = np.random.default_rng(1).integers(-3, 4, (4, 16)).astype(np.int32)
    write_recorded_inputs(model, gemm_model("gemm"), [{"x": x}])  # inputs of the model's own scale
    args = ("--models", str(model), "--optimizer", "faulty_optimizers:optimize_scaled_weight")
    args += ("--configs", "pass:eliminate_deadend", "--localize", "off")
    code, report, stderr = sweep(*args, "--calibrate", "off", out=tmp_path / "fixed")
    assert (code, report["findings"]) == (0, []), stderr
    code, report, stderr = sweep(*args, out=tmp_path / "calibrated")
    assert code == 1, stderr
    [finding] = report["findings"]
    evidence = finding["evidence"]
    # flagged against the noise floor, judged against float64: a thousand times the original's own error
    assert finding["kind"] == "output-mismatch" and evidence["rule"] == "fp64"
    assert evidence["error_ratio"] > 1000 and evidence["fp64_error"] > evidence["fp64_bound"]
    assert finding["tier"] == "precision"  # 1e-4 of the output's magnitude


def test_a_sequence_output_is_compared_element_by_element_with_the_tolerances(tmp_path: Path):
    model = sequence_output_model("seq")
    del model.graph.output[0]  # the sequence is the only output
    del model.graph.node[2]
    path = tmp_path / "seq.onnx"
    onnx.save(model, path)
    args = ("--models", str(path), "--optimizer", "faulty_optimizers:optimize_nudged_add")
    args += ("--configs", "pass:eliminate_deadend", "--localize", "off", "--calibrate", "off")
    # within rtol 1e-3 the nudged element passes: the pass shows only nop's checker failure
    code, report, stderr = sweep(*args, out=tmp_path / "loose")
    assert code == 1, stderr
    [nop] = report["findings"]
    assert nop["config"] == "nop" and nop["evidence"]["also_in"] == ["pass:eliminate_deadend"]
    code, report, stderr = sweep(*args, "--rtol", "1e-6", "--atol", "1e-9", out=tmp_path / "tight")
    findings = {f["config"]: f for f in report["findings"]}
    mismatch = findings["pass:eliminate_deadend"]
    assert mismatch["kind"] == "output-mismatch" and mismatch["evidence"]["element"] == 0
    assert 0 < mismatch["evidence"]["max_rel"] < 1e-3


def test_a_probe_without_a_nop_step_gets_the_verdict_a_sweep_step_gets(tmp_path: Path):
    """A localization probe or a reduction candidate has no nop step before it: its verdict is the
    same, since no verdict depends on the control."""
    optimizer = load_optimizer(f"{FAKES / 'faulty_optimizers.py'}:optimize")
    step = Step("probe:eliminate_identity", ("eliminate_identity",))
    verdicts = {}
    for model in (sequence_output_model("retype_seq"), plain_model("retype_plain")):
        path = tmp_path / f"{model.graph.name}.onnx"
        onnx.save(model, path)
        context = prepare(ModelRef(model.graph.name, "t", str(path)), EvalSettings())
        verdicts[model.graph.name] = run_step(context, optimizer, step).kinds
    retyped = ("invalid-model", "runtime-load-error", "interface-change")
    assert verdicts == {"retype_seq": retyped, "retype_plain": retyped}
