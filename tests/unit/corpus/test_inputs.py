"""make_feeds: recorded inputs, seeded random inputs, generators, and the types it refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import (
    INPUT_GENERATORS,
    InputSpecError,
    derive_seed,
    has_recorded_inputs,
    make_feeds,
    recorded_feeds,
    register_input_generator,
    write_recorded_inputs,
)

ALL_TYPES = {
    "f16": (TensorProto.FLOAT16, np.float16),
    "f32": (TensorProto.FLOAT, np.float32),
    "f64": (TensorProto.DOUBLE, np.float64),
    "i8": (TensorProto.INT8, np.int8),
    "i32": (TensorProto.INT32, np.int32),
    "i64": (TensorProto.INT64, np.int64),
    "u8": (TensorProto.UINT8, np.uint8),
    "u64": (TensorProto.UINT64, np.uint64),
    "b": (TensorProto.BOOL, np.bool_),
}


def _identity_model(inputs: list[onnx.ValueInfoProto], initializers=()) -> onnx.ModelProto:
    nodes = [helper.make_node("Identity", [info.name], [f"{info.name}_out"]) for info in inputs]
    outputs = [helper.make_value_info(f"{info.name}_out", info.type) for info in inputs]
    graph = helper.make_graph(nodes, "feeds", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ref(model_id: str = "m", inputs_dir: Path | None = None, **meta: str) -> ModelRef:
    return ModelRef(
        id=model_id,
        source="test",
        path="unused.onnx",
        inputs_dir=str(inputs_dir) if inputs_dir else None,
        meta=dict(meta),
    )


def test_random_feeds_cover_every_supported_dtype_and_shape() -> None:
    inputs = [
        helper.make_tensor_value_info(name, elem, [3, "batch", None])
        for name, (elem, _) in ALL_TYPES.items()
    ]
    inputs.append(helper.make_tensor_value_info("s", TensorProto.STRING, [4]))
    (feed,) = make_feeds(_identity_model(inputs), _ref(), samples=1, seed=0, dynamic_dim=5)
    for name, (_, dtype) in ALL_TYPES.items():
        assert feed[name].dtype == dtype, name
        assert feed[name].shape == (3, 5, 5), name
    assert feed["s"].shape == (4,)
    assert all(isinstance(text, str) and text for text in feed["s"])
    floats = np.concatenate([feed[n].astype(np.float64).ravel() for n in ("f16", "f32", "f64")])
    assert np.all(np.isfinite(floats)) and np.all(np.abs(floats) <= 2.0)
    assert floats.min() < 0 < floats.max()
    for name in ("i8", "i32", "i64", "u64"):
        assert feed[name].min() >= 0 and feed[name].max() < 5, name
    assert feed["u8"].max() >= 128  # pixels and quantized values span the whole range


def test_random_sequence_and_optional_inputs() -> None:
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    inputs = [
        helper.make_value_info("seq", helper.make_sequence_type_proto(element)),
        helper.make_value_info("opt", helper.make_optional_type_proto(element)),
    ]
    (feed,) = make_feeds(_identity_model(inputs), _ref(), samples=1, seed=0, dynamic_dim=3)
    assert isinstance(feed["seq"], list) and len(feed["seq"]) == 3
    assert all(item.shape == (2,) and item.dtype == np.float32 for item in feed["seq"])
    assert feed["opt"].shape == (2,)


def test_random_feeds_are_deterministic_and_depend_on_seed_model_sample_attempt() -> None:
    model = _identity_model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])])
    first = make_feeds(model, _ref("a"), samples=2, seed=7)
    again = make_feeds(model, _ref("a"), samples=2, seed=7)
    assert all(np.array_equal(f["x"], g["x"]) for f, g in zip(first, again, strict=True))
    assert not np.array_equal(first[0]["x"], first[1]["x"])
    others = [
        make_feeds(model, _ref("b"), samples=1, seed=7)[0]["x"],
        make_feeds(model, _ref("a"), samples=1, seed=8)[0]["x"],
        make_feeds(model, _ref("a"), samples=1, seed=7, attempt=1)[0]["x"],
    ]
    assert all(not np.array_equal(first[0]["x"], other) for other in others)


def test_redraws_are_positive_so_log_and_sqrt_stay_finite() -> None:
    model = _identity_model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])])
    (feed,) = make_feeds(model, _ref(), samples=1, seed=0, attempt=2)
    assert feed["x"].min() > 0


def test_derive_seed_is_stable_text_hashing() -> None:
    assert derive_seed(1, "m", 0, 0) == derive_seed(1, "m", 0, 0)
    assert len({derive_seed(1, "m", s, a) for s in range(3) for a in range(3)}) == 9
    assert 0 <= derive_seed(0, "m", 0, 0) < 2**64


def test_initializer_backed_inputs_are_not_fed() -> None:
    inputs = [
        helper.make_tensor_value_info("w", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
    ]
    weight = numpy_helper.from_array(np.ones(2, dtype=np.float32), "w")
    model = _identity_model(inputs, [weight])
    model.ir_version = 3
    (feed,) = make_feeds(model, _ref(), samples=1, seed=0)
    assert list(feed) == ["x"]


def _write_data_set(folder: Path, index: int, arrays: list[np.ndarray]) -> None:
    data_set = folder / f"test_data_set_{index}"
    data_set.mkdir(parents=True)
    for i, array in enumerate(arrays):
        (data_set / f"input_{i}.pb").write_bytes(numpy_helper.from_array(array).SerializeToString())


def test_recorded_inputs_bind_by_position_skipping_initializers(tmp_path: Path) -> None:
    inputs = [
        helper.make_tensor_value_info("w", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("b", TensorProto.INT64, [3]),
    ]
    model = _identity_model(inputs, [numpy_helper.from_array(np.ones(2, np.float32), "w")])
    for k in range(3):
        _write_data_set(
            tmp_path, k, [np.full(2, k, dtype=np.float32), np.arange(3, dtype=np.int64) + k]
        )
    ref = _ref(inputs_dir=tmp_path)
    assert has_recorded_inputs(ref)
    feeds = make_feeds(model, ref, samples=2, seed=0)
    assert len(feeds) == 2
    for k, feed in enumerate(feeds):
        assert np.array_equal(feed["a"], np.full(2, k, dtype=np.float32))
        assert np.array_equal(feed["b"], np.arange(3) + k)
    redrawn = make_feeds(model, ref, samples=2, seed=5, attempt=1)
    assert np.array_equal(redrawn[1]["a"], feeds[1]["a"])


def test_data_sets_are_taken_in_numeric_order(tmp_path: Path) -> None:
    model = _identity_model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])])
    for k in (10, 2, 1):
        _write_data_set(tmp_path, k, [np.full(1, k, dtype=np.float32)])
    feeds = make_feeds(model, _ref(inputs_dir=tmp_path), samples=5, seed=0)
    assert [float(feed["x"][0]) for feed in feeds] == [1.0, 2.0, 10.0]


def test_folder_without_data_sets_falls_back_to_random(tmp_path: Path) -> None:
    model = _identity_model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])])
    ref = _ref(inputs_dir=tmp_path)
    assert not has_recorded_inputs(ref)
    (feed,) = make_feeds(model, ref, samples=1, seed=0)
    assert feed["x"].shape == (4,)


@pytest.mark.parametrize("elem", [TensorProto.COMPLEX64, TensorProto.COMPLEX128])
def test_types_without_random_inputs_are_refused(elem: int) -> None:
    model = _identity_model([helper.make_tensor_value_info("x", elem, [2])])
    with pytest.raises(InputSpecError, match=TensorProto.DataType.Name(elem)):
        make_feeds(model, _ref(), samples=1, seed=0)


def test_map_inputs_are_refused() -> None:
    map_type = helper.make_map_type_proto(
        TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, [])
    )
    model = _identity_model([helper.make_value_info("m", map_type)])
    with pytest.raises(InputSpecError, match="map_type"):
        make_feeds(model, _ref(), samples=1, seed=0)


def test_recorded_bfloat16_inputs_are_read_as_ml_dtypes_arrays(tmp_path: Path) -> None:
    model = _identity_model([helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2])])
    data_set = tmp_path / "test_data_set_0"
    data_set.mkdir()
    tensor = helper.make_tensor("x", TensorProto.BFLOAT16, [2], [1.0, 2.0])
    (data_set / "input_0.pb").write_bytes(tensor.SerializeToString())
    (feed,) = make_feeds(model, _ref(inputs_dir=tmp_path), samples=1, seed=0)
    assert feed["x"].dtype.name == "bfloat16" and feed["x"].astype(np.float32).tolist() == [1.0, 2.0]


def test_registered_generator_is_used_and_sees_attempt_in_its_seed() -> None:
    seen: list[int] = []

    @register_input_generator("test-corpus-constant")
    def constant(model: onnx.ModelProto, ref: ModelRef, samples: int, seed: int) -> list[dict]:
        seen.append(seed)
        return [{"x": np.full(2, sample, dtype=np.float32)} for sample in range(samples)]

    try:
        model = _identity_model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])])
        ref = _ref(inputs="test-corpus-constant")
        feeds = make_feeds(model, ref, samples=3, seed=0)
        make_feeds(model, ref, samples=1, seed=0, attempt=1)
    finally:
        del INPUT_GENERATORS["test-corpus-constant"]
    assert [float(feed["x"][0]) for feed in feeds] == [0.0, 1.0, 2.0]
    assert len(set(seen)) == 2


def test_unknown_generator_name_is_refused() -> None:
    model = _identity_model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])])
    with pytest.raises(InputSpecError, match="no-such-generator"):
        make_feeds(model, _ref(inputs="no-such-generator"), samples=1, seed=0)


def test_recorded_sequences_and_optionals_read_back_as_written(tmp_path: Path) -> None:
    """A reduction candidate's inputs are written and read back: a sequence or an optional must
    not come back as a tensor of UNDEFINED element type."""
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, [3])
    sequence = helper.make_sequence_type_proto(element)
    inputs = [
        helper.make_tensor_value_info("t", TensorProto.INT64, [2]),
        helper.make_value_info("s", sequence),
        helper.make_value_info("o", helper.make_optional_type_proto(sequence)),
        helper.make_value_info("none", helper.make_optional_type_proto(element)),
    ]
    nodes = [helper.make_node("Identity", [i.name], [f"{i.name}_out"]) for i in inputs]
    outputs = [helper.make_value_info(f"{i.name}_out", i.type) for i in inputs]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs))
    feed = {
        "t": np.array([3, 4], np.int64),
        "s": [np.ones(3, np.float32), np.zeros(3, np.float32)],
        "o": [np.full(3, 2.0, np.float32)],
        "none": None,
    }
    write_recorded_inputs(tmp_path, model, [feed])

    [back] = recorded_feeds(model, ModelRef("m", "t", str(tmp_path / "model.onnx"), str(tmp_path)), 1)
    assert back["t"].tolist() == [3, 4]
    assert [a.tolist() for a in back["s"]] == [[1.0] * 3, [0.0] * 3]
    assert [a.tolist() for a in back["o"]] == [[2.0] * 3]
    assert back["none"] is None


@pytest.mark.parametrize("planted", ["a-folder", "a-dangling-link"])
def test_a_recorded_input_that_is_no_readable_file_skips_the_model_saying_which(
    tmp_path: Path, planted: str
) -> None:
    """A pull request can add either beside a model: it ended the sweep in exit 70."""
    model = _identity_model([helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])], [])
    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    if planted == "a-folder":
        (folder / "input_0.pb").mkdir()
    else:
        (folder / "input_0.pb").symlink_to(tmp_path / "gone.pb")
    with pytest.raises(InputSpecError, match=r"test_data_set_0/input_0\.pb: unreadable recorded input"):
        make_feeds(model, _ref(inputs_dir=tmp_path), samples=1, seed=0)
