"""The tensor oracle: element-wise closeness per output, by position, with NaN equal to NaN.

Tolerances are scalar or per output name (`{"logits": 1e-3}`), Polygraphy-style; not given (None,
or an output a mapping does not name and that has no "*"), they follow the output's dtype
(DTYPE_TOLERANCES). A result carries its numbers (max_abs, max_rel, mismatch fraction, the worst
sample) and knows whether it passed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ditox_ci.compare import CompareFunc, Comparison, Outputs, register
from ditox_ci.compare.calibration import (
    NOISE_MARGIN,
    beyond_noise,
    dtype_eps,
    float64_array,
    floating,
    noise_check,
    relative_errors,
)
from ditox_ci.errors import UsageError

DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-4
# (rtol, atol) by element type when the user gave none: about ten units in the last place of each
# type's precision around 1, so a reordered sum passes and a wrong constant does not; float32's
# are DEFAULT_RTOL/DEFAULT_ATOL. Other low-precision floats (float8…) are widened to their own eps.
DTYPE_TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-3),
    "bfloat16": (4e-2, 1e-2),
    "float32": (DEFAULT_RTOL, DEFAULT_ATOL),
    "complex64": (DEFAULT_RTOL, DEFAULT_ATOL),
    "float64": (1e-6, 1e-8),
    "complex128": (1e-6, 1e-8),
}
Tolerance = float | Mapping[str, float] | None


@dataclass(frozen=True)
class Tolerances:
    """The oracle's rtol and atol as the user gave them; None leaves that one to each output's
    dtype (DTYPE_TOLERANCES). The one place a tolerance that was not given gets its value."""

    rtol: float | None = None
    atol: float | None = None

    def __post_init__(self) -> None:
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            # `not x >= 0` also refuses NaN, which would make every comparison pass
            if value is not None and not 0 <= value < math.inf:
                raise UsageError(f"--{name} must be a finite number >= 0, got {value}")

    def oracle_options(self) -> dict[str, float | None]:
        """What the tensor oracle takes (`tensor(options)`): None there means by dtype."""
        return {"rtol": self.rtol, "atol": self.atol}

    def scalar(self) -> tuple[float, float]:
        """One (rtol, atol) for what compares without an output's dtype at hand (node-level
        divergence): float32's where none was given."""
        return (
            DEFAULT_RTOL if self.rtol is None else self.rtol,
            DEFAULT_ATOL if self.atol is None else self.atol,
        )

    def of(self, value: Any, widened: bool = True) -> tuple[float, float]:
        """The (rtol, atol) the tensor oracle judges `value`, an expected output, with (`widened`
        False: before a low-precision float's own precision widens them, as its noise floor
        takes them)."""
        return self.of_dtype(dtype_of(value), widened)

    def of_dtype(self, dtype: np.dtype | None, widened: bool = True) -> tuple[float, float]:
        """The (rtol, atol) for an output of element type `dtype`: the given ones, else the
        dtype's; for a low-precision float, at least its own precision (_widened)."""
        name = getattr(dtype, "name", "")
        dtype_rtol, dtype_atol = DTYPE_TOLERANCES.get(name, (DEFAULT_RTOL, DEFAULT_ATOL))
        rtol = float(dtype_rtol if self.rtol is None else self.rtol)
        atol = float(dtype_atol if self.atol is None else self.atol)
        if dtype is None or not widened or "float" not in name:
            return rtol, atol
        if dtype.type.__module__.split(".")[0] == "ml_dtypes":
            return _at_least_its_precision(dtype, rtol, atol)
        return rtol, atol


def dtype_of(value: Any) -> np.dtype | None:
    """An output's element type; a sequence's is its first element's; None for no tensor."""
    while isinstance(value, list) and value:
        value = value[0]
    return getattr(value, "dtype", None)


def _tolerance(value: Tolerance, name: str, fallback: float) -> float:
    if value is None:
        return fallback
    if isinstance(value, Mapping):
        return float(value.get(name, value.get("*", fallback)))
    return float(value)


