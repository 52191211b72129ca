"""What this shard sweeps: the corpus resolved from the sources' indexes, this shard's share of
the jobs (only its models unpacked), or a stream of models made as workers free up (fuzz).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from ditox_ci.control import NOP, single_pass_label
from ditox_ci.corpus import SOURCES, CorpusContext, ModelRef, resolve_sources, unpack
from ditox_ci.engine.plan import Step, build_steps, step_on_build
from ditox_ci.engine.pool import Job, JobResult, WorkerPool
from ditox_ci.engine.screen import screened_from
from ditox_ci.engine.shard import estimate_cost, part_cost, plan_jobs, previous_costs
from ditox_ci.errors import InputError
from ditox_ci.log import Log
from ditox_ci.report import Finding, Report
from ditox_ci.report.header import OptimizerInfo
from ditox_ci.report.outputs import prepare_out_dir
from ditox_ci.sweep.setup import SweepOptions, SweepSetup

# Every job of a matrix must compute the same plan, so unless --jobs says otherwise a sharded plan
# assumes this many workers per shard job (GitHub's standard runners have 2 cores), never the
# core count of the machine it happens to run on.
SHARD_PLAN_WORKERS = 2


def require_every_named_source(refs: list[ModelRef], specs: Sequence[str]) -> None:
    """A named source the user asked for that has nothing here (`packaged` in an environment
    without its packages) is an error: its models would only be skipped, and the sweep of the
    other sources would pass for a sweep of all of them."""
    for spec in specs:
        name = spec.partition(":")[0]
        own = [ref for ref in refs if ref.source == name]
        if name in SOURCES and own and all(ref.meta.get("unavailable") for ref in own):
            raise InputError(f"model source {spec!r} has nothing to sweep here: {own[0].meta['unavailable']}")


def _outside_out(refs: list[ModelRef], options: SweepOptions, log: Log | None) -> list[ModelRef]:
    """The models not below --out: a corpus folder that holds the output folder would otherwise
    sweep the previous run's repro bundles as models of its own."""
    out = Path(options.out).resolve()
    kept = [ref for ref in refs if not (ref.path and Path(ref.path).resolve().is_relative_to(out))]
    if len(kept) < len(refs) and log is not None:
        log.notice(f"{len(refs) - len(kept)} model(s) below --out {options.out} are its output, not swept")
    return kept


def plan_sweep(
    options: SweepOptions,
    info: OptimizerInfo,
    log: Log | None = None,
    previous: Report | None = None,
    screen_min_mb: float | None = None,
    steps: Sequence[Step] | None = None,
    carried: Collection[str] = (),
) -> tuple[tuple[Step, ...], list[Job]]:
    """Resolve the steps of the optimizer `info` describes (unless given) and this shard's Jobs;
    every error here is the user's to fix. Globs and the shard's share are resolved from the sources'
    indexes first; then only the models of this shard are unpacked. `previous`'s timings balance the
    shards; a model screened from `screen_min_mb` MiB on (the workers' setting) is costed as such,
    and in a PR check as a part of it that calls only the configs not `carried`: a full sweep's
    timings, or a model's size, would split a large model whose PR check is one or three calls, each
    part loading it again."""
    prepare_out_dir(Path(options.out))
    steps = tuple(steps) if steps is not None else build_steps(options.configs, options.passes, info)
    shard = options.shard
    context = CorpusContext(Path(options.cache_dir), options.seed)
    corpus = resolve_sources(options.models, context, log, unpacked=False)
    require_every_named_source(corpus, options.models)
    refs = _outside_out(corpus, options, log)
    if not refs:
        sources = " ".join(options.models) or "the default sources"
        raise InputError(
            f"the corpus is empty: {sources} selected no model; an empty sweep is not a green one "
            "(`ditox-ci corpus list --models …` shows what a source selects)"
        )
    workers = options.jobs or (SHARD_PLAN_WORKERS if shard.count > 1 else os.cpu_count() or 1)
    costs = previous_costs(previous) if previous is not None else None
    from_mb = screened_from(info, steps, screen_min_mb)
    own = [step for step in steps if step.label != NOP]
    called = sum(1 for step in own if step.label not in carried)

    def cost(ref: ModelRef) -> float:
        estimate = estimate_cost(ref, costs, from_mb)
        return part_cost(estimate, called, len(own)) if carried else estimate

    plan = plan_jobs(refs, steps, shard.count, workers, cost)
    unpack([job.ref for job in plan[shard.index]], context)
    return steps, plan[shard.index]


def configs_run(labels: Collection[str], steps: Sequence[Step]) -> tuple[str, ...]:
    """The configs a model ran here, in step order, when that is only a part of them; else ()."""
    if all(step.label in labels for step in steps):
        return ()
    return tuple(step.label for step in steps if step.label in labels)


@dataclass(frozen=True)
class ModelStream:
    """Models made while the sweep runs (`ditox-ci fuzz`) instead of a corpus planned up front.

    `refs` is drawn from only when a worker is free, so making and judging models share one time
    budget and `refs` decides when to stop; `judged` sees each model's findings as they are known
    (to delete the ones not worth keeping); pinpointing stops reducing at `pinpoint_deadline`."""

    refs: Iterable[ModelRef]
    judged: Callable[[JobResult, Sequence[Finding]], None] = lambda result, findings: None
    pinpoint_deadline: float | None = None


