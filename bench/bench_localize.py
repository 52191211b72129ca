"""Optimizer runs per localization: a planted single-pass culprit at every position of the default
pass list, localized by the default strategies, next to linear single-pass search (one run per pass
the optimizer has, the research prototype's method)."""

from __future__ import annotations

from collections.abc import Sequence

import onnxoptimizer

from ditox_ci.engine.outcome import Outcome
from ditox_ci.pinpoint.localize import localize

MISMATCH = Outcome(kind="output-mismatch", message="planted")
FINE = Outcome(kind=None)


def runs_for(culprit: str, passes: Sequence[str], strategies: Sequence[str]) -> int:
    found = localize(
        passes,
        MISMATCH,
        lambda tried: MISMATCH if culprit in tried else FINE,
        strategies=strategies,
    )
    if found.passes != (culprit,):
        raise AssertionError(f"localized {found.passes} instead of {culprit}")
    return found.optimizer_runs


def main() -> None:
    passes = tuple(onnxoptimizer.get_fuse_and_elimination_passes())
    linear_all = len(onnxoptimizer.get_available_passes()) - 1  # every pass alone, minus nop
    rows = [(name, runs_for(name, passes, ("bisect", "ddmin"))) for name in passes[1:]]
    print(f"{'position':>8}  {'culprit':<40} runs")
    for position, (name, runs) in enumerate(rows, start=1):
        print(f"{position:>8}  {name:<40} {runs}")
    counts = [runs for _, runs in rows]
    print(
        f"\nbisect+ddmin over {len(passes)} default passes: "
        f"mean {sum(counts) / len(counts):.1f}, max {max(counts)} runs per localization; "
        f"linear single-pass search: {linear_all} runs"
    )


if __name__ == "__main__":
    main()