def _compare_sequences(expected: Any, actual: Any, rtol: float, atol: float) -> dict[str, Any] | None:
    """Sequence and optional outputs: presence, length, then each element with the same tolerances;
    the worst element's numbers, with its index, stand for the output."""
    if expected is None or actual is None:
        if expected is None and actual is None:
            return None
        present = "expected" if actual is None else "actual"
        return {"reason": "optional", "present_only_in": present}
    if not isinstance(expected, list) or not isinstance(actual, list):
        kinds = {"expected_type": type(expected).__name__, "actual_type": type(actual).__name__}
        return {"reason": "type", **kinds}
    if len(expected) != len(actual):
        return {"reason": "length", "expected_length": len(expected), "actual_length": len(actual)}
    worst: dict[str, Any] | None = None
    for index, (a, b) in enumerate(zip(expected, actual)):
        metrics = compare_arrays(a, b, rtol, atol)
        if metrics is None:
            continue
        metrics = {**metrics, "element": index}
        if worst is None or metrics.get("max_abs", np.inf) > worst.get("max_abs", np.inf):
            worst = metrics
    return worst


def _compare_maps(expected: Any, actual: Any, rtol: float, atol: float) -> dict[str, Any] | None:
    """Map outputs (a ZipMap's class probabilities): the same keys, then their values as one array
    in key order, with the same tolerances as a tensor's."""
    if not isinstance(expected, dict) or not isinstance(actual, dict):
        kinds = {"expected_type": type(expected).__name__, "actual_type": type(actual).__name__}
        return {"reason": "type", **kinds}
    if set(expected) != set(actual):
        only = sorted(map(repr, set(expected) ^ set(actual)))[:5]
        return {"reason": "keys", "keys_in_one_only": only}
    keys = sorted(expected, key=repr)
    values = [np.asarray([side[key] for key in keys]) for side in (expected, actual)]
    metrics = compare_arrays(values[0], values[1], rtol, atol)
    if metrics and metrics.get("worst_index"):
        metrics = {**metrics, "key": repr(keys[metrics["worst_index"][0]])}
    return metrics


