"""Sharding: split the sweep over N CI jobs so that they finish at about the same time.

Every shard job resolves the same corpus and computes the same plan on its own, so the plan must be
a pure function of the model list, the steps, the shard and worker counts and the costs: no clocks,
no randomness, no set order. The unit of work is a Job (a model and some of its steps): a model runs
whole unless it is costly enough to set a shard's wall time alone, then its steps are split into
parts. Every (model, config) pair runs in exactly one job across the matrix; only the `nop` control
runs in every part, because the findings and coverage of each part are judged against it.

Within a shard the jobs run in finishing order (`finishing_order`): a split model's parts back to
back, and costly and cheap models interleaved so that the share of models finished keeps up with
the share of the work done. Costliest-first across all parts kept every split model unfinished
until its last, cheapest part ran near the end: a cancelled job kept nothing for most of its run.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import onnx

from ditox_ci.control import NOP
from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.loading import node_count
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import Job, JobCounts, JobResult
from ditox_ci.engine.screen import screened_size
from ditox_ci.errors import UsageError
from ditox_ci.report.kinds import ModelStatus
from ditox_ci.report.model import Report

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


# Seconds per model, node, byte and byte², fitted by `python scripts/fit_costs.py REPORT` on the
# report of `make sweep SWEEP_ARGS='--screen off'` (the default corpus and configs, --jobs 2, 2 cores,
# 2026-11-26): base and per node on the models under 1 MB, the byte terms on the 9 larger (light/*)
# ones with weights 1/sqrt(cost), non-negative least squares of the measured cost_s. The per-byte²
# term fitted to 0 once a worker kept the memory its calls free (engine/heap.py): the time per MB
# grew with the model's size while every call faulted its copies in (vgg19, 575 MB, 0.29 s/MB,
# resnet50, 103 MB, 0.17 s/MB) and no longer does (0.10 and 0.12). Models judged by a task
# comparator (packaged ones) took a median _TASK_COMPARATOR_S above that estimate. A fit on an
# older engine over-estimated the middle sizes four-fold (inception_v1: 10.3 s for 2.7) and the
# packaged models a hundred-fold (24 s each for 0.2-4.4), so models over _MIN_SPLIT_S on paper were
# split, each part preparing the original again, for nothing; the fit before this one put vgg19 at
# 160 s for today's 58.
_BASE_S = 0.00625
_PER_NODE_S = 0.00077
_PER_BYTE_S = 1.06e-7
_PER_BYTE2_S = 0.0
_TASK_COMPARATOR_S = 0.34
# The per-node term was fitted below this size; above it the byte terms carry the estimate (nodes
# are under 10 % of it), and counting them would parse every large model in the planning process
# of each shard job: 97 % of that time went to the 9 light/* models, 1.4 GB together.
NODES_COUNTED_BELOW = 1_000_000

# Share of a large model's time left when its single passes are screened (engine/screen.py): what
# the light models of 64 MiB or more took in `make sweep` over what they took with `--screen off`,
# pooled (`scripts/fit_costs.py REPORT SCREENED`, 2026-11-25): 0.20 (bvlc_alexnet), 0.27
# (resnet50), 0.49 (zfnet512), 0.52 (vgg19), pooled 0.44, in the day's first run; 0.19, 0.24, 0.45,
# 0.43, pooled 0.39, in its last. The share moves with the plan: a pass that changed a large model
# runs alone on the later ones of the same worker (`suspects`), so VGG-19 took 88 s after one order
# and 74 s after another. Pooled, the two that set a shard's wall time count most; at 0.33 the
# shards holding zfnet512's parts ran 1.26× the mean, at 0.44 1.23× (bench_shard). Refitted
# 2026-11-26 with the kept memory (engine/heap.py): 0.23, 0.26, 0.54, 0.50, pooled 0.44 again.
_SCREENED_SHARE = 0.44

# Share of a model's time that every part of it repeats: preparing the original (load, inputs, one
# run) and the nop control. Measured on light/bvlc_alexnet and light/resnet50: 9-14 %, and 22 %,
# 30 % and 42 % (vgg19), screened, once the other calls got cheaper (engine/heap.py; the nop's is
# the job's first call, which still faults its memory in).
_PART_OVERHEAD = 0.30
# Part-size limits tried, in multiples of one worker's share of the whole sweep, fewest splits
# first: splitting trades a shorter longest job for repeated overhead, and which limit wins depends
# on the corpus, so the plan whose predicted slowest shard finishes first is kept.
_SPLIT_LIMITS = (math.inf, 2.0, 1.5, 1.25, 1.0, 0.75, 0.5)
# Models cheaper than this always run whole: a shard job spends seconds before its first model
# (imports, corpus, costs, worker start), so shaving less than that off its longest job gains nothing.
_MIN_SPLIT_S = 10.0


@dataclass(frozen=True)
class Shard:
    """Shard `index` (0-based) of `count`: which share of the plan one job sweeps."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            last = max(self.count, 1) - 1
            raise UsageError(f"shard '{self}' is out of range; the index must be 0 … {last}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """"I/N", as --shard takes it."""
        match = _SHARD.match(text)
        if not match:
            raise UsageError(f"shard '{text}' is not I/N; pass e.g. --shard 0/4 (0-based index)")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def previous_costs(report: Report) -> dict[str, float]:
    """Measured seconds per model id from an earlier (merged) report; unmeasured models left out."""
    return {entry.id: entry.cost_s for entry in report.models if entry.cost_s > 0}


def _node_count(path: str) -> int:
    """Nodes in the main graph and every subgraph; 0 when the file cannot be parsed here."""
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:  # the sweep reports unreadable models; sharding only needs a guess
        return 0
    return node_count(model)


def counted_size(ref: ModelRef) -> tuple[int, int]:
    """The bytes and nodes the estimate counts: from the source's index when it gives them (the
    file may not be unpacked yet), else from the file; nodes only in files under 1 MB (0 above)."""
    if ref.size is not None:
        size = ref.size.bytes
        nodes = ref.size.nodes if size < NODES_COUNTED_BELOW else 0
        return size, nodes
    try:
        size = os.path.getsize(ref.path)
    except OSError:
        size = 0
    return size, _node_count(ref.path) if size < NODES_COUNTED_BELOW else 0


def estimate_cost(
    ref: ModelRef, previous_costs: Mapping[str, float] | None, screen_min_mb: float | None = None
) -> float:
    """Expected seconds to sweep `ref`: its measured time when known, else from its size and node
    count (`counted_size`); _SCREENED_SHARE of that from `screen_min_mb` MiB on, where the model's
    single passes are screened."""
    if previous_costs and previous_costs.get(ref.id, 0.0) > 0:
        return float(previous_costs[ref.id])
    task = _TASK_COMPARATOR_S if ref.comparator else 0.0
    size, nodes = counted_size(ref)
    cost = _BASE_S + task + _PER_NODE_S * nodes + _PER_BYTE_S * size + _PER_BYTE2_S * size * size
    return cost * _SCREENED_SHARE if screened_size(size, screen_min_mb) else cost


def part_cost(model_cost: float, steps_in_part: int, steps_in_model: int) -> float:
    """Expected seconds of a part that runs `steps_in_part` of the model's `steps_in_model` steps
    besides the control: every part repeats the preparation and the control, the rest is shared."""
    if steps_in_part >= steps_in_model:
        return model_cost
    shared = model_cost * (1.0 - _PART_OVERHEAD)
    return model_cost * _PART_OVERHEAD + shared * steps_in_part / steps_in_model


def job_cost(job: Job, model_cost: float, steps: Sequence[Step]) -> float:
    """Expected seconds of `job`, a model (whole or a part) of a sweep over `steps`."""
    def own(run: Sequence[Step]) -> int:
        return sum(1 for step in run if step.label != NOP)

    return part_cost(model_cost, own(job.steps), own(steps))


def part_count(model_cost: float, limit: float, steps_in_model: int, most: int) -> int:
    """Fewest parts that each stay within `limit`, at most `most` and one step each (as many as
    allowed when the repeated overhead alone exceeds the limit); 1 for a cheap model."""
    ceiling = max(1, min(most, steps_in_model))
    if model_cost <= max(limit, _MIN_SPLIT_S) or ceiling == 1:
        return 1
    room = limit - model_cost * _PART_OVERHEAD
    if room <= 0:
        return ceiling
    return min(ceiling, math.ceil(model_cost * (1.0 - _PART_OVERHEAD) / room))


def split_model(ref: ModelRef, steps: Sequence[Step], parts: int) -> list[Job]:
    """`parts` jobs that deal the steps out in turn (part k: steps k, k + parts, …), each starting
    with the control step. Dealt, not cut into runs: the passes that change most models (renaming
    ones, at the head of onnxoptimizer's list) are each a call and a run of their own on a screened
    model, and in runs they all fell in the first part (VGG-19's took 41 s, the others 18 s)."""
    control = tuple(step for step in steps if step.label == NOP)
    others = tuple(step for step in steps if step.label != NOP)
    if parts <= 1 or len(others) <= 1:
        return [Job(ref, tuple(steps))]
    return [Job(ref, control + others[first::parts]) for first in range(min(parts, len(others)))]


Costed = tuple[float, Job]


def shard_walls(
    plan: Sequence[Sequence[Job]], cost: Callable[[ModelRef], float], steps: Sequence[Step], workers: int
) -> list[float]:
    """Each shard's predicted wall time: its jobs (a `plan_jobs` plan), costed by their model's
    `cost`, run in order on `workers` workers."""
    return [makespan([job_cost(job, cost(job.ref), steps) for job in shard], workers) for shard in plan]


def makespan(costs: Sequence[float], workers: int) -> float:
    """When a pool of `workers` that takes jobs in this order finishes (as WorkerPool does where
    memory lets every job start in turn: the model leaves memory out)."""
    free = [0.0] * max(1, workers)
    for job_cost in costs:
        heapq.heappush(free, heapq.heappop(free) + job_cost)
    return max(free)


def _lpt(costed: Sequence[Costed], count: int) -> list[list[Costed]]:
    """Longest-processing-time-first onto the least-loaded shard, ties to the lowest index."""
    loads = [(0.0, index) for index in range(count)]
    shards: list[list[Costed]] = [[] for _ in range(count)]
    for item in costed:
        load, index = heapq.heappop(loads)
        shards[index].append(item)
        heapq.heappush(loads, (load + item[0], index))
    return shards


def finishing_order(shard: Sequence[Costed], workers: int) -> list[Costed]:
    """A shard's jobs in the order that finishes models steadily without lengthening its run.

    Models are ranked costliest first and cut in two halves by count; each half is a queue of jobs,
    a model's parts back to back. Jobs are placed as the pool would place them with these costs
    (memory left out). The next job comes from the head of the costlier queue while the share of the
    cost taken so far is no more than the share of the models completed and another worker is on
    something short, else from the cheaper queue, else, when every other worker is on a long job,
    from the tail of the costlier queue. So after a third of the work about a third of the models
    are done, no two large models hold every worker while shorter ones wait, the costliest job still
    starts first (what keeps LPT's shard balance), and the run ends on middling jobs. Ties go by
    model id: every shard job computes the same order."""
    parts: dict[str, list[Costed]] = {}
    for item in shard:
        parts.setdefault(item[1].ref.id, []).append(item)
    models = sorted(parts.values(), key=lambda group: (-sum(cost for cost, _ in group), group[0][1].ref.id))
    half = (len(models) + 1) // 2
    costly = deque(item for group in models[:half] for item in group)
    cheap = deque(item for group in models[half:] for item in group)
    left = {model: len(group) for model, group in parts.items()}
    total = sum(cost for cost, _ in shard)
    # per worker: when it is free, and whether it is on a long job (the costlier queue's head) until then
    free_at, on_long = [0.0] * max(1, workers), [False] * max(1, workers)
    ordered: list[Costed] = []
    taken_cost, completed = 0.0, 0
    while costly or cheap:
        worker = min(range(len(free_at)), key=lambda k: (free_at[k], k))
        others = [k for k in range(len(free_at)) if k != worker]
        all_long = bool(others) and all(on_long[k] and free_at[k] > free_at[worker] for k in others)
        behind = taken_cost * len(models) > completed * total
        if costly and not behind and not (all_long and cheap):
            item, on_long[worker] = costly.popleft(), True
        elif cheap:
            item, on_long[worker] = cheap.popleft(), False
        else:
            item, on_long[worker] = costly.pop(), False
        ordered.append(item)
        free_at[worker] += item[0]
        taken_cost += item[0]
        left[item[1].ref.id] -= 1
        completed += left[item[1].ref.id] == 0
    return ordered


def _split_plan(
    models: Sequence[ModelRef],
    costs: Sequence[float],
    steps: Sequence[Step],
    shards: int,
    workers: int,
    limit: float,
) -> list[list[Costed]]:
    steps_in_model = sum(1 for step in steps if step.label != NOP)
    position = {step.label: index for index, step in enumerate(steps)}
    costed: list[Costed] = []
    for ref, model_cost in zip(models, costs, strict=True):
        parts = part_count(model_cost, limit, steps_in_model, shards * workers)
        costed.extend((job_cost(job, model_cost, steps), job) for job in split_model(ref, steps, parts))
    # costliest first onto the shards, then a total order that does not depend on the corpus order
    costed.sort(key=lambda item: (-item[0], item[1].ref.id, [position[s.label] for s in item[1].steps]))
    return [finishing_order(shard, workers) for shard in _lpt(costed, shards)]


def plan_jobs(
    models: Sequence[ModelRef],
    steps: Sequence[Step],
    shards: int,
    workers: int,
    cost: Callable[[ModelRef], float],
) -> list[list[Job]]:
    """The Jobs of every shard in finishing order (what `sweep --shard I/N` runs).

    A model costly enough to set a shard's wall time alone is split into parts over its steps,
    each repeating the `nop` control; longest-processing-time-first then places models and parts
    onto the least-loaded shard, and `finishing_order` orders each shard's jobs. Of the plans for
    each limit in _SPLIT_LIMITS, the one whose slowest shard is predicted to finish first on
    `workers` workers, in that order, wins (ties: fewer splits).
    """
    if shards < 1:
        raise UsageError(f"shard count {shards} must be at least 1")
    ids = [ref.id for ref in models]
    if len(set(ids)) != len(ids):
        raise UsageError("the corpus lists a model id twice; give each model source only once")
    workers = max(1, workers)
    if shards * workers == 1:  # one worker runs everything whatever the order: no costs needed
        return [[Job(ref, tuple(steps)) for ref in models]]
    costs = [cost(ref) for ref in models]
    share = sum(costs) / (shards * workers)
    best: tuple[float, list[list[Costed]]] | None = None
    for fraction in _SPLIT_LIMITS:
        plan = _split_plan(models, costs, steps, shards, workers, fraction * share)
        slowest = max(makespan([c for c, _ in shard], workers) for shard in plan)
        if best is None or slowest < best[0]:
            best = (slowest, plan)
    assert best is not None
    return [[job for _, job in shard] for shard in best[1]]


def combine_results(parts: Sequence[JobResult], steps: Sequence[Step]) -> JobResult:
    """One model's part results as the result of one job over all their steps.

    Outcomes (and every other per-step mapping) are united, the first part by step order winning
    for the control they share; times and counters add up; the model is skipped when any part
    was, with that part's reason.
    """
    if len(parts) == 1:
        return parts[0]
    position = {step.label: index for index, step in enumerate(steps)}

    def first_step(part: JobResult) -> int:
        own = [position[label] for label in part.outcomes if label != NOP and label in position]
        return min(own, default=len(position))

    ordered = sorted(parts, key=first_step)
    prepared = next((part for part in ordered if part.sha256), ordered[0])
    skipped = next((part for part in ordered if part.status != ModelStatus.OK), None)
    values: dict[str, Any] = {}
    for spec in fields(JobResult):
        own = [getattr(part, spec.name) for part in ordered]
        # times and counts add up; every other field but the mappings describes the model and is
        # the same in each part
        if spec.name == "wall_s":
            values[spec.name] = sum(own)
        elif spec.name == "counts":
            values[spec.name] = sum(own, JobCounts())
        elif isinstance(own[0], dict):
            values[spec.name] = {key: value for mapping in reversed(own) for key, value in mapping.items()}
    if skipped is not None:
        values.update(status=skipped.status, reason=skipped.reason)
    # a part whose every verdict was reused never ran the original (engine/reuse.py): the draw is
    # the part's that did
    values["draw"] = next((part.draw for part in ordered if part.draw is not None), None)
    return replace(prepared, **values)
