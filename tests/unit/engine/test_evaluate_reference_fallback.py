"""An empty optional input is fed as None and judged, by whichever runner can run the model (ONNX
Runtime has no OptionalHasElement kernel at opset 28; the reference implementation has)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.evaluate import EvalSettings, SkipModel, prepare


def _empty_optional_case(folder: Path, opset: int) -> ModelRef:
    optional = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    graph = helper.make_graph(
        [helper.make_node("OptionalHasElement", ["maybe"], ["has"])],
        "g",
        [helper.make_value_info("maybe", optional)],
        [helper.make_tensor_value_info("has", TensorProto.BOOL, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=13)
    folder.mkdir()
    onnx.save(model, folder / "model.onnx")
    (folder / "test_data_set_0").mkdir()
    empty = onnx.OptionalProto(name="maybe", elem_type=onnx.OptionalProto.UNDEFINED)
    (folder / "test_data_set_0" / "input_0.pb").write_bytes(empty.SerializeToString())
    return ModelRef("case", "t", str(folder / "model.onnx"), inputs_dir=str(folder))


@pytest.mark.parametrize("opset", [18, 28])
def test_an_empty_optional_input_is_fed_as_none_and_judged(tmp_path: Path, opset: int) -> None:
    context = prepare(_empty_optional_case(tmp_path / "case", opset), EvalSettings())
    assert context.feeds[0]["maybe"] is None
    assert context.outputs[0][0].tolist() is False
    assert context.runner == ("onnxruntime" if opset == 18 else "reference")


def test_runner_onnxruntime_alone_skips_what_it_has_no_kernel_for(tmp_path: Path) -> None:
    with pytest.raises(SkipModel, match="ONNX Runtime cannot"):
        prepare(_empty_optional_case(tmp_path / "case", 28), EvalSettings(runner="onnxruntime"))