def _widened(
    a: np.ndarray, b: np.ndarray, rtol: float, atol: float
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """ml_dtypes arrays (bfloat16, float8, float4, int4, int2) as numpy types that hold them exactly.

    A low-precision float gets tolerances of at least one unit in the last place: a pass that
    reorders arithmetic legitimately moves a bfloat16 result by 2**-7 of its magnitude, a float8
    one by up to 2**-2, which float32 tolerances would call a mismatch. Narrow integers stay exact.
    """
    if "float" in a.dtype.name:
        rtol, atol = _at_least_its_precision(a.dtype, rtol, atol)
        return a.astype(np.float32), b.astype(np.float32), rtol, atol
    return a.astype(np.int16), b.astype(np.int16), rtol, atol


def _at_least_its_precision(dtype: np.dtype, rtol: float, atol: float) -> tuple[float, float]:
    info = ml_dtypes.finfo(dtype)
    return max(rtol, float(info.eps)), max(atol, float(info.smallest_subnormal))


def identical(expected: Any, actual: Any) -> bool:
    """Whether two outputs are one tensor to the bit (type, shape, bytes): most outputs of a model
    the optimizer did not change numerically are, and judging them costs more than the run on a small
    model. Object arrays (strings, sequences) are never taken as identical here: their bytes are
    pointers."""
    return (
        isinstance(expected, np.ndarray)
        and isinstance(actual, np.ndarray)
        and expected.dtype == actual.dtype
        and expected.shape == actual.shape
        and not expected.dtype.hasobject
        and expected.tobytes() == actual.tobytes()
    )


def compare_arrays(expected: Any, actual: Any, rtol: float, atol: float) -> dict[str, Any] | None:
    """None when close; otherwise the numbers that show how far apart they are.

    `error_scale` (the largest difference over the largest expected magnitude) says how big the
    error is independently of the output's units; the same-failure matcher bands it."""
    if isinstance(expected, list) or isinstance(actual, list) or expected is None or actual is None:
        return _compare_sequences(expected, actual, rtol, atol)
    if isinstance(expected, dict) or isinstance(actual, dict):
        return _compare_maps(expected, actual, rtol, atol)
    a, b = np.asarray(expected), np.asarray(actual)
    if a.shape != b.shape:
        return {"reason": "shape", "expected_shape": list(a.shape), "actual_shape": list(b.shape)}
    if a.dtype != b.dtype:
        return {"reason": "dtype", "expected_dtype": str(a.dtype), "actual_dtype": str(b.dtype)}
    if a.size == 0:
        return None
    if a.dtype.type.__module__.split(".")[0] == "ml_dtypes":
        a, b, rtol, atol = _widened(a, b, rtol, atol)
    if a.dtype.kind in "fc":
        a64, b64 = (
            a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
            b.astype(np.complex128 if b.dtype.kind == "c" else np.float64),
        )
        both_nan = np.isnan(a64) & np.isnan(b64)
        same_inf = np.isinf(a64) & np.isinf(b64) & (a64 == b64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a64 - b64)
            bad = ~(both_nan | same_inf) & ~(diff <= atol + rtol * np.abs(a64))
            finite = np.where(np.isfinite(diff), diff, np.inf)
            rel = relative_errors(finite, a64, atol)
        if not bad.any():
            return None
        worst = int(np.argmax(np.where(bad, finite, -1.0)))
        max_abs = float(np.max(np.where(bad, finite, 0.0)))
        magnitudes = np.abs(a64)[np.isfinite(a64)]
        scale = max(float(magnitudes.max()) if magnitudes.size else 0.0, atol, np.finfo(np.float64).tiny)
        return {
            "reason": "values",
            "max_abs": max_abs,
            "max_rel": float(np.max(np.where(bad, rel, 0.0))),
            "error_scale": max_abs / scale if np.isfinite(max_abs) else float("inf"),
            "mismatch_fraction": float(bad.mean()),
            "worst_index": [int(i) for i in np.unravel_index(worst, a.shape)] if a.ndim else [],
            "expected_value": repr(a.flat[worst]),
            "actual_value": repr(b.flat[worst]),
        }
    bad = a != b
    if not np.any(bad):
        return None
    worst = int(np.argmax(bad))
    metrics: dict[str, Any] = {
        "reason": "values",
        "mismatch_fraction": float(np.mean(bad)),
        "worst_index": [int(i) for i in np.unravel_index(worst, a.shape)] if a.ndim else [],
        "expected_value": repr(a.flat[worst]),
        "actual_value": repr(b.flat[worst]),
    }
    if a.dtype.kind in "iub":
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        metrics["max_abs"] = float(diff.max())
        metrics["max_rel"] = float((diff / np.maximum(np.abs(a.astype(np.float64)), 1.0)).max())
        metrics["error_scale"] = metrics["max_abs"] / max(float(np.abs(a.astype(np.float64)).max()), 1.0)
    return metrics


# The float64 reference (engine/fp64.py), torch's accuracy check's rule: a float output flagged
# above is wrong only when its largest error against the reference exceeds FP64_RATIO times the
# original's own largest error there, plus FP64_FLOOR_ULPS units in the last place of the output's
# magnitude. Both are measured on rewrites that keep a model's meaning (`bench/bench_fp64.py`,
# docs/results.md): what they do to the error stays within them, a miscompilation does not.
FP64_RATIO = 4.0
FP64_FLOOR_ULPS = 8


def fp64_check(expected: Any, actual: Any, exact: np.ndarray) -> dict[str, Any] | None:
    """None when the float output `actual` is as close to the float64 reference `exact` as the
    original `expected` allows (see FP64_RATIO); otherwise the numbers: the differences from the
    original as `compare_arrays` gives them, the original's and the optimized model's largest error
    against float64 (`fp64_error`, `original_fp64_error`, `error_ratio`), the bound they were held to.
    Where the reference or the original is not finite, NaN must equal NaN and Inf the same Inf."""
    a, b, r = expected.astype(np.float64), actual.astype(np.float64), exact
    judged = np.isfinite(r) & np.isfinite(a)
    with np.errstate(invalid="ignore", over="ignore"):
        own = float(np.abs(a[judged] - r[judged]).max()) if judged.any() else 0.0
        error = np.where(judged, np.abs(b - r), 0.0)
        error = np.where(judged & ~np.isfinite(b), np.inf, error)
        scale = float(np.abs(r[judged]).max()) if judged.any() else 0.0
        bound = FP64_RATIO * own + FP64_FLOOR_ULPS * dtype_eps(expected.dtype) * max(
            scale, np.finfo(np.float64).tiny
        )
        unjudged = ~judged & ~((np.isnan(a) & np.isnan(b)) | (a == b))
        bad = (judged & ~(error <= bound)) | unjudged
    if not bad.any():
        return None
    worst_error = float(error.max())
    metrics = _differences(expected, actual, bad, scale)
    return {
        **metrics,
        "rule": "fp64",
        "fp64_error": worst_error,
        "original_fp64_error": own,
        "error_ratio": worst_error / own if own > 0 else float("inf"),
        "fp64_bound": bound,
        "error_scale": worst_error / max(scale, np.finfo(np.float64).tiny)
        if not unjudged.any()
        else float("inf"),
    }


def tie_check(
    expected: np.ndarray, actual: np.ndarray, references: Sequence[np.ndarray]
) -> dict[str, Any] | None:
    """An integer or boolean output against its float64 references (the exact one first, then
    those on inputs moved within float32's rounding): None when the optimized model decides as
    float64 does everywhere; otherwise the exact differences from the original, with `ties`, how
    many of them a reference decides the optimized model's way (a decision float32's rounding can
    flip), and `unexplained`, the others."""
    if np.array_equal(actual, references[0]):
        return None
    differs = expected != actual
    explained = np.zeros(differs.shape, dtype=bool)
    for values in references:
        explained |= values == actual
    metrics = compare_arrays(expected, actual, 0.0, 0.0)
    if metrics is None:
        return None
    unexplained = int((differs & ~explained).sum())
    return {**metrics, "rule": "fp64", "ties": int(differs.sum()) - unexplained, "unexplained": unexplained}


def _differences(expected: np.ndarray, actual: np.ndarray, bad: np.ndarray, scale: float) -> dict[str, Any]:
    """How far `actual` is from `expected` where `bad` marks the elements that fail."""
    a, b = expected.astype(np.float64), actual.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
        finite = np.where(np.isfinite(diff), diff, np.inf)
        rel = relative_errors(finite, np.where(np.isfinite(a), a, 0.0), 0.0)
    worst = int(np.argmax(np.where(bad, finite, -1.0)))
    return {
        "reason": "values",
        "max_abs": float(np.max(np.where(bad, finite, 0.0))),
        "max_rel": float(np.max(np.where(bad, rel, 0.0))),
        "mismatch_fraction": float(bad.mean()),
        "worst_index": [int(i) for i in np.unravel_index(worst, a.shape)] if a.ndim else [],
        "expected_value": repr(expected.flat[worst]),
        "actual_value": repr(actual.flat[worst]),
    }


def _reference_at(reference: Any, sample: int, position: int) -> tuple[np.ndarray, ...] | None:
    try:
        return reference[sample][position]
    except (IndexError, TypeError):
        return None


def _judged_by_reference(a: Any, b: Any, values: tuple[np.ndarray, ...]) -> dict[str, Any] | None:
    """A flagged output judged again against its float64 reference (`values`): a float tensor by
    `fp64_check`, an integer or boolean one by `tie_check`."""
    if (
        not isinstance(a, np.ndarray)
        or not isinstance(b, np.ndarray)
        or a.shape != b.shape
        or a.dtype != b.dtype
    ):
        return compare_arrays(a, b, 0.0, 0.0)
    if a.dtype.kind in "iub":
        return tie_check(a, b, values)
    return fp64_check(a, b, values[0])


def _rule(expected: Any, metrics: Mapping[str, Any]) -> str:
    """Which rule judged an output without a float64 reference: `exact` for integers, booleans and
    strings, `noise-floor` for a float within the tolerances but beyond its noise, else `tolerance`."""
    if metrics.get("calibrated"):
        return "noise-floor"
    dtype = dtype_of(expected)
    return "tolerance" if floating(dtype) or dtype is None else "exact"


# what makes one failing output worse than another before its size: its values' shape or type
# differs, then a difference no reference explains, then one a float64 tie explains
def _rank(metrics: Mapping[str, Any]) -> int:
    if metrics.get("reason") != "values":
        return 0
    if metrics.get("unexplained", 1) == 0:
        return 2
    return 1


def _noise_at(noise: Any, sample: int, position: int) -> float | None:
    try:
        value = noise[sample][position]
    except (IndexError, TypeError):
        return None
    return None if value is None else float(value)


def _quantum_at(quanta: Sequence[float | None], position: int) -> float | None:
    return quanta[position] if position < len(quanta) else None


# the slack on one quantization step: the step itself is a float32 product of the scale
STEP_SLACK = 1e-4


def _numbers(value: Any) -> np.ndarray | None:
    """A float or integer tensor as float64 (a quantized value is either); else None."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
        return value.astype(np.float64)
    return float64_array(value)


def within_one_step(expected: Any, actual: Any, metrics: Mapping[str, Any], step: float | None) -> bool:
    """Whether a values difference of a quantized output is no more than one step of its scale
    everywhere: two roundings of one quantized value, not a wrong one."""
    if not step or metrics.get("reason") != "values":
        return False
    a, b = _numbers(expected), _numbers(actual)
    if a is None or b is None or a.shape != b.shape:
        return False
    both = np.isfinite(a) & np.isfinite(b)
    if not np.array_equal(np.isfinite(a), np.isfinite(b)):
        return False
    return bool(np.all(np.abs(a[both] - b[both]) <= step * (1 + STEP_SLACK)))


def _number(value: float | None) -> str:
    """A figure for a message: four significant digits (the evidence keeps every digit)."""
    return "n/a" if value is None else f"{value:.4g}"


@register("tensor")
def tensor(options: Mapping[str, Any]) -> CompareFunc:
    rtol: Tolerance = options.get("rtol")
    atol: Tolerance = options.get("atol")
    # per sample, per output: the original's measured noise (None or absent: not calibrated)
    noise = options.get("noise") or []
    # per sample, per output: the float64 reference values (engine/fp64.py) that judge again what
    # the tolerances or the noise floor flag; None or absent: no reference
    reference = options.get("reference") or []
    # per output: the step of its quantized values (engine/noise.quantization_steps); None or absent:
    # not a quantized value
    quanta = options.get("quanta") or []

    def compare(
        expected: Sequence[Outputs], actual: Sequence[Outputs], names: Sequence[str]
    ) -> Comparison:
        # the worst output: a structural difference first, then an unexplained one, then the one with
        # the largest error for its own scale (units differ by output)
        worst: tuple[tuple[int, float], str, int, dict[str, Any]] | None = None
        for sample, (want, got) in enumerate(zip(expected, actual)):
            for position, (a, b) in enumerate(zip(want, got)):
                if identical(a, b):  # the same tensor to the bit: within any tolerance, at no noise
                    continue
                name = names[position] if position < len(names) else f"#{position}"
                dtype_rtol, dtype_atol = Tolerances().of(a, widened=False)
                output_atol = _tolerance(atol, name, dtype_atol)
                output_noise = _noise_at(noise, sample, position)
                if output_noise == math.inf:  # a random op's output: only its shape and dtype mean anything
                    metrics = compare_arrays(a, b, 0.0, math.inf)
                    metrics = metrics if metrics and metrics["reason"] != "values" else None
                    calibration = None
                else:
                    metrics = compare_arrays(a, b, _tolerance(rtol, name, dtype_rtol), output_atol)
                    calibration = noise_check(a, b, output_noise, output_atol)
                if metrics is None and calibration and calibration["noise_ratio"] > NOISE_MARGIN:
                    metrics = beyond_noise(a, b, calibration["noise_floor"], output_atol)
                if metrics is None or within_one_step(a, b, metrics, _quantum_at(quanta, position)):
                    continue
                values = _reference_at(reference, sample, position) if metrics["reason"] == "values" else None
                if values is not None:
                    metrics = _judged_by_reference(a, b, values)
                    if metrics is None:  # as close to float64 as the original's own rounding allows
                        continue
                else:
                    metrics = {**metrics, **(calibration or {}), "rule": _rule(a, metrics)}
                score = (_rank(metrics), -float(metrics.get("error_scale", np.inf)))
                if worst is None or score < worst[0]:
                    worst = (score, name, sample, {**metrics, "output_index": position})
        if worst is None:
            return Comparison(passed=True, comparator="tensor")
        _, name, sample, metrics = worst
        return Comparison(
            passed=False,
            comparator="tensor",
            message=_message(name, metrics),
            output=name,
            metrics={**metrics, "sample": sample},
        )

    return compare


def _message(name: str, metrics: Mapping[str, Any]) -> str:
    """The same words whichever rule judged (a bug's fingerprint keys on them); the float64 and tie
    numbers are in the metrics."""
    if metrics["reason"] != "values":
        return f"output '{name}' {metrics['reason']} differs: {dict(metrics)}"
    return (
        f"output '{name}' differs: max_abs={_number(metrics.get('max_abs'))}, "
        f"max_rel={_number(metrics.get('max_rel'))}, "
        f"{metrics['mismatch_fraction']:.2%} of elements beyond tolerance"
    )
