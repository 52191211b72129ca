"""What a config did to a model (report/effect.py): sizes counted with subgraphs, effects as
differences, and their records round-tripped and added up."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from ditox_ci.control import NOP
from ditox_ci.corpus import ModelRef
from ditox_ci.engine.findings import effect_of
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.pool import JobResult
from ditox_ci.engine.structure import model_size
from ditox_ci.report.effect import NO_EFFECT, Effect, ModelEffect, Size, Totals, by_family, effect_totals


def _if_model() -> onnx.ModelProto:
    """An If whose branches hold an Identity each, beside a top-level Relu and one initializer."""
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "branch", [], [out])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch),
        helper.make_node("FusedThing", ["r"], ["z"], domain="com.microsoft"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])]
    cond = helper.make_tensor("c", TensorProto.BOOL, [], [True])
    graph = helper.make_graph(nodes, "g", inputs, [out], [cond])
    return helper.make_model(graph)


def test_a_models_size_counts_its_subgraphs_and_names_other_domains() -> None:
    size = model_size(_if_model(), 123)
    assert (size.nodes, size.initializers, size.bytes) == (5, 1, 123)
    assert size.ops == {"Identity": 2, "If": 1, "Relu": 1, "com.microsoft::FusedThing": 1}


def test_an_effect_is_what_the_result_gained_and_lost_by_op_type() -> None:
    before = Size(5, 2, 100, {"Relu": 1, "Identity": 3, "Add": 1})
    after = Size(3, 1, 80, {"Relu": 1, "Identity": 1, "Gemm": 1})
    effect = Effect.between(before, after)
    assert effect == Effect(-2, -1, -20, {"Add": -1, "Gemm": 1, "Identity": -2})
    assert effect.ops_removed == {"Add": 1, "Identity": 2}
    assert Effect.from_json(effect.to_json()) == effect
    # a carried result's size is rebuilt from the original's and its stored effect
    assert effect.applied_to(before) == after
    assert NO_EFFECT.applied_to(before) == before


def test_totals_add_up_per_config_and_per_family() -> None:
    one = ModelEffect(10, 2, 500, {"default": Effect(-3, -1, -50), "nop": Effect(0, 0, 4)})
    two = ModelEffect(6, 0, 300, {"default": Effect(-1, 0, -9)})
    assert ModelEffect.from_json(one.to_json()) == one
    assert one.nodes_after("default") == 7 and one.nodes_after("pass:x") == 10
    totals = effect_totals([one, two])
    assert totals == {"default": Totals(2, -4, -1, -59), "nop": Totals(1, 0, 0, 4)}
    assert by_family([("cnn", one), ("cnn", two), ("nlp", two)]) == {
        "cnn": {"models": 2, "nodes": 16, "after": 12},
        "nlp": {"models": 1, "nodes": 6, "after": 5},
    }


def _outcome(size: Size | None, changed: bool = True) -> Outcome:
    return Outcome(None, changed=changed, size=size, digest="d" if changed else "")


def test_a_config_that_did_what_the_control_did_is_read_as_the_control() -> None:
    """Half of a default sweep's configs only show the round trip's change: they are not written,
    and read back as the control's; one that left the model as it was while the control did not
    is written as no change."""
    original = Size(3, 1, 100, {"Identity": 1, "Add": 1, "Tanh": 1})
    round_trip = Size(3, 1, 96, {"Identity": 1, "Add": 1, "Tanh": 1})
    fused = Size(2, 1, 70, {"Add": 1, "Tanh": 1})
    ref = ModelRef(id="m", source="test", path="m.onnx")
    outcomes = {
        NOP: _outcome(round_trip),
        "pass:eliminate_nop_pad": _outcome(round_trip),
        "pass:eliminate_identity": _outcome(fused),
        "pass:odd": _outcome(None, changed=False),
    }
    effect = effect_of(JobResult(ref, "ok", outcomes=outcomes, size=original))
    assert effect is not None
    assert set(effect.configs) == {NOP, "pass:eliminate_identity", "pass:odd"}
    assert effect.of("pass:eliminate_nop_pad") == effect.of(NOP) == Effect(0, 0, -4)
    assert effect.of("pass:odd") == Effect(0, 0, 0)
    assert effect.nodes_after("pass:eliminate_identity") == 2
