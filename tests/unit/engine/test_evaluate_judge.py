"""judge: what it records about an optimized model besides the verdict."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.engine import evaluate
from ditox_ci.engine.evaluate import EvalSettings, judge, judge_bytes, prepare


def test_renamed_outputs_are_named_by_their_old_names_alone(tmp_path: Path) -> None:
    """split_init makes up its new names with a counter that lives as long as the worker, so they
    would differ from run to run; the old names do not."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["z"])],
        "g",
        [x],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in ("y", "z")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    context = prepare(ModelRef("m", "t", str(path)), EvalSettings())

    renamed = onnx.ModelProto()
    renamed.CopyFrom(model)
    renamed.graph.node[0].output[0] = renamed.graph.output[0].name = "r905"
    outcome = judge(context, renamed)

    assert outcome.kind is None
    assert outcome.evidence["info"] == ["outputs renamed: y"]


def test_a_result_the_checker_rejects_from_its_bytes_is_an_invalid_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """judge_bytes hands the checker the bytes it has (no second serialization): a result the
    checker rejects is an invalid-model finding with the checker's words, one it accepts is not."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    context = prepare(ModelRef("m", "t", str(path)), EvalSettings())
    assert context.checker_error is None

    checked: list[type] = []
    real_check = onnx.checker.check_model

    def check_model(model: object, *args: object, **kwargs: object) -> None:
        checked.append(type(model))
        real_check(model, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx.checker, "check_model", check_model)
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    broken.graph.node[0].domain = "no.such.domain"  # ONNX Runtime cannot load it either
    outcome = judge_bytes(context, broken.SerializeToString())
    assert outcome.kind == "invalid-model"
    assert "no.such.domain" in outcome.evidence["checker"]
    # a valid rewrite (the Neg renamed) is judged, run and passes
    renamed = onnx.ModelProto()
    renamed.CopyFrom(model)
    renamed.graph.node[0].name = "negate"
    assert judge_bytes(context, renamed.SerializeToString()).kind is None
    assert checked == [bytes, bytes]


def _neg_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_the_first_result_judged_is_found_again_by_its_bytes_whatever_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model's other results are kept for comparison up to JUDGED_KEPT_MAX_BYTES; the first one
    judged (the nop control's) is kept whatever its size, so a step that gives its bytes again is
    not hashed (0.3 s a step on light/vgg19). A second result over the size is hashed."""
    monkeypatch.setattr(evaluate, "JUDGED_KEPT_MAX_BYTES", 0)
    path = tmp_path / "m.onnx"
    onnx.save(_neg_model(), path)
    context = prepare(ModelRef("m", "t", str(path)), EvalSettings())
    hashed: list[int] = []
    real_sha256 = hashlib.sha256

    def sha256(data: bytes) -> Any:
        hashed.append(len(data))
        return real_sha256(data)

    monkeypatch.setattr(evaluate.hashlib, "sha256", sha256)
    results = []
    for name in ("first", "second"):
        renamed = _neg_model()
        renamed.graph.node[0].name = name
        results.append(renamed.SerializeToString())
    first = judge_bytes(context, results[0])
    assert first.kind is None and hashed == [len(results[0])]
    assert judge_bytes(context, bytes(results[0])) == first
    assert hashed == [len(results[0])] and context.cache_hits == 1
    judge_bytes(context, results[1])
    judge_bytes(context, bytes(results[1]))
    assert hashed == [len(results[0]), len(results[1]), len(results[1])]
    assert context.cache_hits == 2


def test_the_original_is_judged_from_its_files_own_bytes(tmp_path: Path) -> None:
    """A model without external data is handed to the optimizer and the runners as its file has it,
    not serialized again: here a file whose fields are out of protobuf's order (two messages
    written one after the other, which protobuf merges). The round trip through the optimizer
    writes them in order: a changed result, judged, that passes."""
    model = _neg_model()
    graph_only = onnx.ModelProto()
    graph_only.graph.CopyFrom(model.graph)
    model.ClearField("graph")
    data = model.SerializeToString() + graph_only.SerializeToString()
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    context = prepare(ModelRef("m", "t", str(path)), EvalSettings())
    assert context.data == data != context.model.SerializeToString()
    assert context.digest == hashlib.sha256(data).hexdigest()
    outcome = judge_bytes(context, context.model.SerializeToString())
    assert outcome.changed and outcome.kind is None
