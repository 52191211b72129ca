"""reduce: why it stops before shrinking anything, when the model as found does not fail again."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ditox_ci.engine.outcome import Outcome
from ditox_ci.pinpoint.reduce import Subgraphs, Verdict, reduce, same_finding
from ditox_ci.report.evidence import ReductionEnd

FAILURE = Outcome("optimizer-error", "RuntimeError: boom", {"message": "RuntimeError: boom"})


def _model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]))


def _reason(verdict: Outcome | None) -> ReductionEnd:
    still_fails = same_finding(lambda model, feeds: verdict, FAILURE)
    return reduce(_model(), [{"x": np.ones(2, np.float32)}], still_fails, budget_s=5).record.reason


def test_a_model_that_passes_when_run_again_is_not_reproducible() -> None:
    assert _reason(Outcome(None)) is ReductionEnd.NOT_REPRODUCIBLE


def test_a_model_the_pool_cannot_judge_is_unjudgeable_not_nondeterministic() -> None:
    assert _reason(None) is ReductionEnd.UNJUDGEABLE


def test_a_model_that_fails_again_is_shrunk() -> None:
    assert _reason(FAILURE) is ReductionEnd.MINIMAL


def _long_named() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("input_with_a_long_name", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("output_with_a_long_name", TensorProto.FLOAT, [2])
    nodes = [
        helper.make_node("Relu", ["input_with_a_long_name"], ["relu_with_a_long_name"]),
        helper.make_node("Neg", ["relu_with_a_long_name"], ["output_with_a_long_name"]),
    ]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]))


def test_the_smallest_model_gets_short_names_when_it_still_fails_so() -> None:
    """Fails only while a Neg is left, so the smallest model is the Neg alone, fed the Relu's output."""
    seen: list[set[str]] = []

    def still_fails(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> Verdict:
        seen.append({name for feed in feeds for name in feed})
        return Verdict.FAILS if any(node.op_type == "Neg" for node in model.graph.node) else Verdict.PASSES

    result = reduce(_long_named(), [{"input_with_a_long_name": np.ones(2, np.float32)}], still_fails, 5)
    assert [(n.op_type, list(n.input), list(n.output)) for n in result.model.graph.node] == [
        ("Neg", ["X0"], ["Y0"])
    ]
    assert [set(feed) for feed in result.feeds] == [{"X0"}] and seen[-1] == {"X0"}
    assert result.names == {"relu_with_a_long_name": "X0", "output_with_a_long_name": "Y0"}
    assert result.record.checks == len(seen)


def test_a_failure_that_turns_on_names_keeps_the_names_it_was_found_with() -> None:
    def still_fails(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> Verdict:
        named = any(name.endswith("long_name") for node in model.graph.node for name in node.output)
        return Verdict.FAILS if named else Verdict.PASSES

    result = reduce(_long_named(), [{"input_with_a_long_name": np.ones(2, np.float32)}], still_fails, 5)
    assert result.names == {}
    assert {o for node in result.model.graph.node for o in node.output} <= {
        "relu_with_a_long_name",
        "output_with_a_long_name",
    }


def test_a_cut_through_a_sequence_is_never_built() -> None:
    """A candidate that would be fed a sequence (the original's own sequence input) cannot be
    declared from the values recorded for it: it is skipped, where it was an internal error."""
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    seq = helper.make_value_info("s", helper.make_sequence_type_proto(element))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    position = onnx.numpy_helper.from_array(np.array(0, np.int64), "zero")
    nodes = [helper.make_node("SequenceAt", ["s", "zero"], ["a"]), helper.make_node("Neg", ["a"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [seq], [y], [position]))
    recorded = [{"s": [np.ones(2, np.float32)], "a": np.ones(2, np.float32), "y": -np.ones(2, np.float32)}]
    subgraphs = Subgraphs(model, recorded)
    assert subgraphs.build([0]) is None  # fed the sequence
    built = subgraphs.build([1])  # fed the tensor SequenceAt made
    assert built is not None and [v.name for v in built[0].graph.input] == ["a"]
