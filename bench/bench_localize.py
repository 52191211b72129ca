"""Optimizer runs per localization: a planted single-pass culprit at every position of the default
pass list, localized by the default strategies and by the Linear strategy (every pass alone, in
order: the research prototype's method), both run on the same planted faults: over the default
list, and over every available pass as the prototype did."""

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
    every_pass = tuple(name for name in onnxoptimizer.get_available_passes() if name != "nop")
    strategies = {
        "bisect+ddmin": (passes, ("bisect", "ddmin")),
        "linear": (passes, ("linear",)),
        f"linear/{len(every_pass)}": (every_pass, ("linear",)),
    }
    rows = [
        (name, [runs_for(name, pool, chosen) for pool, chosen in strategies.values()])
        for name in passes[1:]
    ]
    print(f"{'position':>8}  {'culprit':<40} " + " ".join(f"{label:>12}" for label in strategies))
    for position, (name, counts) in enumerate(rows, start=1):
        print(f"{position:>8}  {name:<40} " + " ".join(f"{runs:>12}" for runs in counts))
    print()
    means = [sum(runs[column] for _, runs in rows) / len(rows) for column in range(len(strategies))]
    for column, label in enumerate(strategies):
        counts = [runs[column] for _, runs in rows]
        pool = strategies[label][0]
        # the linear searches are the naive baselines: how many times bisect+ddmin's runs they need
        ratio = f" = {means[column] / means[0]:.1f}× bisect+ddmin's" if column else ""
        print(
            f"{label} over {len(pool)} passes: mean {means[column]:.1f}{ratio}, "
            f"max {max(counts)} runs per localization"
        )


if __name__ == "__main__":
    main()
