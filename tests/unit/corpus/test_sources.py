"""randomize_fake_weights: constant fake weights become seeded random ones of the same shape; a made
folder's record stands for its files' hashes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.corpus.loading import model_sha256
from ditox_ci.corpus.sources import materialize_once, randomize_fake_weights, recorded_sha256


def _light_style_model(ir_version: int) -> onnx.ModelProto:
    """Like the onnx wheel's light_* models: weights are ConstantOfShape(0.02) of a shape input."""
    fill = helper.make_tensor("value", TensorProto.FLOAT, [1], [0.02])
    nodes = [
        helper.make_node("ConstantOfShape", ["w_shape"], ["w"], value=fill),
        helper.make_node("Conv", ["x", "w", "b"], ["y"]),
    ]
    initializers = [
        numpy_helper.from_array(np.array([8, 3, 3, 3], dtype=np.int64), "w_shape"),
        numpy_helper.from_array(np.full(8, 0.02, dtype=np.float32), "b"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    if ir_version < 4:
        inputs += [
            helper.make_tensor_value_info("w_shape", TensorProto.INT64, [4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [8]),
        ]
    graph = helper.make_graph(
        nodes,
        "light",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 6, 6])],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = ir_version
    return model


def _weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def test_constant_weights_become_random_initializers_of_the_same_shape() -> None:
    result = randomize_fake_weights(_light_style_model(ir_version=3), "net")
    onnx.checker.check_model(result)
    assert [node.op_type for node in result.graph.node] == ["Conv"]
    weights = _weights(result)
    assert set(weights) == {"w", "b"}
    assert weights["w"].shape == (8, 3, 3, 3) and weights["w"].dtype == np.float32
    assert np.unique(weights["w"]).size > 100
    assert abs(float(weights["w"].std()) - 1 / np.sqrt(27)) < 0.1
    assert weights["b"].shape == (8,) and np.all(weights["b"] > 0)
    assert np.unique(weights["b"]).size == 8
    assert {info.name for info in result.graph.input} == {"x", "w", "b"}


def test_newer_ir_does_not_declare_weights_as_inputs() -> None:
    result = randomize_fake_weights(_light_style_model(ir_version=7), "net")
    onnx.checker.check_model(result)
    assert [info.name for info in result.graph.input] == ["x"]


def test_weights_are_seeded_by_model_name() -> None:
    model = _light_style_model(ir_version=7)
    first = _weights(randomize_fake_weights(model, "net"))
    again = _weights(randomize_fake_weights(model, "net"))
    other = _weights(randomize_fake_weights(model, "other"))
    assert np.array_equal(first["w"], again["w"])
    assert not np.array_equal(first["w"], other["w"])
    assert [node.op_type for node in model.graph.node] == ["ConstantOfShape", "Conv"]


def test_a_made_files_recorded_sha256_stands_for_it_until_the_file_changes(tmp_path: Path) -> None:
    """A report names a made model by its file's sha256 without reading the file again, from the
    record its folder was made with; a file changed since, or no record, has none."""

    def build(folder: Path) -> list[dict]:
        (folder / "case").mkdir()
        (folder / "case" / "model.onnx").write_bytes(b"model bytes")
        (folder / "top.onnx").write_bytes(b"top")
        return [{"name": "case"}]

    made = tmp_path / "made"
    materialize_once(made, build)
    nested, top = made / "case" / "model.onnx", made / "top.onnx"
    assert recorded_sha256(nested) == model_sha256(nested)  # the record one folder up
    assert recorded_sha256(top) == model_sha256(top)
    top.write_bytes(b"changed")
    assert recorded_sha256(top) is None
    loose = tmp_path / "loose.onnx"
    loose.write_bytes(b"x")
    assert recorded_sha256(loose) is None
