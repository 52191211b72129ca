"""Shard balance on the default corpus: 4 shards, max/mean cost (target <= 1.25).

python bench/bench_shard.py                      # estimated costs (size and node count)
python bench/bench_shard.py ditox-report/report.json
    # also: the split that report's measured per-model times give, and, for a merged
    # sharded report, the wall time each shard job really took
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ditox_ci.corpus import CorpusContext, ModelRef, default_cache_dir, resolve_sources
from ditox_ci.report.model import read_report
from ditox_ci.shard import assign, estimate_cost, previous_costs

SHARDS = 4
TARGET = 1.25


def balance(models: Sequence[ModelRef], cost: Callable[[ModelRef], float]) -> list[float]:
    return [sum(cost(ref) for ref in shard) for shard in assign(models, SHARDS, cost)]


def _line(label: str, loads: Sequence[float]) -> str:
    mean = sum(loads) / len(loads)
    ratio = max(loads) / mean if mean else 1.0
    verdict = "ok" if ratio <= TARGET else f"ABOVE TARGET {TARGET}"
    shards = " ".join(f"{load:.1f}" for load in loads)
    return f"{label:<28} max/mean {ratio:.3f} ({verdict})  shards [{shards}]"


def main() -> None:
    models = resolve_sources([], CorpusContext(default_cache_dir(os.environ)))
    print(f"default corpus: {len(models)} models, {SHARDS} shards")
    print(_line("estimated (size, nodes)", balance(models, lambda ref: estimate_cost(ref, None))))
    if len(sys.argv) > 1:
        report = read_report(Path(sys.argv[1]))
        measured = previous_costs(report)
        known = [ref for ref in models if ref.id in measured]
        print(f"{len(known)} of {len(models)} models have a measured cost_s in {sys.argv[1]}")
        if known:
            print(_line("estimated, same models", balance(known, lambda r: estimate_cost(r, None))))
            print(_line("measured cost_s", balance(known, lambda ref: measured[ref.id])))
        walls = report.stats.get("shard_wall_s")
        if walls and len(walls) > 1:
            print(_line("measured shard wall_s", walls))


if __name__ == "__main__":
    main()
