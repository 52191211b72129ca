import math

import ml_dtypes
import numpy as np
import pytest

from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.calibration import NOISE_MARGIN, noise_check, noise_limit
from ditox_ci.compare.tensor import (
    Tolerances,
    compare_arrays,
    identical,
)


def _tensor(**options):
    return COMPARATORS["tensor"](options)


def test_identical_outputs_pass():
    outputs = [[np.arange(6, dtype=np.float32).reshape(2, 3)]]
    assert _tensor()(outputs, outputs, ["y"]).passed


def test_outputs_identical_to_the_bit_skip_the_judging_only_where_it_would_pass_them():
    nan_inf = np.array([1.0, np.nan, np.inf, -np.inf], dtype=np.float32)
    same = [nan_inf, np.arange(4, dtype=np.int64), np.ones(3, ml_dtypes.bfloat16), np.array("s")]
    for value in same:
        copy = value.copy()
        assert identical(value, copy)
        # what the shortcut skips: a comparison that passes at no tolerance, at no noise
        assert compare_arrays(value, copy, 0.0, 0.0) is None
        assert (noise_check(value, copy, 1e-30, 0.0) or {"noise_ratio": 0.0})["noise_ratio"] == 0.0
    # the same bytes as another type or shape, a signed zero, or an object array's pointers: judged
    as_int = nan_inf.view(np.int32)
    assert not identical(nan_inf, as_int) and not identical(nan_inf, nan_inf.reshape(2, 2))
    assert not identical(np.array([0.0]), np.array([-0.0]))
    text = np.array(["a", "b"], dtype=object)
    assert not identical(text, text) and not identical([np.ones(2)], [np.ones(2)])


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


def test_sequence_outputs_compare_element_by_element_with_the_tolerances():
    expected = [np.zeros(3, np.float32), np.ones((2, 2), np.float32)]
    within = [np.full(3, 0.05, np.float32), np.ones((2, 2), np.float32)]
    assert compare_arrays(expected, within, 0.0, 0.1) is None
    beyond = compare_arrays(expected, within, 0.0, 0.01)
    assert beyond["element"] == 0 and beyond["max_abs"] == np.float32(0.05)
    assert compare_arrays(expected, expected[:1], 1, 1)["reason"] == "length"
    retyped = [expected[0].astype(np.float64), expected[1]]
    assert compare_arrays(expected, retyped, 1, 1) == {
        "reason": "dtype", "expected_dtype": "float32", "actual_dtype": "float64", "element": 0
    }


def test_a_zipmaps_sequence_of_maps_compares_keys_then_values_with_the_tolerances():
    """ONNX Runtime gives a ZipMap's output as a list of dicts; until 2026-11-28 a dict was compared
    as one opaque object, so probabilities 1e-7 apart were a mismatch."""
    expected = [{0: np.float32(0.25), 1: np.float32(0.75)}, {0: np.float32(0.5), 1: np.float32(0.5)}]
    within = [{0: np.float32(0.2500001), 1: np.float32(0.75)}, dict(expected[1])]
    assert compare_arrays(expected, within, 1e-4, 1e-5) is None
    beyond = [dict(expected[0]), {0: np.float32(0.5), 1: np.float32(0.4)}]
    metrics = compare_arrays(expected, beyond, 1e-4, 1e-5)
    assert metrics["reason"] == "values" and metrics["element"] == 1 and metrics["key"] == "1"
    assert metrics["max_abs"] == pytest.approx(0.1)
    renamed = [dict(expected[0]), {"0": np.float32(0.5), 1: np.float32(0.5)}]
    keys = {"reason": "keys", "keys_in_one_only": ["'0'", "0"], "element": 1}
    assert compare_arrays(expected, renamed, 1, 1) == keys


def test_optional_outputs_compare_presence_then_value():
    assert compare_arrays(None, None, 0, 0) is None
    assert compare_arrays(None, np.zeros(1), 0, 0)["reason"] == "optional"
    assert compare_arrays([np.zeros(1)], None, 0, 0)["present_only_in"] == "expected"


def test_the_tensor_oracle_reports_the_position_of_the_worst_output_for_its_scale():
    expected = [[np.full(4, 1000.0, np.float32), np.ones(4, np.float32)]]
    actual = [[np.full(4, 1001.0, np.float32), np.full(4, 2.0, np.float32)]]
    result = _tensor(rtol=0.0, atol=1e-4)(expected, actual, ["big", "small"])
    assert result.output == "small" and result.metrics["output_index"] == 1
    assert result.metrics["error_scale"] == 1.0


