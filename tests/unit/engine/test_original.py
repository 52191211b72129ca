"""prepare: the original runs once per sample, and the context says where its inputs came from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import INPUT_GENERATORS, register_input_generator
from ditox_ci.engine import runner
from ditox_ci.engine.noise import random_output_positions
from ditox_ci.engine.original import Draw, EvalSettings, prepare


def _model(path: Path) -> str:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def test_generator_fed_models_are_labelled_as_such_not_random(tmp_path: Path) -> None:
    @register_input_generator("test-twos")
    def twos(model, ref, samples, seed):
        return [{"x": np.full(2, 2.0, np.float32)} for _ in range(samples)]

    try:
        path = _model(tmp_path / "m.onnx")
        generated = prepare(ModelRef("g", "t", path, meta={"inputs": "test-twos"}), EvalSettings(samples=2))
        plain = prepare(ModelRef("p", "t", path), EvalSettings())
    finally:
        del INPUT_GENERATORS["test-twos"]
    assert generated.info.inputs == "generator:test-twos"
    assert [list(out[0]) for out in generated.outputs] == [[-2.0, -2.0]] * 2
    assert plain.info.inputs == "random"


def test_the_outputs_a_seedless_random_op_reaches_are_read_off_the_graph():
    def model(**seed: float) -> onnx.ModelProto:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
        outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [3]) for name in ("plain", "drawn")]
        nodes = [
            helper.make_node("Relu", ["x"], ["plain"]),
            helper.make_node("RandomUniformLike", ["x"], ["noise"], **seed),
            helper.make_node("Add", ["x", "noise"], ["drawn"]),
        ]
        return helper.make_model(helper.make_graph(nodes, "g", [x], outputs))

    assert random_output_positions(model()) == {1}
    assert random_output_positions(model(seed=1.0)) == set()


def _save_exp(path: Path) -> None:
    """y = Exp(x): overflows on the wide-range sample at full scale, not at a tenth."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Exp", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_every_run_of_the_original_counts_the_scaled_back_ones_too(tmp_path: Path) -> None:
    """Exp overflows on the wide-range sample at full scale and not at a tenth: two samples, two
    tries of the wide one, the sign-structured one, then the four kept samples once more for the
    noise floor."""
    _save_exp(tmp_path / "exp.onnx")

    before = runner.runs_so_far()
    context = prepare(ModelRef("exp", "t", str(tmp_path / "exp.onnx")), EvalSettings(samples=2))

    assert context.draw == Draw(samples=2, attempt=0, wide_scales={"x": 0.1}, signed=True)
    assert len(context.feeds) == 4
    assert runner.runs_so_far() - before == 2 + 2 + 1 + 4


def test_a_contexts_draw_makes_its_feeds_again_without_running_the_original(tmp_path: Path) -> None:
    """What pinpointing does in the parent with a job result's Draw: the same samples, the wide
    one scaled back as the worker found it and the sign-structured one, in the same order."""
    _save_exp(tmp_path / "exp.onnx")
    ref, settings = ModelRef("exp", "t", str(tmp_path / "exp.onnx")), EvalSettings(samples=2)
    context = prepare(ref, settings)
    assert context.draw == Draw(2, 0, {"x": 0.1}, signed=True)

    before = runner.runs_so_far()
    again = context.draw.feeds(onnx.load(ref.path), ref, settings)
    assert runner.runs_so_far() == before
    assert len(again) == len(context.feeds) == 4
    for made, judged in zip(again, context.feeds, strict=True):
        np.testing.assert_array_equal(made["x"], judged["x"])


def test_a_negative_dim_is_drawn_at_the_dynamic_size_like_a_symbolic_one(tmp_path: Path) -> None:
    """Upstream onnxoptimizer's test_not_eliminate_shape_op_with_negative_dim: `dim_value: -1`
    passes the checker; numpy refuses a negative size, which used to end the whole sweep."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "n"])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [3])
    graph = helper.make_graph([helper.make_node("Shape", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, tmp_path / "negative.onnx")
    context = prepare(ModelRef("negative", "t", str(tmp_path / "negative.onnx")), EvalSettings(dynamic_dim=4))
    assert context.feeds[0]["x"].shape == (4, 3, 4)
    assert list(context.outputs[0][0]) == [4, 3, 4]


def test_the_step_of_a_quantized_output_is_read_off_the_graph():
    from onnx import TensorProto, helper
    from pytest import approx

    from ditox_ci.engine.noise import quantization_steps

    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.02])
    zero = helper.make_tensor("z", TensorProto.UINT8, [], [3])
    fed = helper.make_tensor("f", TensorProto.FLOAT, [], [0.5])
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
        helper.make_node("Relu", ["dq"], ["through"]),
        helper.make_node("Exp", ["dq"], ["widened"]),
        helper.make_node("DequantizeLinear", ["q", "f", "z"], ["overridable"]),
    ]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in
               ("q", "dq", "through", "widened", "overridable")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                     helper.make_tensor_value_info("f", TensorProto.FLOAT, [])],
        outputs, [scale, zero, fed],
    )
    steps = quantization_steps(helper.make_model(graph))
    # Exp can move two values one step apart much further; an initializer that is also an input
    # may be fed anything
    assert steps == [1.0, approx(0.02), approx(0.02), None, None]
