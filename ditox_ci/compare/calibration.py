"""Calibration: how far an output may move before it is a mismatch, from the original's own
numerical noise (what ONNX Runtime's own graph optimizations move it by), and the helpers the
tensor oracle and the repro bundles share for it."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np


def floating(dtype: np.dtype | None) -> bool:
    """Whether outputs of `dtype` are judged within tolerances (floats and complex numbers, numpy's
    and ml_dtypes'); others compare exactly."""
    return dtype is not None and (dtype.kind in "fc" or "float" in dtype.name)


def relative_errors(diff: np.ndarray, expected: np.ndarray, atol: float) -> np.ndarray:
    """Each difference relative to its expected element's magnitude, never to less than the
    output's mean magnitude (nor `atol`): an expected value near zero in an output of ones would
    otherwise give 1e+307, and a finite difference is never an infinite relative error."""
    magnitudes = np.abs(expected)
    finite = magnitudes[np.isfinite(magnitudes)]
    scale = max(float(finite.mean()) if finite.size else 0.0, atol, np.finfo(np.float64).tiny)
    return diff / np.maximum(magnitudes, scale)


# Calibration: a float output is also judged against the original's own numerical noise (what
# ONNX Runtime's own graph optimizations move it by, measured per model and input), never taken
# below NOISE_ULPS units in the last place of the output's magnitude (nor of its absolute
# tolerance); more than NOISE_MARGIN such floors is a mismatch even within the fixed tolerances,
# which stay the bound: beyond them is a mismatch whatever the floor.
NOISE_ULPS = 8
NOISE_MARGIN = 10.0


def float64_array(value: Any) -> np.ndarray | None:
    """`value` as float64 when it is a floating-point tensor (ml_dtypes' included), else None."""
    if not isinstance(value, np.ndarray) or "float" not in value.dtype.name:
        return None
    return value.astype(np.float64)


def dtype_eps(dtype: np.dtype) -> float:
    return float(ml_dtypes.finfo(dtype).eps)  # numpy's own floats and ml_dtypes' (float8 …) alike


def noise_check(expected: Any, actual: Any, noise: float | None, atol: float) -> dict[str, Any] | None:
    """`noise_floor` and `noise_ratio` (the largest difference over that floor) of a float output,
    or None when there is nothing to calibrate (not a float tensor, or no noise was measured)."""
    a, b = float64_array(expected), float64_array(actual)
    if noise is None or a is None or b is None or a.shape != b.shape:
        return None
    both = np.isfinite(a) & np.isfinite(b)
    if not both.any():
        return None
    floor = noise_floor(a[both], expected.dtype, noise, atol)
    return {"noise_floor": floor, "noise_ratio": float(np.abs(a[both] - b[both]).max()) / floor}


def noise_floor(finite: np.ndarray, dtype: np.dtype, noise: float, atol: float) -> float:
    """The floor of a float output whose expected values at the compared positions are `finite`:
    its measured `noise`, never below NOISE_ULPS units in the last place of its magnitude."""
    scale = max(float(np.abs(finite).max()) if finite.size else 0.0, atol)
    return max(noise, NOISE_ULPS * dtype_eps(dtype) * scale, np.finfo(np.float64).tiny)


def noise_limit(expected: Any, noise: float | None, atol: float) -> float | None:
    """The largest difference from `expected` (one sample's float output) that the tensor oracle
    lets through within the fixed tolerances: NOISE_MARGIN floors; None when nothing calibrates
    it (not a float tensor, no noise measured, no finite value, or a random op's output)."""
    a = float64_array(expected)
    if a is None or noise is None or math.isinf(noise):
        return None
    finite = a[np.isfinite(a)]
    if not finite.size:
        return None
    limit = NOISE_MARGIN * float(noise_floor(finite, expected.dtype, noise, atol))  # a float repro.py spells
    return limit if math.isfinite(limit) else None


def beyond_noise(expected: np.ndarray, actual: np.ndarray, floor: float, atol: float) -> dict[str, Any]:
    """The numbers of an output that is within the fixed tolerances but beyond NOISE_MARGIN floors."""
    a, b = expected.astype(np.float64), actual.astype(np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    diff = np.where(both, np.abs(a - b), 0.0)
    bad = diff > NOISE_MARGIN * floor
    worst = int(np.argmax(diff))
    scale = max(float(np.abs(a[both]).max()), np.finfo(np.float64).tiny)
    return {
        "reason": "values",
        "max_abs": float(diff.max()),
        "max_rel": float(np.max(np.where(bad, relative_errors(diff, np.where(both, a, 0.0), atol), 0.0))),
        "error_scale": float(diff.max()) / scale,
        "mismatch_fraction": float(bad.mean()),
        "worst_index": [int(i) for i in np.unravel_index(worst, a.shape)] if a.ndim else [],
        "expected_value": repr(expected.flat[worst]),
        "actual_value": repr(actual.flat[worst]),
        "calibrated": True,
    }