class Carrying(NamedTuple):
    """The configs a PR check may carry (`carried`: their passes are unchanged) and those it calls
    whose stored result, given again by this build, stands for its control (`canaries`: the PR
    changed them); each the same pass list in the stored report's optimizer (engine/reuse.py). A
    canary that runs a list of passes is also named in `lists`, with its passes' single-pass configs:
    it may be carried where each of them left the model as the control did (`Reuse.composed`)."""

    carried: frozenset[str] = frozenset()
    canaries: frozenset[str] = frozenset()
    lists: Mapping[str, tuple[str, ...]] = {}


def carried_configs(setup: SweepSetup, steps: Sequence[Step]) -> Carrying:
    """The configs whose passes the PR leaves unchanged (`setup.impact`), and those it changed, each
    the same pass list in the stored report's optimizer: those a step may be carried for, and the
    canaries (engine/reuse.py). None without `--carry`, without a stored report of the same
    optimizer whose verdicts are reused, or without knowing what the PR changed."""
    impact, reference = setup.impact, setup.reference
    if not setup.options.carry or impact is None or reference is None or not setup.reuse:
        return Carrying()
    if reference.optimizer.name != setup.info.name:
        return Carrying()

    def same_there(step: Step) -> bool:
        there = step_on_build(step, reference.optimizer)
        return there is not None and (there.passes, there.fixed_point) == (step.passes, step.fixed_point)

    kept = [step for step in steps if step.label != NOP and same_there(step)]
    carried = frozenset(step.label for step in kept if not impact.changes(step.passes))
    known = frozenset(step.label for step in kept)
    canaries = known - carried
    lists = {}
    for step in kept:
        # (the nop pass, in onnxoptimizer's default list, is the control's own call)
        singles = tuple(single_pass_label(name) for name in step.passes if name != NOP)
        composed = step.label in canaries and step.single_pass is None
        if composed and singles and known.issuperset(singles):
            lists[step.label] = singles
    return Carrying(carried, canaries, lists)


@dataclass(frozen=True)
class SweepPlan:
    """What this shard sweeps: the optimizer, its steps, and the jobs the pool draws (once).

    A corpus is planned up front, a costly model split by config into several jobs (`parts`). A
    stream plans nothing: one job per model, made on demand, so `parts` stays empty and each
    result is a whole model."""

    info: OptimizerInfo
    steps: tuple[Step, ...]
    jobs: Iterable[Job]
    parts: Mapping[str, int] = field(default_factory=dict)
    # the configs each planned model runs in this shard
    labels_run: Mapping[str, frozenset[str]] = field(default_factory=dict)
    streamed: bool = False
    # what a PR check carries (none for a stream, which has no stored report of its models)
    carrying: Carrying = field(default_factory=Carrying)

    @property
    def models_planned(self) -> int | None:
        """None for a stream, which plans nothing up front."""
        return None if self.streamed else len(self.parts)

    def configs_of(self, model: str) -> tuple[str, ...]:
        return configs_run(self.labels_run.get(model, frozenset()), self.steps)


def plan_corpus(setup: SweepSetup, log: Log) -> SweepPlan:
    options = setup.options
    screen_min_mb = setup.worker_config.screen_min_mb
    info = setup.info
    steps = build_steps(options.configs, options.passes, info)
    carrying = carried_configs(setup, steps)
    steps, jobs = plan_sweep(options, info, log, setup.previous, screen_min_mb, steps, carrying.carried)
    parts = Counter(job.ref.id for job in jobs)
    labels_run: dict[str, set[str]] = defaultdict(set)
    for job in jobs:
        labels_run[job.ref.id].update(step.label for step in job.steps)
    run = {model: frozenset(labels) for model, labels in labels_run.items()}
    plan = SweepPlan(info, steps, jobs, parts, run, carrying=carrying)
    split = [model for model in parts if parts[model] > 1 or plan.configs_of(model)]
    what = f"{len(parts)} models × {len(steps)} configs ({info.name} {info.version})"
    what += f", shard {options.shard}"
    if split:
        what += f"; {len(split)} costly models split by config ({len(jobs)} jobs)"
    log.info(what)
    return plan


def plan_stream(setup: SweepSetup, stream: ModelStream, log: Log) -> SweepPlan:
    info = setup.info
    steps = build_steps(setup.options.configs, setup.options.passes, info)
    log.info(f"models made as workers free up × {len(steps)} configs ({info.name} {info.version})")
    return SweepPlan(info, steps, (Job(ref, steps) for ref in stream.refs), streamed=True)


def alone_last(plan: SweepPlan, pool: WorkerPool) -> SweepPlan:
    """The jobs that need the whole pool's memory (`WorkerPool.runs_alone`: VGG-19 under a
    --memory-limit of 2 GiB) after the others. Every other worker idles beside such a job wherever
    it comes, so the run takes as long; first in line, such a job kept the default sweep at 0
    models done for minutes, and a cancel kept none."""
    if plan.streamed:
        return plan
    jobs = list(plan.jobs)
    alone = [pool.runs_alone(job) for job in jobs]
    ordered = [job for job, last in zip(jobs, alone, strict=True) if not last]
    return replace(plan, jobs=ordered + [job for job, last in zip(jobs, alone, strict=True) if last])


