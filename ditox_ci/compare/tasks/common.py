"""What every task comparator shares: its registration with its options (`comparator`), the context
of a comparator that re-runs the models, picking and pooling one output, the failures before any
metric, and the threshold verdict."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ditox_ci.compare import ComparatorFactory, CompareFunc, Comparison, Outputs, register
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


Options = dict[str, Any]


def comparator(
    name: str,
    defaults: Mapping[str, Any],
    *,
    choices: Mapping[str, Mapping[str, object]] | None = None,
) -> Callable[[Callable[[Options], CompareFunc]], ComparatorFactory]:
    """Register a task comparator's factory under `name`, handing it resolved options: `defaults`
    overlaid with the given ones. An unknown key is a ConfigError, and so is a value of a
    `choices` option (a layout, a pooling, a mode) that its registry does not hold."""

    def decorate(build: Callable[[Options], CompareFunc]) -> ComparatorFactory:
        @functools.wraps(build)
        def factory(given: Mapping[str, Any]) -> CompareFunc:
            unknown = sorted(set(given) - set(defaults))
            if unknown:
                known = ", ".join(sorted(defaults))
                raise ConfigError(
                    f"comparator '{name}': unknown option(s) {', '.join(unknown)} (known: {known})"
                )
            options = {**defaults, **given}
            for option, registry in (choices or {}).items():
                if options[option] not in registry:
                    known = ", ".join(sorted(registry))
                    raise ConfigError(
                        f"{name} {option} '{options[option]}' is unknown; use one of {known}"
                    )
            return build(options)

        return register(name)(factory)

    return decorate


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


def select_pair(
    want: Outputs, got: Outputs, names: Sequence[str], which: int | str
) -> tuple[np.ndarray, np.ndarray, str]:
    """One output of a sample, original and optimized, with its label."""
    position, label = output_position(names, which)
    return np.asarray(want[position]), np.asarray(got[position]), label


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
        a, b, label = select_pair(want, got, names, which)
        if a.shape != b.shape:
            return a, b, label
        want_rows.append(rows(a))
        got_rows.append(rows(b))
    if not want_rows:
        return np.zeros((0, 1)), np.zeros((0, 1)), label
    return np.concatenate(want_rows), np.concatenate(got_rows), label


def _shape_failure(name: str, label: str, a: np.ndarray, b: np.ndarray) -> Comparison | None:
    if a.shape == b.shape:
        return None
    return Comparison(
        passed=False,
        comparator=name,
        message=f"output '{label}' changed shape from {list(a.shape)} to {list(b.shape)}",
        output=label,
        metrics={"expected_shape": list(a.shape), "actual_shape": list(b.shape)},
    )


def _nonfinite_failure(name: str, label: str, a: np.ndarray, b: np.ndarray) -> Comparison | None:
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


def output_failure(name: str, label: str, a: np.ndarray, b: np.ndarray) -> Comparison | None:
    """The failure before any metric: the optimized output `b` changed shape, or has NaN/Inf where
    the original `a` is finite; None when the metrics can judge it."""
    return _shape_failure(name, label, a, b) or _nonfinite_failure(
        name, label, np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    )


@dataclass(frozen=True)
class Paired:
    """Each sample's outputs (`want`, `got`) with its chosen output, original and optimized (`a`,
    `b`), and that output's label; or the first failure before any metric."""

    samples: list[tuple[Outputs, Outputs, np.ndarray, np.ndarray]]
    label: str
    names: Sequence[str]
    failure: Comparison | None = None


def pair_samples(
    name: str, expected: Sequence[Outputs], actual: Sequence[Outputs], names: Sequence[str], which: int | str
) -> Paired:
    """The output `which` of every sample, original and optimized, each checked by `output_failure`."""
    samples: list[tuple[Outputs, Outputs, np.ndarray, np.ndarray]] = []
    label = ""
    for want, got in zip(expected, actual, strict=True):
        a, b, label = select_pair(want, got, names, which)
        failure = output_failure(name, label, a, b)
        if failure:
            return Paired([], label, names, failure)
        samples.append((want, got, a, b))
    return Paired(samples, label, names)


Judge = Callable[[Paired], Comparison]


def paired_comparator(
    name: str,
    defaults: Mapping[str, Any],
    *,
    choices: Mapping[str, Mapping[str, object]] | None = None,
) -> Callable[[Callable[[Options], Judge]], ComparatorFactory]:
    """A `comparator` that judges one output of every sample, the one its `output` option names:
    the factory returns a judge of the `Paired` samples, called only when no output changed shape
    or turned NaN/Inf (those fail first, the same way for every such comparator)."""

    def decorate(build: Callable[[Options], Judge]) -> ComparatorFactory:
        @functools.wraps(build)
        def build_compare(opts: Options) -> CompareFunc:
            judge = build(opts)

            def compare(
                expected: Sequence[Outputs], actual: Sequence[Outputs], names: Sequence[str]
            ) -> Comparison:
                paired = pair_samples(name, expected, actual, names, opts["output"])
                return paired.failure or judge(paired)

            return compare

        return comparator(name, defaults, choices=choices)(build_compare)

    return decorate


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
