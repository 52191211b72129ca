"""A skipped model says why: a failing input generator and a model too big for protobuf are named
as such, not as a crash of the original."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import INPUT_GENERATORS
from ditox_ci.engine import original, runner
from ditox_ci.engine.original import EvalSettings, SkipModel, prepare


def _model(path: Path) -> str:
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


def test_a_failing_input_generator_is_named_in_the_skip_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(model, ref, samples, seed):
        raise OSError("font file ocr.ttf not found")

    monkeypatch.setitem(INPUT_GENERATORS, "test-broken", broken)
    ref = ModelRef("m", "t", _model(tmp_path / "m.onnx"), meta={"inputs": "test-broken"})
    with pytest.raises(SkipModel, match=r"input generator 'test-broken' failed: OSError: font file ocr\.ttf"):
        prepare(ref, EvalSettings())


def test_a_model_over_the_protobuf_limit_says_so() -> None:
    """A model over 2 GiB in memory (its external data loaded): protobuf refuses to serialize it, or
    even to say its size, and the skip reason names the limit (4 GiB of memory for a few seconds)."""
    model = onnx.ModelProto()
    weight = model.graph.initializer.add()
    weight.name, weight.raw_data = "w", bytes(2**31 + 2**20)
    said = r"protobuf cannot serialize the model \(.+\): with its external data it is over protobuf's 2 GiB"
    with pytest.raises(SkipModel, match=said):
        original.serialized(model)


def test_a_model_neither_runner_can_run_names_both_reasons(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    onnx.save(helper.make_model(graph, opset_imports=opsets, ir_version=8), tmp_path / "m.onnx")
    with pytest.raises(SkipModel) as raised:
        prepare(ModelRef("m", "t", str(tmp_path / "m.onnx")), EvalSettings())
    reason = str(raised.value)
    assert "ONNX Runtime cannot load the original" in reason
    assert "; the reference runner cannot load the original: " in reason


def test_inputs_too_large_for_the_machine_skip_the_model_not_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy refuses an input of declared shape [200000, 200000] at once (MemoryError): in a worker
    that was an internal error, exit 70 for the whole sweep."""

    def too_large(*args, **kwargs):
        raise MemoryError("Unable to allocate 298. GiB for an array with shape (200000, 200000)")

    monkeypatch.setattr(original, "make_feeds", too_large)  # a real one would depend on the machine
    with pytest.raises(SkipModel, match=r"cannot make inputs: Unable to allocate 298\. GiB"):
        prepare(ModelRef("m", "t", _model(tmp_path / "m.onnx")), EvalSettings())


def test_the_re_draws_recorded_are_those_of_the_runner_that_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ONNX Runtime gives NaN on the first draw and then fails on the second: the reference runner
    judges the model on the first draw, which pinpointing must make again (no stale "redraws")."""
    real_run_all = runner.run_all
    calls: list[int] = []

    def flaky_onnxruntime(session, feeds):
        if isinstance(session, runner.ReferenceSession):
            return real_run_all(session, feeds)
        calls.append(1)
        if len(calls) > 1:
            raise runner.RuntimeRunError("no kernel for this input")
        return [[np.full(2, np.nan, np.float32)] for _ in feeds]

    monkeypatch.setattr(runner, "run_all", flaky_onnxruntime)
    context = prepare(ModelRef("m", "t", _model(tmp_path / "m.onnx")), EvalSettings(calibrate=False))
    assert context.runner == "reference" and len(calls) == 2
    assert context.draw is not None and context.draw.attempt == 0


def test_a_valid_empty_graph_has_no_outputs_to_compare_and_a_cut_file_is_unreadable(tmp_path: Path) -> None:
    """Upstream onnxoptimizer's tests build dozens of graphs without outputs: valid ONNX, with
    nothing for the oracle to compare, not an unreadable file."""
    graph = helper.make_graph([], "empty", [], [])
    empty = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(empty, full_check=True)
    onnx.save(empty, tmp_path / "empty.onnx")
    with pytest.raises(SkipModel, match=r"^no outputs to compare: empty declares none$"):
        prepare(ModelRef("empty", "t", str(tmp_path / "empty.onnx")), EvalSettings())
    data = onnx.load(_model(tmp_path / "m.onnx")).SerializeToString()
    (tmp_path / "cut.onnx").write_bytes(data[:30])
    with pytest.raises(SkipModel, match=r"^unreadable model: "):
        prepare(ModelRef("cut", "t", str(tmp_path / "cut.onnx")), EvalSettings())


def test_an_original_onnx_runtime_cannot_load_is_a_skip_when_its_optimizer_is_under_test(
    tmp_path: Path,
) -> None:
    """TopK on uint64 has no ONNX Runtime kernel, so its original is judged by the reference
    runner; ONNX Runtime's own optimizer cannot take it either, which is no finding of its."""
    graph = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["values", "indices"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.UINT64, [3, 4])],
        [helper.make_tensor_value_info("values", TensorProto.UINT64, [3, 2]),
         helper.make_tensor_value_info("indices", TensorProto.INT64, [3, 2])],
        [onnx.numpy_helper.from_array(np.array([2], np.int64), "k")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)], ir_version=10)
    onnx.save(model, tmp_path / "m.onnx")
    ref = ModelRef("m", "t", str(tmp_path / "m.onnx"))
    assert prepare(ref, EvalSettings()).runner == "reference"
    # measuring noise against the reference runner alone is no reason: a custom adapter may ask it
    assert prepare(ref, EvalSettings(noise_floor="reference")).runner == "reference"
    with pytest.raises(SkipModel, match="the optimizer under test is ONNX Runtime's own"):
        prepare(ref, EvalSettings(noise_floor="reference", runtime_loads_input=True))
