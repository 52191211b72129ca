"""The `embedding` comparator (cosine similarity per row after pooling) and the `binary` one (label
flip rate of a probability or two-class output)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ditox_ci.compare import CompareFunc, Comparison, Outputs
from ditox_ci.compare.tasks.common import (
    Judge,
    Options,
    Paired,
    comparator,
    output_failure,
    paired_comparator,
    score_rows,
    stack_rows,
    threshold_verdict,
)

# --- embedding --------------------------------------------------------------------------------

POOLINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    # (batch, tokens, dim) → (batch, dim); any other rank is taken row-wise over the last axis.
    "mean": lambda x: x.mean(axis=-2) if x.ndim >= 3 else x.reshape(-1, x.shape[-1]),
    "cls": lambda x: x[..., 0, :] if x.ndim >= 3 else x.reshape(-1, x.shape[-1]),
    "none": lambda x: x.reshape(-1, x.shape[-1]),
}


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity; two zero rows are identical (1.0), one zero row is not (0.0)."""
    norm_a, norm_b = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    both_zero = (norm_a == 0) & (norm_b == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.sum(a * b, axis=-1) / (norm_a * norm_b)
    return np.where(both_zero, 1.0, np.nan_to_num(values, nan=0.0))


@paired_comparator(
    "embedding",
    {"output": 0, "pooling": "mean", "min_cosine": 0.999},
    choices={"pooling": POOLINGS},
)
def embedding(opts: Options) -> Judge:
    pool = POOLINGS[opts["pooling"]]

    def judge(paired: Paired) -> Comparison:
        similarities = [
            np.atleast_1d(cosine(pool(a.astype(np.float64)), pool(b.astype(np.float64))))
            for _, _, a, b in paired.samples
        ]
        values = np.concatenate(similarities) if similarities else np.ones(1)
        metrics = {
            "rows": int(values.size),
            "cosine_min": float(values.min()),
            "cosine_mean": float(values.mean()),
            "pooling": opts["pooling"],
        }
        return threshold_verdict(
            "embedding",
            paired.label,
            metrics,
            [("cosine_min", metrics["cosine_min"], opts["min_cosine"], "min")],
        )

    return judge


# --- binary / sentiment -----------------------------------------------------------------------


def _probability_rows(array: np.ndarray) -> np.ndarray:
    return np.asarray(array, dtype=np.float64).reshape(-1, 1)


BINARY_MODES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    # auto: one probability per row when the last axis is 1 (or there is none), else class scores
    "auto": lambda a: _probability_rows(a) if a.ndim <= 1 or a.shape[-1] == 1 else score_rows(a),
    "probability": _probability_rows,
    "argmax": score_rows,
}


def binary_labels(scores: np.ndarray, threshold: float) -> np.ndarray:
    """One label per row: a single probability → above threshold; class scores → argmax."""
    if scores.shape[-1] == 1:
        return (scores[:, 0] > threshold).astype(np.int64)
    return np.argmax(scores, axis=-1)


@comparator(
    "binary",
    {"output": 0, "mode": "auto", "threshold": 0.5, "max_flip_rate": 0.0},
    choices={"mode": BINARY_MODES},
)
def binary(opts: Options) -> CompareFunc:
    as_rows = BINARY_MODES[opts["mode"]]

    def compare(
        expected: Sequence[Outputs], actual: Sequence[Outputs], names: Sequence[str]
    ) -> Comparison:
        want, got, label = stack_rows(expected, actual, names, opts["output"], as_rows)
        failure = output_failure("binary", label, want, got)
        if failure:
            return failure
        labels_a = binary_labels(want, opts["threshold"])
        labels_b = binary_labels(got, opts["threshold"])
        flipped = np.flatnonzero(labels_a != labels_b)
        count = len(labels_a)
        metrics = {
            "rows": count,
            "flips": int(flipped.size),
            "flip_rate": flipped.size / count if count else 0.0,
            "max_score_delta": float(np.max(np.abs(want - got))) if want.size else 0.0,
            "flipped_rows": flipped[:20].tolist(),
        }
        return threshold_verdict(
            "binary",
            label,
            metrics,
            [("flip_rate", metrics["flip_rate"], opts["max_flip_rate"], "max")],
        )

    return compare