def test_default_tolerances_follow_each_outputs_dtype_and_given_ones_override_them():
    def off_by(dtype, relative):
        base = np.linspace(1.0, 2.0, 8).astype(dtype)
        return [[base]], [[(base * (1 + relative)).astype(dtype)]]

    assert _tensor()(*off_by(np.float16, 5e-3), ["y"]).passed
    assert not _tensor()(*off_by(np.float32, 5e-3), ["y"]).passed
    assert _tensor()(*off_by(np.float32, 5e-4), ["y"]).passed
    assert not _tensor()(*off_by(np.float64, 5e-5), ["y"]).passed
    assert _tensor(rtol=1e-4)(*off_by(np.float64, 5e-5), ["y"]).passed
    assert not _tensor(rtol=1e-4)(*off_by(np.float16, 5e-3), ["y"]).passed
    # a mapping that does not name the output (and has no "*") leaves it to its dtype
    assert _tensor(rtol={"other": 0.0})(*off_by(np.float16, 5e-3), ["y"]).passed


def test_an_error_within_the_fixed_tolerances_fails_beyond_ten_noise_floors_and_reports_the_ratio():
    expected = [[np.linspace(1.0, 2.0, 8, dtype=np.float32)]]
    actual = [[expected[0][0] * np.float32(1.0002)]]
    assert _tensor()(expected, actual, ["y"]).passed  # uncalibrated: 0.02 % is within rtol 1e-3
    quiet = _tensor(noise=[[1e-7]])(expected, actual, ["y"])
    assert not quiet.passed and quiet.metrics["calibrated"] is True
    assert quiet.metrics["noise_ratio"] > 10
    assert quiet.metrics["noise_floor"] == pytest.approx(8 * np.finfo(np.float32).eps * 2.0)
    assert _tensor(noise=[[1e-3]])(expected, actual, ["y"]).passed  # a noisy model: within its floor
    beyond_fixed = _tensor(noise=[[1.0]])(expected, [[expected[0][0] * np.float32(1.01)]], ["y"])
    assert not beyond_fixed.passed and "calibrated" not in beyond_fixed.metrics
    assert beyond_fixed.metrics["noise_ratio"] < 1  # the ratio is evidence even when the floor allowed it


def test_an_output_whose_noise_is_infinite_is_checked_for_shape_and_dtype_only():
    random_draw = [[np.array([0.0, 1.0, 1.0], np.float32)]]
    other_draw = [[np.array([1.0, 0.0, 1.0], np.float32)]]
    assert not _tensor()(random_draw, other_draw, ["y"]).passed
    assert _tensor(noise=[[np.inf]])(random_draw, other_draw, ["y"]).passed
    reshaped = _tensor(noise=[[np.inf]])(random_draw, [[np.ones((3, 1), np.float32)]], ["y"])
    assert not reshaped.passed and reshaped.metrics["reason"] == "shape"


def test_low_precision_floats_are_calibrated_by_their_own_unit_in_the_last_place():
    import ml_dtypes

    # one unit in the last place of each type, which float32's epsilon would call 10,000s of floors
    for dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e5m2, np.float16):
        values = np.array([1.0, 2.0, -4.0], dtype)
        one_ulp = (values.astype(np.float32) * (1 + float(ml_dtypes.finfo(dtype).eps))).astype(dtype)
        assert not np.array_equal(values, one_ulp)
        result = _tensor(noise=[[0.0]])([[values]], [[one_ulp]], ["y"])
        assert result.passed, result.message


def test_relative_errors_are_against_the_outputs_scale_not_a_value_near_zero():
    """An expected value near zero in an output of ones gave max_rel=1.2866e+307; one at zero, inf."""
    expected = np.array([1.0, 1.0, 1.0, 1e-300, 0.0])
    actual = np.array([1.0, 1.0, 1.0, 0.5, 0.5])
    metrics = compare_arrays(expected, actual, 1e-3, 1e-4)
    assert metrics is not None and metrics["max_abs"] == 0.5
    assert metrics["max_rel"] == pytest.approx(0.5 / 0.6)  # the output's mean magnitude
    all_zero = compare_arrays(np.zeros(3), np.array([0.0, 0.0, 0.5]), 1e-3, 1e-4)
    assert all_zero is not None and all_zero["max_rel"] == pytest.approx(0.5 / 1e-4)
    result = _tensor()([[expected.astype(np.float32)]], [[actual.astype(np.float32)]], ["y"])
    assert "max_abs=0.5, max_rel=0.8333," in result.message
    # a non-finite actual value is still an infinite error
    assert compare_arrays(expected, np.array([1.0, 1.0, 1.0, np.inf, 0.0]), 1e-3, 1e-4)["max_rel"] == np.inf


