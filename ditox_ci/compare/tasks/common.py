"""What every task comparator shares: the context of a comparator that re-runs the models, its
options, picking and pooling one output, the failures before any metric, and the threshold verdict."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ditox_ci.compare import CompareFunc, Comparison, Outputs
from ditox_ci.errors import ConfigError

Feed = Mapping[str, np.ndarray]
RunFunc = Callable[[Feed], list[np.ndarray]]


@dataclass(frozen=True)
class CompareContext:
    """What a comparator that must re-run the models gets besides their outputs.

    `run_original` / `run_optimized` run one feed through each model (the engine wraps its two
    ONNX Runtime sessions); `feeds` are the samples whose outputs the comparator received.
    """

    run_original: RunFunc
    run_optimized: RunFunc
    feeds: Sequence[Feed]


def needs_context(compare: CompareFunc) -> bool:
    """Whether the engine must call `compare(..., context=CompareContext(...))`."""
    return bool(getattr(compare, "needs_context", False))


def resolve_options(name: str, given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        known = ", ".join(sorted(defaults))
        raise ConfigError(
            f"comparator '{name}': unknown option(s) {', '.join(unknown)} (known: {known})"
        )
    return {**defaults, **given}


def output_position(names: Sequence[str], which: int | str) -> tuple[int, str]:
    """The position of the output named or numbered by `which`, and its display name."""
    if isinstance(which, str) and not which.lstrip("-").isdigit():
        if which not in names:
            raise ConfigError(
                f"comparator output '{which}' is not an output of the model "
                f"(outputs: {', '.join(names)}); fix the comparator's 'output' option"
            )
        position = list(names).index(which)
    else:
        position = int(which)
    label = names[position] if -len(names) <= position < len(names) else f"#{position}"
    return position, label


def select_output(outputs: Outputs, names: Sequence[str], which: int | str) -> tuple[np.ndarray, str]:
    position, label = output_position(names, which)
    return np.asarray(outputs[position]), label


def score_rows(array: np.ndarray) -> np.ndarray:
    """Scores as (rows, classes) float64; a 0-d or 1-d array is one row."""
    values = np.asarray(array, dtype=np.float64)
    if values.ndim == 0:
        return values.reshape(1, 1)
    return values.reshape(-1, values.shape[-1])


def stack_rows(
    expected: Sequence[Outputs],
    actual: Sequence[Outputs],
    names: Sequence[str],
    which: int | str,
    rows: Callable[[np.ndarray], np.ndarray] = score_rows,
) -> tuple[np.ndarray, np.ndarray, str]:
    """One output of every sample, as rows pooled across samples (original, optimized)."""
    want_rows, got_rows, label = [], [], ""
    for want, got in zip(expected, actual, strict=True):
        a, label = select_output(want, names, which)
        b, _ = select_output(got, names, which)
        if a.shape != b.shape:
            return a, b, label
        want_rows.append(rows(a))
        got_rows.append(rows(b))
    if not want_rows:
        return np.zeros((0, 1)), np.zeros((0, 1)), label
    return np.concatenate(want_rows), np.concatenate(got_rows), label


def shape_failure(name: str, label: str, a: np.ndarray, b: np.ndarray) -> Comparison | None:
    if a.shape == b.shape:
        return None
    return Comparison(
        passed=False,
        comparator=name,
        message=f"output '{label}' changed shape from {list(a.shape)} to {list(b.shape)}",
        output=label,
        metrics={"expected_shape": list(a.shape), "actual_shape": list(b.shape)},
    )


def nonfinite_failure(name: str, label: str, a: np.ndarray, b: np.ndarray) -> Comparison | None:
    new_nonfinite = int(np.count_nonzero(~np.isfinite(b) & np.isfinite(a)))
    if not new_nonfinite:
        return None
    return Comparison(
        passed=False,
        comparator=name,
        message=f"output '{label}' has {new_nonfinite} NaN/Inf values where the original is finite",
        output=label,
        metrics={"new_nonfinite": new_nonfinite},
    )


def threshold_verdict(
    name: str, label: str, metrics: dict[str, Any], checks: Sequence[tuple[str, float, float, str]]
) -> Comparison:
    """`checks` are (metric, value, threshold, "min"|"max"); every failing one is named."""
    failures = []
    for metric, value, threshold, direction in checks:
        bad = value < threshold if direction == "min" else value > threshold
        if bad:
            relation = "<" if direction == "min" else ">"
            failures.append(f"{metric}={value:.4g} {relation} {threshold:g}")
    message = f"output '{label}': " + ", ".join(failures) if failures else ""
    return Comparison(
        passed=not failures, comparator=name, message=message, output=label, metrics=metrics
    )
