"""Integer inputs are drawn for what consumes them, and the original runs on them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import random_feeds
from ditox_ci.engine import runner

REF = ModelRef(id="m", source="t", path="m.onnx")


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _feed_and_run(model: onnx.ModelProto, seed: int = 0) -> dict:
    (feed,) = random_feeds(model, REF, samples=1, seed=seed)
    runner.run(runner.load_session(model.SerializeToString()), feed)  # the original accepts them
    return feed


def test_gather_indices_cover_the_whole_axis_negative_ones_included():
    model = _model(
        [helper.make_node("Gather", ["data", "idx"], ["y"], axis=1)],
        [
            helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 100]),
            helper.make_tensor_value_info("idx", TensorProto.INT64, [200]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 200])],
    )
    indices = _feed_and_run(model)["idx"]
    assert -100 <= indices.min() < -50 and 50 < indices.max() < 100


def test_token_ids_stay_within_the_embedding_table():
    table = onnx.numpy_helper.from_array(np.zeros((1000, 4), np.float32), "table")
    model = _model(
        [helper.make_node("Gather", ["table", "ids"], ["y"])],
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64, 4])],
        [table],
    )
    ids = _feed_and_run(model)["ids"]
    assert ids.min() >= 0 and 500 < ids.max() < 1000


def test_gather_elements_and_gather_nd_indices_fit_their_data():
    model = _model(
        [
            helper.make_node("GatherElements", ["data", "elements"], ["a"], axis=1),
            helper.make_node("GatherND", ["data", "nd"], ["b"]),
        ],
        [
            helper.make_tensor_value_info("data", TensorProto.FLOAT, [4, 30]),
            helper.make_tensor_value_info("elements", TensorProto.INT64, [4, 50]),
            helper.make_tensor_value_info("nd", TensorProto.INT64, [40, 2]),
        ],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 50]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [40]),
        ],
    )
    feed = _feed_and_run(model)
    assert feed["elements"].min() < -15 and feed["elements"].max() > 15
    assert np.abs(feed["nd"][:, 0]).max() <= 4 and feed["nd"][:, 1].max() > 10


def test_shape_inputs_come_from_the_shapes_they_reshape_and_expand():
    model = _model(
        [
            helper.make_node("Reshape", ["x", "shape"], ["r"]),
            helper.make_node("Expand", ["v", "target"], ["e"]),
            helper.make_node("ConstantOfShape", ["dims"], ["c"]),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
            helper.make_tensor_value_info("v", TensorProto.FLOAT, [3, 1]),
            helper.make_tensor_value_info("target", TensorProto.INT64, [3]),
            helper.make_tensor_value_info("dims", TensorProto.INT64, [2]),
        ],
        [
            helper.make_tensor_value_info("r", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("e", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
        ],
    )
    for seed in range(4):  # Reshape sometimes gets a -1
        feed = _feed_and_run(model, seed)
        shape = feed["shape"].tolist()
        assert shape in ([2, 12], [-1, 12], [2, -1])
        assert feed["target"].tolist() == [1, 3, 1]
        assert feed["dims"].min() >= 1


def test_slice_bounds_and_top_k_fit_their_axis():
    model = _model(
        [
            helper.make_node("Slice", ["x", "starts", "ends"], ["s"]),
            helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [20, 30]),
            helper.make_tensor_value_info("starts", TensorProto.INT64, [2]),
            helper.make_tensor_value_info("ends", TensorProto.INT64, [2]),
            helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("values", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("indices", TensorProto.INT64, None),
        ],
    )
    seen = np.concatenate([_feed_and_run(model, seed)["starts"] for seed in range(8)])
    assert seen.min() < -2 and seen.max() > 2
    assert all(1 <= _feed_and_run(model, seed)["k"][0] <= 30 for seed in range(8))


def test_uint8_spans_its_whole_range():
    model = _model(
        [helper.make_node("Identity", ["pixels"], ["y"])],
        [helper.make_tensor_value_info("pixels", TensorProto.UINT8, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 3, 16, 16])],
    )
    pixels = _feed_and_run(model)["pixels"]
    assert pixels.min() < 10 and pixels.max() > 245
