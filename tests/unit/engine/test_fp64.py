"""The float64 reference: what is widened, what is trusted, and how the tensor oracle judges by it."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.compare.tensor import FP64_RATIO, fp64_check, tie_check
from ditox_ci.engine import fp64, runner


def _cast_model() -> onnx.ModelProto:
    """y = Cast<float16>(x · w) + c, with a Constant and an If whose branch computes in float32."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3])
    branch = helper.make_graph(
        [helper.make_node("Identity", ["h"], ["out"])],
        "branch",
        [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT16, [2, 3])],
    )
    nodes = [
        helper.make_node("Mul", ["x", "w"], ["p"]),
        helper.make_node("Cast", ["p"], ["h0"], to=TensorProto.FLOAT16),
        helper.make_node(
            "Constant", [], ["c"], value=numpy_helper.from_array(np.full((2, 3), 0.5, np.float16))
        ),
        helper.make_node("Add", ["h0", "c"], ["h"]),
        helper.make_node("Constant", [], ["yes"], value=numpy_helper.from_array(np.array(True))),
        helper.make_node("If", ["yes"], ["y"], then_branch=branch, else_branch=branch),
    ]
    weight = numpy_helper.from_array(np.linspace(0.1, 0.6, 6, dtype=np.float32).reshape(2, 3), "w")
    graph = helper.make_graph(nodes, "casts", [x], [y], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_every_float_tensor_is_widened_and_nothing_else():
    wide = fp64.widened(_cast_model())
    double = TensorProto.DOUBLE
    assert wide.graph.input[0].type.tensor_type.elem_type == double
    assert wide.graph.output[0].type.tensor_type.elem_type == double
    assert wide.graph.initializer[0].data_type == double
    by_type = {node.op_type: node for node in wide.graph.node}
    assert by_type["Cast"].attribute[0].i == double
    constants = [node for node in wide.graph.node if node.op_type == "Constant"]
    assert [c.attribute[0].t.data_type for c in constants] == [double, TensorProto.BOOL]
    branch = by_type["If"].attribute[0].g
    assert branch.output[0].type.tensor_type.elem_type == double
    onnx.checker.check_model(wide, full_check=True)


def test_the_reference_runs_in_float64_and_keeps_the_original_untouched():
    model = _cast_model()
    before = model.SerializeToString()
    feed = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) / 7}
    original = runner.run(runner.load_session(before), feed)
    reference = fp64.reference(model, [feed], [original], 1, 0)
    assert reference.available and model.SerializeToString() == before
    [[(exact,)]] = reference.values
    assert exact.dtype == np.float64
    np.testing.assert_allclose(
        exact, feed["x"].astype(np.float64) * np.linspace(0.1, 0.6, 6).reshape(2, 3) + 0.5
    )
    # the float16 output is off by float16's rounding, which the reference is trusted within
    assert 0 < np.abs(original[0].astype(np.float64) - exact).max() < 1e-2


def test_a_reference_far_from_the_original_is_not_trusted():
    """A widening that changed what the model computes (here: float16 flushing values below its
    range to zero, which float64 does not) leaves that output to the noise-floor rule."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [
        helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "flushes", [x], [y]),
        ir_version=8,
        opset_imports=[helper.make_opsetid("", 17)],
    )
    feed = {"x": np.array([1e-9, 2e-9], np.float32)}
    original = runner.run(runner.load_session(model.SerializeToString()), feed)
    assert not original[0].any()  # float16 flushed them to zero
    reference = fp64.reference(model, [feed], [original], 1, 0)
    assert reference.values[0][0] is None


def test_the_float64_rule_lets_through_what_the_originals_own_rounding_allows():
    exact = np.linspace(-1, 1, 100)
    original = (exact + 1e-7 * np.sin(np.arange(100))).astype(np.float32)
    rounded_otherwise = (exact - 2e-7 * np.cos(np.arange(100))).astype(np.float32)
    assert fp64_check(original, rounded_otherwise, exact) is None
    wrong = original.copy()
    wrong[7] += 1e-4
    found = fp64_check(original, wrong, exact)
    assert found is not None and found["rule"] == "fp64" and found["worst_index"] == [7]
    assert found["error_ratio"] > FP64_RATIO and found["mismatch_fraction"] == 0.01
    # NaN where the original has NaN passes; where it is finite, it is wrong whatever the bound
    with_nan = original.copy()
    with_nan[3] = np.nan
    assert fp64_check(original, with_nan, exact)["error_scale"] == float("inf")


def test_an_integer_output_that_differs_only_on_ties_is_told_from_a_wrong_one():
    original = np.array([0, 1, 2, 3])
    exact = np.array([0, 1, 2, 3])
    moved = np.array([0, 1, 3, 3])  # with its inputs moved by a few ulps, float64 picks 3 at [2]
    tie = tie_check(original, np.array([0, 1, 3, 3]), [exact, moved])
    assert tie is not None and (tie["ties"], tie["unexplained"]) == (1, 0)
    wrong = tie_check(original, np.array([0, 2, 3, 3]), [exact, moved])
    assert wrong is not None and (wrong["ties"], wrong["unexplained"]) == (1, 1)
    # the optimized model decides as float64 does everywhere: nothing to report
    assert tie_check(original, exact.copy(), [exact, moved]) is None
