"""Reduced models read with short names: X for inputs, C for constants, Y for outputs, t between."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.printer
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.report.canonical import canonical

LONG = "GroupNormalization_test_group_normalization_example_expanded_function_"


def _reshapes() -> onnx.ModelProto:
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", [LONG + "XU", LONG + "NewShape"], [LONG + "XReshaped"], name="n1"),
            helper.make_node("Mul", [LONG + "XReshaped", LONG + "scale"], [LONG + "XScaled"]),
            helper.make_node("Reshape", [LONG + "XScaled", LONG + "Shape3D"], [LONG + "X3D"]),
        ],
        "g",
        [
            helper.make_tensor_value_info(LONG + "XU", TensorProto.FLOAT, [3, 4, 2, 2]),
            helper.make_tensor_value_info(LONG + "NewShape", TensorProto.INT64, [5]),
            helper.make_tensor_value_info(LONG + "Shape3D", TensorProto.INT64, [3]),
        ],
        [helper.make_tensor_value_info(LONG + "X3D", TensorProto.FLOAT, [3, 2, 8])],
        [numpy_helper.from_array(np.array(2.0, np.float32), LONG + "scale")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_values_get_short_names_by_role_and_the_feeds_follow():
    feeds = {
        LONG + "XU": np.zeros((3, 4, 2, 2), np.float32),
        LONG + "NewShape": np.array([3, 2, 2, 2, 2], np.int64),
        LONG + "Shape3D": np.array([0, 0, -1], np.int64),
    }
    model, renamed_feeds, mapping = canonical(_reshapes(), feeds)
    onnx.checker.check_model(model)
    # the float input is data; the small integer inputs and the initializer are constants
    assert [v.name for v in model.graph.input] == ["X0", "C1", "C2"]
    assert [t.name for t in model.graph.initializer] == ["C0"]
    assert [(list(n.input), list(n.output)) for n in model.graph.node] == [
        (["X0", "C1"], ["t0"]),
        (["t0", "C0"], ["t1"]),
        (["t1", "C2"], ["Y0"]),
    ]
    assert list(renamed_feeds) == ["X0", "C1", "C2"] and renamed_feeds["C2"].tolist() == [0, 0, -1]
    assert mapping[LONG + "X3D"] == "Y0"
    # no node names: the printer would write each one
    assert all(not node.HasField("name") for node in model.graph.node)


def _if_model(branch_value: str) -> onnx.ModelProto:
    branch = helper.make_graph(
        [helper.make_node("Neg", [LONG + "x"], [branch_value])],
        "branch",
        [],
        [helper.make_tensor_value_info(branch_value, TensorProto.FLOAT, [2])],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], [LONG + "y"], then_branch=branch, else_branch=branch)],
        "g",
        [
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info(LONG + "x", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info(LONG + "y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_a_subgraph_reads_the_outer_values_by_their_new_names_and_keeps_its_own():
    feeds = {"cond": np.array(True), LONG + "x": np.zeros(2, np.float32)}
    model, _, _ = canonical(_if_model("inner"), feeds)
    onnx.checker.check_model(model)
    branch = model.graph.node[0].attribute[0].g
    assert list(branch.node[0].input) == ["X0"] and list(branch.node[0].output) == ["inner"]


def test_a_subgraph_name_that_would_clash_leaves_the_model_as_it_is():
    feeds = {"cond": np.array(True), LONG + "x": np.zeros(2, np.float32)}
    original = _if_model("X0")
    model, renamed_feeds, mapping = canonical(original, feeds)
    assert model == original and renamed_feeds == feeds and mapping == {}