@pytest.mark.parametrize(
    ("given", "value", "expected"),
    [
        ((None, None), np.zeros(2, np.float64), (1e-6, 1e-8)),
        ((None, None), np.zeros(2, np.float16), (1e-2, 1e-3)),
        ((None, None), [np.zeros(2, np.float16)], (1e-2, 1e-3)),  # a sequence: its elements'
        ((None, None), np.zeros(2, np.int64), (1e-3, 1e-4)),
        ((5e-2, None), np.zeros(2, np.float64), (5e-2, 1e-8)),
        # float8 is never held to less than its own precision, as compare_arrays widens it
        ((None, None), np.zeros(2, ml_dtypes.float8_e4m3fn), (0.125, 2.0**-9)),
    ],
)
def test_tolerances_of_an_output_are_the_ones_the_oracle_judges_it_with(given, value, expected):
    assert Tolerances(*given).of(value) == pytest.approx(expected)


def test_the_noise_limit_is_the_margin_of_floors_past_which_the_oracle_calls_a_mismatch():
    want = np.array([1.0, -4.0, np.nan], np.float32)
    noise = 1e-5  # over 8 ulps of 4.0, and ten floors within the fixed tolerances
    limit = noise_limit(want, noise, 1e-4)
    assert limit == pytest.approx(NOISE_MARGIN * noise)
    compare = COMPARATORS["tensor"]({"noise": [[noise]]})
    for factor, passed in ((0.9, True), (1.1, False)):
        got = want + np.array([factor * limit, 0.0, 0.0], np.float32)
        assert compare([[want]], [[got]], ["y"]).passed is passed
    assert noise_limit(want, math.inf, 1e-4) is None and noise_limit(np.arange(3), noise, 1e-4) is None


def test_a_noise_limit_is_a_float_repro_py_can_spell_and_never_infinite():
    # an all-zero output with --atol 0 and no noise: the floor is float64's tiniest, a numpy scalar
    assert type(noise_limit(np.zeros(3, np.float32), 0.0, 0.0)) is float
    assert noise_limit(np.full(2, 1e308), 1e308, 1e-4) is None  # ten floors overflow
    # the atol a low-precision float's noise floor takes is the one before its precision widens it
    float8 = np.zeros(2, ml_dtypes.float8_e4m3fn)
    assert Tolerances().of(float8, widened=False) == (1e-3, 1e-4)
    assert Tolerances().of(float8)[1] == 2.0**-9


def test_a_quantized_output_may_round_one_step_apart_but_not_two():
    """ORT's QLinear kernels and its folded QDQ pairs round a quantized value another way than
    float arithmetic followed by a Q: one step of the output's scale apart, which the float32
    tolerances called a miscompilation (DoubleQDQPairsRemover, 50 findings in a 3-minute fuzz)."""
    compare = COMPARATORS["tensor"]({"quanta": [0.05, 1.0, None]})
    plain = np.array([0.1], np.float32)
    expected = [[np.array([0.1, 0.2, 0.3], np.float32), np.array([10, 20], np.uint8), plain]]
    one_step = [[np.array([0.15, 0.2, 0.25], np.float32), np.array([11, 19], np.uint8), plain]]
    assert compare(expected, one_step, ["dq", "q", "plain"]).passed
    two_steps = [[np.array([0.2, 0.2, 0.3], np.float32), np.array([10, 20], np.uint8), plain]]
    assert not compare(expected, two_steps, ["dq", "q", "plain"]).passed
    names = ["dq", "q", "plain"]
    assert not compare(expected, [[*one_step[0][:2], np.array([0.11], np.float32)]], names).passed
    # a NaN where the original has a number is no rounding
    assert not compare(expected, [[np.array([0.1, np.nan, 0.3], np.float32), *one_step[0][1:]]], names).passed
