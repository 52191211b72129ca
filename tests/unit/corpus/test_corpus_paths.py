"""Path sources and source-spec resolution, on tiny models generated here."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.corpus import CorpusContext, resolve_sources
from ditox_ci.errors import InputError, UsageError
from ditox_ci.log import Log


def _tiny_model() -> onnx.ModelProto:
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _save(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(_tiny_model(), str(path))
    return path


def _ctx(tmp_path: Path) -> CorpusContext:
    return CorpusContext(cache_dir=tmp_path / "cache")


def test_file_source_is_named_by_its_file_name(tmp_path: Path) -> None:
    model = _save(tmp_path / "deep" / "relu.onnx")
    (ref,) = resolve_sources([str(model)], _ctx(tmp_path))
    assert ref.id == "relu.onnx"
    assert ref.source == str(model)
    assert ref.path == str(model)
    assert ref.inputs_dir is None


def test_folder_source_finds_nested_models_sorted_with_posix_ids(tmp_path: Path) -> None:
    root = tmp_path / "models"
    for relative in ("b/z.onnx", "a/c/y.onnx", "x.onnx", "b/a.onnx"):
        _save(root / relative)
    (root / "notes.txt").write_text("not a model")
    refs = resolve_sources([str(root)], _ctx(tmp_path))
    assert [ref.id for ref in refs] == ["a/c/y.onnx", "b/a.onnx", "b/z.onnx", "x.onnx"]
    assert all(Path(ref.path).is_file() for ref in refs)
    assert {ref.source for ref in refs} == {str(root)}


def test_backend_test_layout_sets_inputs_dir(tmp_path: Path) -> None:
    root = tmp_path / "models"
    case = root / "test_relu"
    _save(case / "model.onnx")
    data_set = case / "test_data_set_0"
    data_set.mkdir()
    tensor = numpy_helper.from_array(np.ones(2, dtype=np.float32), "x")
    (data_set / "input_0.pb").write_bytes(tensor.SerializeToString())
    _save(root / "plain" / "model.onnx")
    refs = {ref.id: ref for ref in resolve_sources([str(root)], _ctx(tmp_path))}
    assert refs["test_relu/model.onnx"].inputs_dir == str(case)
    assert refs["plain/model.onnx"].inputs_dir is None


def test_unknown_source_name_is_a_usage_error_listing_known_names(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        resolve_sources(["onnx-nod:test_abs"], _ctx(tmp_path))
    assert "onnx-node" in str(caught.value)
    assert "onnx-data" in str(caught.value)


def test_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        resolve_sources([str(tmp_path / "absent" / "model.onnx")], _ctx(tmp_path))
    assert "does not exist" in str(caught.value)
    assert caught.value.exit_code == 4


def test_repeated_ids_keep_the_first_and_say_so(tmp_path: Path) -> None:
    first = _save(tmp_path / "one" / "m.onnx")
    second = _save(tmp_path / "two" / "m.onnx")
    stream = io.StringIO()
    refs = resolve_sources([str(first), str(second)], _ctx(tmp_path), Log({}, stream=stream))
    assert [ref.path for ref in refs] == [str(first)]
    assert "m.onnx" in stream.getvalue()
    assert "keeping the first" in stream.getvalue()


def test_a_named_source_that_selects_nothing_is_an_input_error_naming_what_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder name is not a glob of its models: the sweep must not go on with the other sources
    as if the corpus were whole."""
    from ditox_ci.corpus import SOURCE_NAMES, SOURCES

    names = ["simple/test_a", "simple/test_b", "light/resnet50"]
    monkeypatch.setitem(SOURCES._entries, "fake", lambda pattern, ctx: [])
    monkeypatch.setitem(SOURCE_NAMES, "fake", lambda ctx: names)
    with pytest.raises(InputError) as caught:
        resolve_sources(["fake:simple"], _ctx(tmp_path))
    said = str(caught.value)
    assert "'fake:simple' selects no model" in said and "did you mean 'fake:simple/*' (2 models)" in said
    with pytest.raises(InputError, match="did you mean 'fake:light/resnet50'"):
        resolve_sources(["fake:light/resnet5"], _ctx(tmp_path))
