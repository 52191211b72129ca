"""Fit the shard planner's cost constants (`ditox_ci/engine/shard.py`) to a sweep's measured costs.

python scripts/fit_costs.py REPORT [SCREENED]

REPORT is the report.json of a sweep of the default corpus with the default configs and every
single pass run on its own: `make sweep SWEEP_ARGS='--screen off'`; SCREENED, of the same sweep
screened: `make sweep`. The sources are resolved again from the cache, for the sizes and node
counts the planner sees. Printed, in the order shard.py keeps them:
  _BASE_S, _PER_NODE_S   non-negative least squares over the models under 1 MB without a task comparator;
  _PER_BYTE_S, _PER_BYTE2_S   the same over the larger ones, each weighted 1/sqrt(its cost);
  _TASK_COMPARATOR_S   the median of what a model with a task comparator took above that estimate;
  _SCREENED_SHARE   what the screened models took in SCREENED over what they took in REPORT, pooled
                    (each model's own share printed beside it);
then the estimate against the measurement per group.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from ditox_ci.corpus import CorpusContext, ModelRef, default_cache_dir, resolve_sources
from ditox_ci.engine import shard
from ditox_ci.engine.screen import SCREEN_MIN_MB, screened_size


@dataclass(frozen=True)
class _Row:
    size: int
    nodes: int  # as the planner counts them (shard.counted_size)
    cost: float
    task: bool  # judged by a task comparator

    @property
    def small(self) -> bool:
        # the planner counts nodes below this size (shard.counted_size): the groups fitted apart
        return self.size < shard.NODES_COUNTED_BELOW


def _row(ref: ModelRef, cost: float) -> _Row:
    return _Row(*shard.counted_size(ref), cost, bool(ref.comparator))


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    report = json.loads(Path(sys.argv[1]).read_text())
    measured = {entry["id"]: entry["cost_s"] for entry in report["models"] if entry["status"] == "ok"}
    sources = sorted({entry["source"] for entry in report["models"]})
    refs = resolve_sources(sources, CorpusContext(default_cache_dir(os.environ)))
    by_id = {ref.id: _row(ref, measured[ref.id]) for ref in refs if ref.id in measured}
    rows = list(by_id.values())
    small = [row for row in rows if row.small and not row.task]
    large = [row for row in rows if not row.small and not row.task]

    counts = np.array([[1.0, row.nodes] for row in small])
    (base, per_node), _ = nnls(counts, np.array([row.cost for row in small]))
    weights = np.array([1 / np.sqrt(row.cost) for row in large])
    terms = np.array([[row.size, float(row.size) ** 2] for row in large]) * weights[:, None]
    (per_byte, per_byte2), _ = nnls(terms, np.array([row.cost for row in large]) * weights)

    def estimate(row: _Row) -> float:
        return base + per_node * row.nodes + per_byte * row.size + per_byte2 * row.size**2

    task = statistics.median(row.cost - estimate(row) for row in rows if row.task)
    print(f"_BASE_S = {base:.3g}\n_PER_NODE_S = {per_node:.3g}")
    print(f"_PER_BYTE_S = {per_byte:.3g}\n_PER_BYTE2_S = {per_byte2:.3g}\n_TASK_COMPARATOR_S = {task:.2g}")
    groups = {
        "under 1 MB": small,
        "1 MB or more": large,
        "task comparator": [row for row in rows if row.task],
    }
    for name, chosen in groups.items():
        predicted = sum(estimate(row) + (task if row.task else 0.0) for row in chosen)
        spent = sum(row.cost for row in chosen)
        print(f"{name}: {len(chosen)} models, estimated {predicted:.1f} s, measured {spent:.1f} s")
    if len(sys.argv) == 3:
        _screened_share(by_id, Path(sys.argv[2]))


def _screened_share(unscreened: dict[str, _Row], path: Path) -> None:
    screened = {entry["id"]: entry["cost_s"] for entry in json.loads(path.read_text())["models"]}
    large = [name for name, row in unscreened.items() if screened_size(row.size, SCREEN_MIN_MB)]
    large = [name for name in large if screened.get(name, 0.0) > 0]  # swept in both
    for name in large:
        before, after = unscreened[name].cost, screened[name]
        print(f"  {name}: {after:.1f} s of {before:.1f} s, {after / before:.2f}")
    share = sum(screened[name] for name in large) / sum(unscreened[name].cost for name in large)
    print(f"_SCREENED_SHARE = {share:.2f}")


if __name__ == "__main__":
    main()
