"""A difference that shows only where the original's own intermediates overflow is no bug:
eliminate_nop_monotone_argmax drops the Exps of Exp∘Exp→ArgMax, and on the wide-range sample
exp(exp(x)) is inf in float32 (ArgMax over ties of inf) where the optimized answer is right. In
float64 it is finite, and the float64 reference decides as the optimized model does: nothing to
report. Where no float64 reference judges (`--calibrate off`), it is a precision warning."""

from __future__ import annotations

from pathlib import Path

import onnx
import onnxoptimizer
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.evaluate import EvalSettings, judge, prepare
from tests.helpers import sweep

PASS = "eliminate_nop_monotone_argmax"


def _exp_exp_argmax(last: str = "ArgMax") -> onnx.ModelProto:
    graph = helper.make_graph(
        [
            helper.make_node("Exp", ["x"], ["e1"]),
            helper.make_node("Exp", ["e1"], ["e2"]),
            helper.make_node(last, ["e2"], ["y"], axis=1, keepdims=0),
        ],
        "exp_exp_argmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_the_float64_reference_decides_as_the_optimized_model_where_float32_overflowed(
    tmp_path: Path,
) -> None:
    model = _exp_exp_argmax()
    onnx.save(model, tmp_path / "m.onnx")
    context = prepare(ModelRef("m.onnx", "t", str(tmp_path / "m.onnx")), EvalSettings())
    optimized = onnxoptimizer.optimize(model, [PASS])
    assert [node.op_type for node in optimized.graph.node] == ["Exp", "ArgMax"]  # one Exp dropped

    assert judge(context, optimized).kind is None
    assert context.fp64 is not None and context.fp64.available  # it ran, and judged


def test_a_difference_only_on_a_sample_with_saturated_intermediates_is_a_precision_warning(
    tmp_path: Path,
) -> None:
    model = _exp_exp_argmax()
    onnx.save(model, tmp_path / "m.onnx")
    settings = EvalSettings(calibrate=False)
    context = prepare(ModelRef("m.onnx", "t", str(tmp_path / "m.onnx")), settings)
    optimized = onnxoptimizer.optimize(model, [PASS])

    outcome = judge(context, optimized, settings=settings)

    assert outcome.kind == "warning" and outcome.message.startswith("precision:")
    saturated = outcome.evidence["saturated"]
    assert saturated["sample"] == 1 and saturated["tensors"] == ["e1", "e2"]  # the wide-range one
    assert saturated["finite_scale"] is not None  # scaled back it keeps them finite, and they agree
    assert outcome.evidence["mismatch"].startswith("output 'y' differs")


def test_a_wrong_rewrite_that_shows_on_a_finite_sample_too_stays_a_bug(tmp_path: Path) -> None:
    model = _exp_exp_argmax()
    onnx.save(model, tmp_path / "m.onnx")
    context = prepare(ModelRef("m.onnx", "t", str(tmp_path / "m.onnx")), EvalSettings())
    wrong = onnxoptimizer.optimize(_exp_exp_argmax("ArgMin"), [PASS])  # argmin: wrong everywhere

    assert judge(context, wrong).kind == "output-mismatch"


def test_a_sweep_reports_no_new_bug_for_it(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    onnx.save(_exp_exp_argmax(), models / "exp_exp_argmax.onnx")
    # this model's wide-range sample overflows exp(exp(x)) in float64 too: the reference cannot
    # tell, and the difference is the saturated sample's
    code, report, stderr = sweep(
        "--models", str(models), "--configs", f"default,pass:{PASS}", out=tmp_path / "r"
    )
    assert code == 0, stderr
    assert report["findings"] and {f["kind"] for f in report["findings"]} == {"warning"}
    assert all(f["evidence"]["message"].startswith("precision:") for f in report["findings"])
    # the one cause is one warning: default's carries the single pass's fingerprint
    assert len({f["fingerprint"] for f in report["findings"]}) == 1
    assert {f["culprit"]["passes"][0] for f in report["findings"]} == {PASS}
