"""Feeding a result whose interface changed: retyped inputs get their values cast, when that keeps
them; and only unchanged outputs are compared."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ditox_ci.engine.interface import fed, outputs_unchanged


def _model(input_type: int, output_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", input_type, [3])],
        [helper.make_tensor_value_info("y", output_type, [3])],
    )
    return helper.make_model(graph)


def test_a_retyped_input_is_fed_its_value_cast_as_the_pass_means_callers_to():
    """rewrite_input_dtype narrows int64 inputs to int32: a caller feeds int32."""
    original, narrowed = _model(TensorProto.INT64), _model(TensorProto.INT32)
    [feed] = fed([{"x": np.array([1, -2, 3], np.int64)}], original, narrowed)
    assert feed["x"].dtype == np.int32 and feed["x"].tolist() == [1, -2, 3]


def test_a_value_the_cast_cannot_hold_feeds_nothing():
    """An int64 beyond int32 would be another value: the result is not run on it (the bit-cast
    test's random int64 bits made a mismatch of the sweep's own making)."""
    original, narrowed = _model(TensorProto.INT64), _model(TensorProto.INT32)
    assert fed([{"x": np.array([1, 2**40, 3], np.int64)}], original, narrowed) is None


def test_another_number_of_inputs_feeds_nothing_and_changed_outputs_are_not_compared():
    original = _model(TensorProto.FLOAT)
    fewer = helper.make_model(
        helper.make_graph(
            [
                helper.make_node(
                    "Constant", [], ["y"], value=onnx.numpy_helper.from_array(np.zeros(3, np.float32))
                )
            ],
            "g",
            [],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        )
    )
    assert fed([{"x": np.zeros(3, np.float32)}], original, fewer) is None
    assert outputs_unchanged(original, _model(TensorProto.FLOAT))
    assert not outputs_unchanged(original, _model(TensorProto.FLOAT, TensorProto.DOUBLE))
