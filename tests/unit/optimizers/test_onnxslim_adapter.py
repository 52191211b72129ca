"""onnxslim as a built-in optimizer: its stages and patterns are the passes, a pass list turns on
exactly those, and the control is slim's round trip with every stage off."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.optimizers.adapters import onnxslim_adapter


def _model(nodes: list[onnx.NodeProto], x: list[int], y: list[int], **graph: object) -> onnx.ModelProto:
    model = helper.make_model(
        helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)],
            **graph,  # type: ignore[arg-type]
        ),
        opset_imports=[helper.make_opsetid("", 13)],
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def _conv_bn() -> onnx.ModelProto:
    ones = {name: numpy_helper.from_array(np.ones(1, np.float32), name) for name in ("s", "b", "m", "v")}
    return _model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"]),
        ],
        [1, 1, 3, 3],
        [1, 1, 2, 2],
        initializer=[numpy_helper.from_array(np.ones((1, 1, 2, 2), np.float32), "w"), *ones.values()],
    )


def _ops(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


def test_passes_are_slims_stages_and_each_pattern() -> None:
    passes = onnxslim_adapter.get_available_passes()
    assert passes[:5] == [
        "constant_folding",
        "dead_node_elimination",
        "subexpression_elimination",
        "weight_tying",
        "shape_inference",
    ]
    assert {"FusionConvBN", "EliminationSlice", "FusionGemm"} <= set(passes)
    assert "graph_fusion" not in passes, "the patterns are the fusion stage, one by one"


def test_the_control_changes_nothing_and_one_pattern_fuses_alone() -> None:
    model = _conv_bn()
    control = onnxslim_adapter.optimize(onnx.ModelProto.FromString(model.SerializeToString()), [], False)
    assert control.graph == model.graph
    assert _ops(onnxslim_adapter.optimize(_conv_bn(), ["FusionConvBN"], False)) == ["Conv"]
    everything_else = [name for name in onnxslim_adapter.get_available_passes() if name != "FusionConvBN"]
    assert _ops(onnxslim_adapter.optimize(_conv_bn(), everything_else, False)) == [
        "Conv",
        "BatchNormalization",
    ]


def test_slims_shape_inference_crashes_on_a_negative_squeeze_axis() -> None:
    """onnxslim 0.1.98, as onnx-node:test_squeeze_negative_axes shows: the crash is its shape
    inference's, so localization names `shape_inference`."""
    graph = helper.make_graph(
        [helper.make_node("Squeeze", ["x", "axes"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 1, 5]),
            helper.make_tensor_value_info("axes", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnxslim_adapter.optimize(
        onnx.ModelProto.FromString(model.SerializeToString()), ["constant_folding"], False
    )
    with pytest.raises(IndexError):
        onnxslim_adapter.optimize(model, ["shape_inference"], False)
