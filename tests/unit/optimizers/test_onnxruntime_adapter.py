"""ONNX Runtime's graph optimizer as a built-in optimizer: its passes are ORT's own transformer and
rule names, a pass list enables exactly those, and its noise floor is not ORT's optimizations."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.evaluate import EvalSettings, judge, prepare
from ditox_ci.engine.structure import contrib_ops
from ditox_ci.optimizers import load_optimizer
from ditox_ci.optimizers.adapters import onnxruntime_adapter, onnxruntime_extended_adapter
from ditox_ci.report.header import OptimizerInfo


def _identity_then_constant_add(ir_version: int) -> onnx.ModelProto:
    """x -> Identity -> Add(w + w): a rule's target, and a constant to fold. Under IR 3 the
    initializer `w` must be (and is) a graph input too."""
    weight = numpy_helper.from_array(np.ones(2, np.float32), "w")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    if ir_version < 4:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [2]))
    graph = helper.make_graph(
        [
            helper.make_node("Identity", ["x"], ["a"]),
            helper.make_node("Add", ["w", "w"], ["w2"]),
            helper.make_node("Add", ["a", "w2"], ["y"]),
        ],
        "g",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=ir_version)
    onnx.checker.check_model(model, full_check=True)
    return model


def _ops(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


def test_passes_are_orts_transformers_and_rules_by_their_own_names() -> None:
    basic = onnxruntime_adapter.get_available_passes()
    extended = onnxruntime_extended_adapter.get_available_passes()
    expected = {"ConstantFolding", "CommonSubexpressionElimination", "EliminateIdentity", "ConvBNFusion"}
    assert expected <= set(basic)
    # a rule-based transformer stands for its rules: disabling it would hide which rule it was
    assert not any(onnxruntime_adapter.RULE_BASED.fullmatch(name) for name in extended)
    assert set(basic) < set(extended)
    assert {"ConvActivationFusion", "GemmActivationFusion", "ClipQuantRewrite"} <= set(extended) - set(basic)


def test_a_pass_list_enables_exactly_those_transformers_and_the_control_changes_nothing() -> None:
    model = _identity_then_constant_add(ir_version=8)
    assert _ops(onnxruntime_adapter.optimize(model, [], False)) == ["Identity", "Add", "Add"]
    assert _ops(onnxruntime_adapter.optimize(model, ["EliminateIdentity"], False)) == ["Add", "Add"]
    assert _ops(onnxruntime_adapter.optimize(model, ["ConstantFolding"], False)) == ["Identity", "Add"]
    # every pass but one rule: the rule's name is the one ORT disables it by
    others = [name for name in onnxruntime_adapter.get_available_passes() if name != "EliminateIdentity"]
    assert "Identity" in _ops(onnxruntime_adapter.optimize(model, others, False))


def test_ort_constant_folding_writes_initializers_an_ir3_model_does_not_list_as_inputs() -> None:
    """ORT 1.32 (basic and extended): a folded constant becomes an initializer that is not a graph
    input, which IR 3 requires; the control keeps the model valid."""
    model = _identity_then_constant_add(ir_version=3)
    onnx.checker.check_model(onnxruntime_adapter.optimize(model, [], False), full_check=True)
    folded = onnxruntime_adapter.optimize(model, ["ConstantFolding"], False)
    try:
        onnx.checker.check_model(folded, full_check=True)
    except onnx.checker.ValidationError as exc:
        assert "in initializer but not in graph input" in str(exc)
    else:
        raise AssertionError("ORT's IR-3 initializer bug is fixed: update the docs and this test")


def test_its_noise_floor_is_measured_against_the_reference_runner(tmp_path) -> None:
    info = load_optimizer("onnxruntime").info
    assert info.noise_floor == "reference"
    assert load_optimizer("onnxoptimizer").info.noise_floor == "onnxruntime-optimized"
    path = tmp_path / "model.onnx"
    onnx.save(_identity_then_constant_add(ir_version=8), str(path))
    context = prepare(ModelRef("m", "test", str(path)), EvalSettings(noise_floor=info.noise_floor))
    assert context.info.noise_floor == "measured against the reference runner"
    assert all(value is not None and math.isfinite(value) for row in context.noise for value in row)


def test_both_levels_declare_that_they_load_their_input_in_onnxruntime_and_the_sweep_reads_it() -> None:
    """What makes an original ONNX Runtime cannot load a skip for them (engine/original.py)."""
    for name in ("onnxruntime", "onnxruntime-extended"):
        info = load_optimizer(name).info
        assert info.runtime_loads_input and info.to_json()["runtime_loads_input"] is True
        assert OptimizerInfo.from_json(info.to_json()) == info
    plain = load_optimizer("onnxoptimizer").info
    assert not plain.runtime_loads_input and "runtime_loads_input" not in plain.to_json()


def test_an_optimized_model_with_contrib_ops_runs_in_onnxruntime_only_and_says_so(tmp_path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
        initializer=[numpy_helper.from_array(np.ones((1, 1, 2, 2), np.float32), "w")],
    )
    path = tmp_path / "conv_relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    # judged by the reference runner, as a model ONNX Runtime cannot run would be
    context = prepare(ModelRef("m", "test", str(path)), EvalSettings(runner="reference"))
    fused = onnxruntime_extended_adapter.optimize(context.model, ["ConvActivationFusion"], False)
    assert contrib_ops(fused) == ["FusedConv"]
    outcome = judge(context, fused)
    assert outcome.kind is None, outcome.message
    assert "holds com.microsoft ops (FusedConv): run in ONNX Runtime only" in outcome.evidence["info"]
