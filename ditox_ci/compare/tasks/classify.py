"""The `classification` comparator: top-1 agreement, top-K set agreement (near-ties at the K-th
score forgiven), Kendall's tau over the union of both top-K score lists."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ditox_ci.compare import CompareFunc, Comparison, Outputs
from ditox_ci.compare.tasks.common import (
    Options,
    comparator,
    output_failure,
    stack_rows,
    threshold_verdict,
)


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; ties broken by index for determinism."""
    order = np.lexsort((np.arange(scores.size), -scores))
    return order[:k]


def _kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    if np.array_equal(a, b):
        return 1.0
    # imported here: scipy.stats costs 0.8 s to import, paid by every process that imports the
    # comparators (the CLI, each shard job's workers) though only classifier models use it
    from scipy import stats

    tau = stats.kendalltau(a, b).statistic
    # Constant score lists give NaN; one constant and one not means the ranking is gone.
    return 0.0 if math.isnan(tau) else float(tau)


@comparator(
    "classification",
    {
        "output": 0,
        "top_k": 5,
        "tie_atol": 1e-5,
        "min_top1_agreement": 1.0,
        "min_topk_agreement": 1.0,
        "min_kendall_tau": 0.8,
    },
)
def classification(opts: Options) -> CompareFunc:
    k = int(opts["top_k"])

    def compare(
        expected: Sequence[Outputs], actual: Sequence[Outputs], names: Sequence[str]
    ) -> Comparison:
        want, got, label = stack_rows(expected, actual, names, opts["output"])
        failure = output_failure("classification", label, want, got)
        if failure:
            return failure
        top1 = topk = 0
        taus: list[float] = []
        disagreements: list[int] = []
        for row, (a, b) in enumerate(zip(want, got, strict=True)):
            kk = min(k, a.size)
            top_a, top_b = _top_k(a, kk), _top_k(b, kk)
            top1 += int(top_a[0] == top_b[0])
            # A class that swapped in or out at the K-th place counts only if it was clearly
            # inside or outside in the original, so float noise around a tie is not a finding.
            boundary = a[top_a[-1]]
            swapped = set(top_a.tolist()) ^ set(top_b.tolist())
            same_set = all(abs(a[c] - boundary) <= opts["tie_atol"] for c in swapped)
            topk += int(same_set)
            if top_a[0] != top_b[0] or not same_set:
                disagreements.append(row)
            union = np.union1d(top_a, top_b)
            taus.append(_kendall_tau(a[union], b[union]))
        rows = len(want)
        metrics: dict[str, Any] = {
            "rows": rows,
            "top_k": k,
            "top1_agreement": top1 / rows if rows else 1.0,
            "topk_agreement": topk / rows if rows else 1.0,
            "kendall_tau_min": min(taus) if taus else 1.0,
            "kendall_tau_mean": float(np.mean(taus)) if taus else 1.0,
            "disagreeing_rows": disagreements[:20],
        }
        return threshold_verdict(
            "classification",
            label,
            metrics,
            [
                ("top1_agreement", metrics["top1_agreement"], opts["min_top1_agreement"], "min"),
                ("topk_agreement", metrics["topk_agreement"], opts["min_topk_agreement"], "min"),
                ("kendall_tau_min", metrics["kendall_tau_min"], opts["min_kendall_tau"], "min"),
            ],
        )

    return compare
