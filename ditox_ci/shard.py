"""Sharding: split the corpus over N CI jobs so that they finish at about the same time.

Every shard job resolves the same corpus and computes the same assignment on its own, so the
split must be a pure function of the model list and the costs: no clocks, no randomness, no set
order. A model (with all of its configs) lands in exactly one shard, so every (model, config)
pair runs exactly once across the matrix.
"""

from __future__ import annotations

import heapq
import os
import re
from collections.abc import Callable, Mapping, Sequence

import onnx

from ditox_ci.corpus import ModelRef
from ditox_ci.errors import UsageError
from ditox_ci.report.model import Report

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")

# Seconds per model, per node and per byte, fitted loosely on onnx-node and onnx-data sweeps: a
# fixed price for sessions and worker start, the optimizer passes walk the graph (per node), and
# every run copies, serializes and executes the weights (per byte). Only ratios matter for LPT.
_BASE_S = 0.5
_PER_NODE_S = 0.02
_PER_BYTE_S = 2e-8


def parse_shard(text: str) -> tuple[int, int]:
    """Parse "I/N" (0-based I, 0 <= I < N) into (I, N)."""
    match = _SHARD.match(text)
    if not match:
        raise UsageError(f"shard '{text}' is not I/N; pass e.g. --shard 0/4 (0-based index)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or index >= count:
        raise UsageError(
            f"shard '{text}' is out of range; the index must be 0 … {max(count, 1) - 1}"
        )
    return index, count


def previous_costs(report: Report) -> dict[str, float]:
    """Measured seconds per model id from an earlier (merged) report; unmeasured models left out."""
    return {entry.id: entry.cost_s for entry in report.models if entry.cost_s > 0}


def _node_count(path: str) -> int:
    """Nodes in the main graph and every subgraph; 0 when the file cannot be parsed here."""
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:  # the sweep reports unreadable models; sharding only needs a guess
        return 0
    count = 0
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        count += len(graph.node)
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    graphs.append(attribute.g)
                graphs.extend(attribute.graphs)
    return count


def estimate_cost(ref: ModelRef, previous_costs: Mapping[str, float] | None) -> float:
    """Expected seconds to sweep `ref`: its measured time when known, else size and node count."""
    if previous_costs and previous_costs.get(ref.id, 0.0) > 0:
        return float(previous_costs[ref.id])
    try:
        size = os.path.getsize(ref.path)
    except OSError:
        size = 0
    return _BASE_S + _PER_NODE_S * _node_count(ref.path) + _PER_BYTE_S * size


def assign(
    models: Sequence[ModelRef], count: int, cost: Callable[[ModelRef], float]
) -> list[list[ModelRef]]:
    """Longest-processing-time-first: the costliest model goes to the least-loaded shard.

    Ties break on model id and shard index, so every job computes the same split. Within a shard
    models keep their corpus order.
    """
    if count < 1:
        raise UsageError(f"shard count {count} must be at least 1")
    order = {ref.id: position for position, ref in enumerate(models)}
    if len(order) != len(models):
        raise UsageError("the corpus lists a model id twice; give each model source only once")
    costed = sorted(((cost(ref), ref) for ref in models), key=lambda item: (-item[0], item[1].id))
    loads = [(0.0, index) for index in range(count)]
    shards: list[list[ModelRef]] = [[] for _ in range(count)]
    for model_cost, ref in costed:
        load, index = heapq.heappop(loads)
        shards[index].append(ref)
        heapq.heappush(loads, (load + model_cost, index))
    return [sorted(shard, key=lambda ref: order[ref.id]) for shard in shards]


def select(
    models: Sequence[ModelRef],
    index: int,
    count: int,
    previous: Mapping[str, float] | None = None,
) -> list[ModelRef]:
    """The models of shard `index` of `count`: what `sweep --shard I/N` runs."""
    return assign(models, count, lambda ref: estimate_cost(ref, previous))[index]
