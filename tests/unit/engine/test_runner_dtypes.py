"""Element types numpy lacks (bfloat16, float8 ×5, float4, int4/uint4, int2/uint2): fed to and read
from both runners as ml_dtypes arrays, made as random inputs, and compared with tolerances of their
own precision."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.compare.tensor import compare_arrays
from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import random_feeds, write_recorded_inputs
from ditox_ci.engine import runner
from ditox_ci.engine.evaluate import EvalSettings, judge, prepare

VALUES = np.array([1.0, 2.0, -1.0, 0.0, 1.5, -3.0], dtype=np.float32)
# integers in every narrow type's range, so that rounding and wrapping rules play no part
SIGNED_VALUES = np.array([1.0, -2.0, -1.0, 0.0, 1.0, -2.0], dtype=np.float32)
UNSIGNED_VALUES = np.array([1.0, 2.0, 3.0, 0.0, 1.0, 3.0], dtype=np.float32)
EXOTIC = {
    TensorProto.BFLOAT16: ml_dtypes.bfloat16,
    TensorProto.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn,
    TensorProto.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
    TensorProto.FLOAT8E5M2: ml_dtypes.float8_e5m2,
    TensorProto.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz,
    TensorProto.INT4: ml_dtypes.int4,
    TensorProto.UINT4: ml_dtypes.uint4,
    TensorProto.INT2: ml_dtypes.int2,
    TensorProto.UINT2: ml_dtypes.uint2,
}
# ONNX Runtime 1.32's CPU provider casts these only on the reference runner
REFERENCE_ONLY = {TensorProto.FLOAT4E2M1: ml_dtypes.float4_e2m1fn}


def _cast_model(source: int, target: int) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=target)],
        "cast",
        [helper.make_tensor_value_info("x", source, [6])],
        [helper.make_tensor_value_info("y", target, [6])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)], ir_version=13)
    return model.SerializeToString()


def _cases() -> list[tuple[str, int, type, str]]:
    cases = [(TensorProto.DataType.Name(t), t, d, r) for t, d in EXOTIC.items() for r in runner.RUNNERS]
    return cases + [(TensorProto.DataType.Name(t), t, d, "reference") for t, d in REFERENCE_ONLY.items()]


@pytest.mark.parametrize(("name", "element_type", "dtype", "runner_name"), _cases())
def test_each_exotic_type_is_read_and_fed_back_by_each_runner(name, element_type, dtype, runner_name):
    values = {"UINT": UNSIGNED_VALUES, "INT": SIGNED_VALUES}.get(name.rstrip("0123456789"), VALUES)
    to_exotic = runner.load_session(_cast_model(TensorProto.FLOAT, element_type), runner=runner_name)
    (exotic,) = runner.run(to_exotic, {"x": values})
    assert exotic.dtype == np.dtype(dtype)
    assert exotic.astype(np.float32).tolist() == values.astype(dtype).astype(np.float32).tolist()
    back = runner.load_session(_cast_model(element_type, TensorProto.FLOAT), runner=runner_name)
    (floats,) = runner.run(back, {"x": exotic})
    assert floats.tolist() == exotic.astype(np.float32).tolist()


@pytest.mark.parametrize("element_type", [*EXOTIC, *REFERENCE_ONLY])
def test_random_inputs_of_each_exotic_type(element_type):
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", element_type, [4, 5])],
        [helper.make_tensor_value_info("y", element_type, [4, 5])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)], ir_version=13)
    (feed,) = random_feeds(model, ModelRef(id="m", source="t", path="m.onnx"), 1, 0)
    value = feed["x"]
    assert value.dtype == np.dtype({**EXOTIC, **REFERENCE_ONLY}[element_type]) and value.shape == (4, 5)
    assert len(np.unique(value.astype(np.float32))) > 1


def test_bfloat16_tolerates_one_unit_in_the_last_place_but_not_two_units_of_float32_tolerance():
    expected = np.array([1.0, 100.0], dtype=ml_dtypes.bfloat16)
    one_ulp = np.array([1.0078125, 100.0], dtype=ml_dtypes.bfloat16)
    assert compare_arrays(expected, one_ulp, 1e-3, 1e-4) is None
    far = np.array([1.0, 104.0], dtype=ml_dtypes.bfloat16)
    metrics = compare_arrays(expected, far, 1e-3, 1e-4)
    assert metrics is not None and metrics["max_abs"] == 4.0 and metrics["worst_index"] == [1]


def test_float8_nan_equals_nan_and_its_own_precision_applies():
    expected = np.array([np.nan, 2.0, 3.0], dtype=ml_dtypes.float8_e4m3fn)
    assert compare_arrays(expected, expected.copy(), 1e-3, 1e-4) is None
    next_value = np.array([np.nan, 2.25, 3.0], dtype=ml_dtypes.float8_e4m3fn)  # one step at 2.0
    assert compare_arrays(expected, next_value, 1e-3, 1e-4) is None
    assert compare_arrays(expected, np.array([np.nan, 2.0, 4.0], dtype=ml_dtypes.float8_e4m3fn), 1e-3, 1e-4)


def test_narrow_integers_compare_exactly():
    expected = np.array([1, -2, 7], dtype=ml_dtypes.int4)
    assert compare_arrays(expected, expected.copy(), 1e-3, 1e-4) is None
    metrics = compare_arrays(expected, np.array([1, -2, 6], dtype=ml_dtypes.int4), 1e-3, 1e-4)
    assert metrics is not None and metrics["max_abs"] == 1.0


def test_a_bfloat16_output_holding_nan_is_still_compared_by_value(tmp_path: Path) -> None:
    """The reference runner's second run gives the same NaN: the output is deterministic, so a pass
    that negates it is a mismatch on that very sample, not only on the wide-range one."""

    def model(op: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            [helper.make_node(op, ["x"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [4])],
            [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4])],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    folder = tmp_path / "case"
    write_recorded_inputs(folder, model("Identity"), [{"x": np.array([1, 2, np.nan, 3], ml_dtypes.bfloat16)}])
    ref = ModelRef("case", "t", str(folder / "model.onnx"), inputs_dir=str(folder))
    context = prepare(ref, EvalSettings(runner="reference"))
    assert context.noise[0] == [None]
    recorded_only = dataclasses.replace(
        context, feeds=context.feeds[:1], outputs=context.outputs[:1], noise=context.noise[:1], judged={}
    )
    assert judge(recorded_only, model("Neg")).kind == "output-mismatch"
