"""load_model: corrupt, truncated and unsafe models are refused with ModelLoadError."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.loading import ModelLoadError, load_model, model_sha256


def _weighted_model(weight: np.ndarray) -> onnx.ModelProto:
    node = helper.make_node("Add", ["x", "w"], ["y"])
    graph = helper.make_graph(
        [node],
        "weighted",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(weight.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(weight.shape))],
        initializer=[numpy_helper.from_array(weight, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ref(path: Path) -> ModelRef:
    return ModelRef(id=path.name, source=str(path), path=str(path))


def _external_model(folder: Path, location: str) -> Path:
    """A model whose weight lives in external data at `location` (which may point anywhere)."""
    weight = np.arange(64, dtype=np.float32)
    model = _weighted_model(weight)
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(weight.nbytes))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def test_valid_model_loads(tmp_path: Path) -> None:
    path = tmp_path / "ok.onnx"
    onnx.save(_weighted_model(np.ones((4, 4), dtype=np.float32)), str(path))
    model = load_model(_ref(path))
    assert model.graph.node[0].op_type == "Add"


def test_truncated_model_is_refused(tmp_path: Path) -> None:
    data = _weighted_model(np.ones((32, 32), dtype=np.float32)).SerializeToString()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="truncated"):
        load_model(_ref(path))


def test_garbage_and_empty_files_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff\xfe not a protobuf \x00\x01" * 10)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    for path in (garbage, empty):
        with pytest.raises(ModelLoadError):
            load_model(_ref(path))


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="cannot read"):
        load_model(_ref(tmp_path / "absent.onnx"))


def test_external_data_inside_the_folder_is_inlined(tmp_path: Path) -> None:
    path = _external_model(tmp_path / "model", "weights/w.bin")
    (tmp_path / "model" / "weights").mkdir()
    (tmp_path / "model" / "weights" / "w.bin").write_bytes(
        np.arange(64, dtype=np.float32).tobytes()
    )
    model = load_model(_ref(path))
    weight = numpy_helper.to_array(model.graph.initializer[0])
    assert np.array_equal(weight, np.arange(64, dtype=np.float32))
    assert model.graph.initializer[0].data_location == TensorProto.DEFAULT


def test_external_data_escaping_the_folder_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.zeros(64, dtype=np.float32).tobytes())
    path = _external_model(tmp_path / "model", "../secret.bin")
    with pytest.raises(ModelLoadError, match="escapes"):
        load_model(_ref(path))


def test_absolute_external_data_location_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.zeros(64, dtype=np.float32).tobytes())
    path = _external_model(tmp_path / "model", str(secret))
    with pytest.raises(ModelLoadError, match="absolute"):
        load_model(_ref(path))


def test_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.zeros(64, dtype=np.float32).tobytes())
    path = _external_model(tmp_path / "model", "link.bin")
    os.symlink(secret, tmp_path / "model" / "link.bin")
    with pytest.raises(ModelLoadError, match="escapes"):
        load_model(_ref(path))


def test_external_data_in_a_function_attribute_list_is_checked_too(tmp_path: Path) -> None:
    """Every tensor the model holds is checked, local function bodies included."""
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.zeros(64, dtype=np.float32).tobytes())
    model = _weighted_model(np.ones(4, dtype=np.float32))
    tensor = numpy_helper.from_array(np.zeros(64, dtype=np.float32), "hidden")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "../secret.bin"
    node = helper.make_node("Constant", [], ["c"])
    node.attribute.append(helper.make_attribute("values", [tensor]))
    model.functions.append(
        helper.make_function("local", "f", [], ["c"], [node], [helper.make_opsetid("", 17)])
    )
    (tmp_path / "model").mkdir()
    path = tmp_path / "model" / "model.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelLoadError, match="escapes"):
        load_model(_ref(path))


def test_external_data_shorter_than_declared_is_refused(tmp_path: Path) -> None:
    path = _external_model(tmp_path / "model", "w.bin")
    (tmp_path / "model" / "w.bin").write_bytes(b"\x00" * 10)
    with pytest.raises(ModelLoadError, match="past the end"):
        load_model(_ref(path))


def test_model_sha256_hashes_the_file_bytes(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(_weighted_model(np.ones(3, dtype=np.float32)), str(path))
    assert model_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    onnx.save(_weighted_model(np.zeros(3, dtype=np.float32)), str(path))
    assert model_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("case", ["link-loop", "nul-byte", "a-folder"])
def test_external_data_that_cannot_be_resolved_or_read_is_the_models_error(
    tmp_path: Path, case: str
) -> None:
    """Each ended the sweep as ditox-ci's own internal error (exit 70), not a skipped model."""
    folder = tmp_path / "model"
    location = {"link-loop": "loop.bin", "nul-byte": "we\0ights.bin", "a-folder": "weights.bin"}[case]
    path = _external_model(folder, location)
    if case == "link-loop":
        os.symlink("loop.bin", folder / "loop.bin")
    if case == "a-folder":
        (folder / "weights.bin").mkdir()
    with pytest.raises(ModelLoadError, match="tensor 'w'"):
        load_model(_ref(path))
