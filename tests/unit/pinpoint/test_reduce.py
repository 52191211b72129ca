"""reduce: why it stops before shrinking anything, when the model as found does not fail again."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ditox_ci.engine.outcome import Outcome
from ditox_ci.pinpoint.reduce import reduce, same_finding

FAILURE = Outcome("optimizer-error", "RuntimeError: boom", {"message": "RuntimeError: boom"})


def _model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]))


def _reason(verdict: Outcome | None) -> str:
    still_fails = same_finding(lambda model, feeds: verdict, FAILURE)
    return reduce(_model(), [{"x": np.ones(2, np.float32)}], still_fails, budget_s=5).reason


def test_a_model_that_passes_when_run_again_is_not_reproducible() -> None:
    assert _reason(Outcome(None)) == "not-reproducible"


def test_a_model_the_pool_cannot_judge_is_unjudgeable_not_nondeterministic() -> None:
    assert _reason(None) == "unjudgeable"


def test_a_model_that_fails_again_is_shrunk() -> None:
    assert _reason(FAILURE) == "minimal"
