import numpy as np

from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.tensor import compare_arrays


def _tensor(**options):
    return COMPARATORS["tensor"](options)


def test_identical_outputs_pass():
    outputs = [[np.arange(6, dtype=np.float32).reshape(2, 3)]]
    assert _tensor()(outputs, outputs, ["y"]).passed


def test_nan_equals_nan_by_position_only():
    a = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    assert compare_arrays(a, a.copy(), 1e-3, 1e-4) is None
    moved = np.array([np.nan, 1.0, 3.0], dtype=np.float32)
    assert compare_arrays(a, moved, 1e-3, 1e-4)["mismatch_fraction"] > 0


def test_same_sign_infinities_match_but_opposite_do_not():
    a = np.array([np.inf, -np.inf])
    assert compare_arrays(a, a.copy(), 0, 0) is None
    assert compare_arrays(a, -a, 0, 0) is not None


def test_mismatch_reports_its_numbers_and_worst_sample():
    expected = [[np.zeros(4, np.float32)], [np.zeros(4, np.float32)]]
    actual = [[np.zeros(4, np.float32)], [np.array([0, 0, 0.5, 0], np.float32)]]
    result = _tensor(rtol=0.0, atol=0.1)(expected, actual, ["out"])
    assert not result.passed
    assert result.output == "out"
    assert result.metrics["sample"] == 1
    assert result.metrics["max_abs"] == 0.5
    assert result.metrics["mismatch_fraction"] == 0.25
    assert result.metrics["worst_index"] == [2]


def test_per_output_tolerances():
    expected = [[np.zeros(2, np.float32), np.zeros(2, np.float32)]]
    actual = [[np.full(2, 0.05, np.float32), np.full(2, 0.05, np.float32)]]
    loose_first = _tensor(rtol=0.0, atol={"a": 0.1, "*": 0.01})
    result = loose_first(expected, actual, ["a", "b"])
    assert not result.passed and result.output == "b"


def test_shape_and_dtype_differences_are_mismatches():
    assert compare_arrays(np.zeros((2, 3)), np.zeros((3, 2)), 1, 1)["reason"] == "shape"
    assert compare_arrays(np.zeros(2, np.int32), np.zeros(2, np.int64), 1, 1)["reason"] == "dtype"


def test_integer_and_bool_outputs_compare_exactly():
    assert compare_arrays(np.array([1, 2]), np.array([1, 3]), 1.0, 1.0)["max_abs"] == 1.0
    assert compare_arrays(np.array([True]), np.array([False]), 1.0, 1.0) is not None
