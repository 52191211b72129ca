"""Optimizer runs per localization: a planted single-pass culprit at every position of the default
pass list, localized by the default strategies and by the Linear strategy (every pass alone, in
order: the research prototype's method), both run on the same planted faults: over the default
list, and over every available pass as the prototype did. Then a culprit that fails on half of its
calls, over SEEDS seeded runs: how often it is named, called nondeterministic, or blamed with a
bystander, and the runs that cost."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import onnxoptimizer

from ditox_ci.engine.outcome import Outcome
from ditox_ci.pinpoint.localize import localize
from ditox_ci.report.kinds import VALUES_KIND

MISMATCH = Outcome(kind=VALUES_KIND, message="planted")
FINE = Outcome(kind=None)
SEEDS = 2000


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
    half_of_the_calls(passes, "fuse_bn_into_conv")


def half_of_the_calls(passes: Sequence[str], culprit: str) -> None:
    """A culprit whose miscompilation applies on each call with probability one half."""
    outcomes: Counter[str] = Counter()
    runs = []
    for seed in range(SEEDS):
        rng = random.Random(seed)

        def probe(tried: Sequence[str], rng: random.Random = rng) -> Outcome:
            return MISMATCH if culprit in tried and rng.random() < 0.5 else FINE

        found = localize(passes, MISMATCH, probe)
        runs.append(found.optimizer_runs)
        if found.scope in ("pass", "interaction"):
            outcomes["named alone" if found.passes == (culprit,) else "named with a bystander"] += 1
        elif found.scope == "nondeterministic":
            outcomes[
                "nondeterministic, on it alone"
                if found.passes == (culprit,)
                else "nondeterministic, on a list holding it"
            ] += 1
        else:
            outcomes[found.scope] += 1
    print(f"\na culprit failing on half of its calls ({culprit}), {SEEDS} seeded localizations:")
    for what, count in outcomes.most_common():
        print(f"  {what:<42} {count:>5}  ({count / SEEDS:.2%})")
    print(f"  runs: mean {sum(runs) / len(runs):.1f}, max {max(runs)}")


if __name__ == "__main__":
    main()
