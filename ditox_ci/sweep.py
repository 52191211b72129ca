"""The sweep: every model of the corpus (this shard's share) through every step, into one Report.

corpus → plan → worker pool (optimize, run, compare) → findings (nop control collapses
infrastructure failures into one finding) → coverage and stats → report.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import platform
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx
import onnxruntime

from ditox_ci import __version__
from ditox_ci.ci.shard import combine_results, estimate_cost, parse_shard, plan_jobs, previous_costs
from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.tensor import DEFAULT_ATOL, DEFAULT_RTOL
from ditox_ci.corpus import SOURCES, CorpusContext, ModelRef, default_cache_dir, resolve_sources, unpack
from ditox_ci.corpus.loading import model_sha256
from ditox_ci.engine.evaluate import EvalSettings
from ditox_ci.engine.findings import Coverage, coverage_of, findings_for
from ditox_ci.engine.plan import DEFAULT_CONFIGS, Step, build_steps
from ditox_ci.engine.runner import RUNNER_CHOICES
from ditox_ci.engine.worker import (
    DEFAULT_MEMORY_LIMIT_MB,
    Job,
    JobResult,
    WorkerConfig,
    WorkerPool,
    allowance_per_model_mb,
    warm_up,
)
from ditox_ci.errors import InputError, Interrupted, UsageError
from ditox_ci.log import Log
from ditox_ci.optimizers import OPAQUE_NOTE, OptimizerInfo, load_optimizer
from ditox_ci.optimizers.install import Installation, optimizer_build
from ditox_ci.pinpoint.pinpointer import LOCALIZE_MODES, PinpointOptions, pinpoint
from ditox_ci.progress import Progress
from ditox_ci.report import Finding, ModelEntry, Report, read_report
from ditox_ci.report.exercised import EXERCISED_KEY
from ditox_ci.report.model import INTERNAL_ERROR
from ditox_ci.report.outputs import prepare_out_dir
from ditox_ci.triage.base_optimizer import KNOWN_BY, check_on_base
from ditox_ci.triage.baseline import check_entry_passes, load_baseline
from ditox_ci.triage.builds import identify, look_alike
from ditox_ci.triage.exercise import changed_passes, exercise, passes_to_exercise
from ditox_ci.triage.reproduce import reproduce

# where the models made for the passes a PR adds or changes go, below --out
EXERCISED_DIR = "exercised"
# the options that name a file or folder
PATH_OPTIONS = ("out", "baseline", "previous", "cache_dir")


@dataclass(frozen=True)
class SweepOptions:
    models: tuple[str, ...] = ()
    configs: tuple[str, ...] = DEFAULT_CONFIGS
    passes: tuple[str, ...] = ()
    optimizer: str = "onnxoptimizer"
    base_optimizer: str | None = None
    baseline: str | None = None
    previous: str | None = None
    shard: str = "0/1"
    jobs: int = 0
    timeout: float = 60.0
    memory_limit: int = DEFAULT_MEMORY_LIMIT_MB
    samples: int = 1
    seed: int = 0
    # None: by each output's dtype (float16/bfloat16 looser, float64 tighter than float32's 1e-3/1e-4)
    rtol: float | None = None
    atol: float | None = None
    # also judge float outputs against each model's own measured noise floor
    calibrate: bool = True
    dynamic_dim: int = 2
    runner: str = "auto"
    comparator: str | None = None
    out: str = "ditox-report"
    localize: str = "auto"
    reduce_budget: float = 30.0
    # with a base build: seconds for making models for the passes the head adds or changes (0: off)
    exercise_budget: float = 60.0
    # the PR's base commit: passes whose source changed since it, in the working directory's
    # checkout, are exercised too
    changed_since: str | None = None
    # gate (exit 1) when a larger share of the corpus than this was skipped; None: no such gate
    max_skipped: float | None = None
    cache_dir: str = field(default_factory=lambda: str(default_cache_dir(os.environ)))

    def __post_init__(self) -> None:
        # every path the sweep writes, reads or runs is made absolute here, once: the workers, the
        # optimizer and the standalone script run in other working directories (a relative --out
        # once made the script's path double, and every issue said the bug did not reproduce)
        for name in PATH_OPTIONS:
            value = getattr(self, name)
            if value:
                object.__setattr__(self, name, os.path.abspath(os.path.expanduser(value)))
        for name in ("jobs", "samples", "dynamic_dim", "memory_limit"):
            if getattr(self, name) < (0 if name == "jobs" else 1):
                raise UsageError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        # `not x >= 0` also refuses NaN, which would make every comparison pass
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < math.inf:
                raise UsageError(f"--{name} must be a finite number >= 0, got {value}")
        if not self.timeout > 0:
            raise UsageError(f"--timeout must be > 0 seconds, got {self.timeout}")
        if self.max_skipped is not None and not 0 <= self.max_skipped <= 1:
            raise UsageError(f"--max-skipped must be a fraction from 0 to 1, got {self.max_skipped}")
        if self.localize not in LOCALIZE_MODES:
            raise UsageError(f"--localize must be one of {', '.join(LOCALIZE_MODES)}, got '{self.localize}'")
        if self.runner not in RUNNER_CHOICES:
            raise UsageError(f"--runner must be one of {', '.join(RUNNER_CHOICES)}, got '{self.runner}'")
        if self.exercise_budget < 0:
            raise UsageError(f"--exercise-budget must be >= 0 seconds, got {self.exercise_budget}")
        if self.reduce_budget < 0:
            raise UsageError(f"--reduce-budget must be >= 0 seconds, got {self.reduce_budget}")
        if self.comparator is not None:
            COMPARATORS.lookup(self.comparator)


def _file_sha256(ref: ModelRef) -> str:
    """The model file's hash: the one its source just verified (packaged, hub), else read from the
    file; "" for a model that has no file here (an unavailable package)."""
    if ref.meta.get("sha256") and not ref.meta.get("unavailable"):
        return str(ref.meta["sha256"])
    try:
        return model_sha256(ref.path)
    except OSError:
        return ""


def environment_info() -> dict[str, str]:
    return {
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "python": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
    }


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
    options: SweepOptions, log: Log | None = None, info: OptimizerInfo | None = None
) -> tuple[OptimizerInfo, tuple[Step, ...], list[Job]]:
    """Resolve optimizer (unless `info` says what it is), steps and this shard's Jobs; every error
    here is the user's to fix. Globs and the shard's share are resolved from the sources' indexes
    first; then only the models of this shard are unpacked."""
    prepare_out_dir(Path(options.out))
    info = info or load_optimizer(options.optimizer).info
    steps = build_steps(options.configs, options.passes, info)
    index, count = parse_shard(options.shard)
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
    workers = options.jobs or (SHARD_PLAN_WORKERS if count > 1 else os.cpu_count() or 1)
    costs = previous_costs(read_report(Path(options.previous))) if options.previous else None
    plan = plan_jobs(refs, steps, count, workers, lambda ref: estimate_cost(ref, costs))
    unpack([job.ref for job in plan[index]], context)
    return info, steps, plan[index]


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

    @property
    def models_planned(self) -> int | None:
        """None for a stream, which plans nothing up front."""
        return None if self.streamed else len(self.parts)

    def configs_of(self, model: str) -> tuple[str, ...]:
        return configs_run(self.labels_run.get(model, frozenset()), self.steps)


def _plan_corpus(options: SweepOptions, build: Installation, log: Log) -> SweepPlan:
    info, steps, jobs = plan_sweep(options, log, build.info)
    parts = Counter(job.ref.id for job in jobs)
    labels_run: dict[str, set[str]] = defaultdict(set)
    for job in jobs:
        labels_run[job.ref.id].update(step.label for step in job.steps)
    plan = SweepPlan(info, steps, jobs, parts, {model: frozenset(run) for model, run in labels_run.items()})
    split = [model for model in parts if parts[model] > 1 or plan.configs_of(model)]
    what = f"{len(parts)} models × {len(steps)} configs ({info.name} {info.version})"
    what += f", shard {options.shard}"
    if split:
        what += f"; {len(split)} costly models split by config ({len(jobs)} jobs)"
    log.info(what)
    return plan


def _plan_stream(options: SweepOptions, build: Installation, stream: ModelStream, log: Log) -> SweepPlan:
    info = build.info
    steps = build_steps(options.configs, options.passes, info)
    log.info(f"models made as workers free up × {len(steps)} configs ({info.name} {info.version})")
    return SweepPlan(info, steps, (Job(ref, steps) for ref in stream.refs), streamed=True)


def _worker_config(options: SweepOptions, build: Installation) -> WorkerConfig:
    comparators = ("tensor",) + ((options.comparator,) if options.comparator else ())
    info = build.info
    return WorkerConfig(
        optimizer=build.optimizer,
        optimizer_path=build.path,
        settings=EvalSettings(
            samples=options.samples,
            seed=options.seed,
            dynamic_dim=options.dynamic_dim,
            rtol=options.rtol,
            atol=options.atol,
            calibrate=options.calibrate,
            runner=options.runner,
            noise_floor=info.noise_floor,
        ),
        comparators=comparators,
        timeout_s=options.timeout,
        memory_limit_mb=options.memory_limit,
        allowance_per_model_mb=allowance_per_model_mb(info.name),
    )


def _machine_memory_mb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _worker_count(options: SweepOptions, log: Log) -> int:
    """--jobs, else one worker per core; a warning when their memory limits exceed the machine's."""
    workers = options.jobs or os.cpu_count() or 1
    memory_mb = _machine_memory_mb()
    if memory_mb and workers * options.memory_limit > memory_mb:
        log.warning(
            f"{workers} workers × --memory-limit {options.memory_limit} MiB exceed this machine's "
            f"{memory_mb:.0f} MiB: the kernel may kill a worker first (reported as out of memory); "
            "lower --jobs or --memory-limit"
        )
    return workers


@dataclass
class _Finished:
    """What the sweep has finished so far, filled in by each stage: an interruption keeps it, and
    the report holds only it (whole models, their findings as far as they were judged)."""

    results: list[JobResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    base_stats: dict[str, Any] | None = None
    reproduce_stats: dict[str, Any] | None = None
    pinpoint_stats: dict[str, int] | None = None
    exercise_stats: dict[str, Any] | None = None


def _sweep_models(
    pool: WorkerPool,
    plan: SweepPlan,
    finished: _Finished,
    log: Log,
    stream: ModelStream | None,
    on_result: Callable[[JobResult], None] | None,
) -> None:
    """Every job through the pool; each model's findings once all of its parts are back."""
    parts_total = sum(count for count in plan.parts.values() if count > 1)
    with log.group("sweep"), Progress(log, len(plan.parts), "models", parts_total) as progress:
        finished_parts: dict[str, list[JobResult]] = defaultdict(list)
        for part in pool.run(plan.jobs):
            finished_parts[part.ref.id].append(part)
            if len(finished_parts[part.ref.id]) < plan.parts.get(part.ref.id, 0):
                progress.part_done(findings=len(finished.findings))
                continue
            # findings, coverage and the report see one result per model, however it was split
            result = combine_results(finished_parts.pop(part.ref.id), plan.steps)
            new = findings_for(result, plan.steps)
            finished.results.append(result)
            finished.findings.extend(new)
            progress.advance(plan.parts.get(part.ref.id, 0) > 1, findings=len(finished.findings))
            if stream is not None:
                stream.judged(result, new)
            if on_result:
                on_result(result)


def _alone_last(plan: SweepPlan, pool: WorkerPool) -> SweepPlan:
    """The jobs that need the whole pool's memory (VGG-19, whole or in parts) after the others.
    Every other worker idles beside such a job wherever it comes, so the run takes as long; first
    in line, VGG-19 kept the default sweep at 0 models done for minutes, and a cancel kept none."""
    if plan.streamed:
        return plan
    jobs = list(plan.jobs)
    alone = [pool.runs_alone(job) for job in jobs]
    ordered = [job for job, last in zip(jobs, alone, strict=True) if not last]
    return replace(plan, jobs=ordered + [job for job, last in zip(jobs, alone, strict=True) if last])


def _judge_on_base(
    finished: _Finished,
    plan: SweepPlan,
    config: WorkerConfig,
    base: Installation,
    workers: int,
    deadline: float,
    log: Log,
) -> None:
    """Findings the base build shows too are older than the change under test (`check_on_base`);
    the base's identity is recorded beside it, with a warning when it looks like the head's."""
    with log.group("base optimizer"):
        checked = check_on_base(
            finished.findings, finished.results, plan.steps, config, base, workers, deadline, log
        )
        build = identify(base.info, base.optimizer, base.path)
        warning = look_alike(identify(plan.info, config.optimizer), build)
        if warning:
            log.warning(warning)
    stats = {**checked.stats, "build": build.to_json(), **({"look_alike": warning} if warning else {})}
    finished.findings, finished.base_stats = list(checked.findings), stats


def _exercise(
    options: SweepOptions,
    plan: SweepPlan,
    base: Installation,
    pool: WorkerPool,
    finished: _Finished,
    log: Log,
) -> SweepPlan:
    """The passes the head adds or changes get models made for them (`triage.exercise`), in shard 0
    only: every shard would make the same ones. Their models join the sweep's, with their configs."""
    if options.exercise_budget <= 0 or parse_shard(options.shard)[0] != 0:
        return plan
    changed = changed_passes(Path.cwd(), options.changed_since, plan.info.passes, log)
    targets = passes_to_exercise(plan.info, base.info, changed)
    if not targets:
        return plan
    with log.group("exercise new and changed passes"):
        out = Path(options.out) / EXERCISED_DIR
        done = exercise(targets, plan.steps, pool, out, options.seed, options.exercise_budget, log)
    finished.results.extend(done.results)
    finished.findings.extend(done.findings)
    finished.exercise_stats = done.stats
    return replace(plan, labels_run={**plan.labels_run, **done.labels_run()})


def _reproduce(
    finished: _Finished, plan: SweepPlan, pool: WorkerPool, options: PinpointOptions, log: Log
) -> None:
    """What would gate as new is run again first: a failure no re-run shows is flaky (`reproduce`)."""
    with log.group("reproduce"):
        done = reproduce(
            finished.findings,
            finished.results,
            plan.steps,
            pool,
            options.by_design,
            time.monotonic() + options.budget_left(),
            log,
        )
    finished.findings, finished.reproduce_stats = list(done.findings), done.stats


def _pinpoint_options(
    options: SweepOptions, info: OptimizerInfo, stream: ModelStream | None
) -> PinpointOptions:
    baseline = load_baseline(Path(options.baseline) if options.baseline else None, info.name)
    return PinpointOptions(
        Path(options.out),
        options.reduce_budget,
        # node-level divergence and repro.py take one tolerance: float32's unless given
        DEFAULT_RTOL if options.rtol is None else options.rtol,
        DEFAULT_ATOL if options.atol is None else options.atol,
        # localized but not reduced: a limitation by design, or older than this build
        by_design=lambda finding: (
            finding.evidence.get("known_by") == KNOWN_BY
            or baseline.match(finding, datetime.date.today()) is not None
        ),
        opaque=info.opaque,
        passes_ordered=info.order_matters,
        deadline=stream.pinpoint_deadline if stream is not None else None,
    )


def _pinpoint_findings(
    finished: _Finished, plan: SweepPlan, pool: WorkerPool, options: PinpointOptions, log: Log
) -> None:
    # in the report's order, not the order workers finished in: the first finding of a bug is the
    # one reduced and given the standalone script, the same one on every run
    in_order = sorted(finished.findings, key=lambda f: (f.model, f.config))
    with log.group("pinpoint"):
        pinpointed = pinpoint(in_order, finished.results, plan.steps, pool, options, log)
    finished.findings, finished.pinpoint_stats = list(pinpointed.findings), pinpointed.to_json()
    failed = pinpointed.internal_errors
    finished.results = [
        replace(result, status=INTERNAL_ERROR, reason=failed[result.ref.id])
        if result.ref.id in failed and result.status != INTERNAL_ERROR
        else result
        for result in finished.results
    ]


@dataclass(frozen=True)
class SweepStats:
    """What one sweep (one shard) did and cost: report.json's `stats` as the sweep writes them.

    Later stages add keys of their own (`baseline`, `max_skipped`, `fuzz`); merge adds the
    shards' counters up key by key, so it reads the JSON, keys it does not know included."""

    wall_s: float
    optimizer_runs: int
    runtime_runs: int
    cache_hits: int
    worker_restarts: int
    models_total: int
    models_skipped: int
    # models each runner judged, in the order the runners first appear among the sorted models
    runners: Mapping[str, int]
    configs: tuple[str, ...]
    jobs: int
    # its counts per pass and model family (the report's `coverage` holds those per pass)
    coverage: Coverage
    # the signal that stopped the sweep before its work was done
    interrupted_by: str | None = None
    # what an interrupted sweep had planned (a stream plans nothing)
    models_planned: int | None = None
    pinpoint: Mapping[str, int] | None = None
    base_optimizer: Mapping[str, Any] | None = None
    reproduce: Mapping[str, Any] | None = None
    exercised: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        stats: dict[str, Any] = {
            "wall_s": self.wall_s,
            "optimizer_runs": self.optimizer_runs,
            "runtime_runs": self.runtime_runs,
            "cache_hits": self.cache_hits,
            "worker_restarts": self.worker_restarts,
            "models_total": self.models_total,
            "models_skipped": self.models_skipped,
            "runners": dict(self.runners),
            "configs": list(self.configs),
            "jobs": self.jobs,
            **self.coverage.family_stats(),
        }
        if self.interrupted_by is not None:
            stats.update(interrupted=True, interrupted_by=self.interrupted_by)
            if self.models_planned is not None:
                stats["models_planned"] = self.models_planned
        if self.pinpoint is not None:
            stats["pinpoint"] = dict(self.pinpoint)
        if self.base_optimizer is not None:
            stats["base_optimizer"] = dict(self.base_optimizer)
        if self.reproduce is not None:
            stats["reproduce"] = dict(self.reproduce)
        if self.exercised is not None:
            stats[EXERCISED_KEY] = dict(self.exercised)
        return stats


def _model_entry(result: JobResult, plan: SweepPlan) -> ModelEntry:
    return ModelEntry(
        id=result.ref.id,
        source=result.ref.source,
        sha256=_file_sha256(result.ref),
        status=result.status,
        reason=result.reason,
        nodes=result.nodes,
        cost_s=round(result.wall_s, 4),
        configs=plan.configs_of(result.ref.id),
        runner=str(result.info.get("runner", "")),
    )


def _report(
    options: SweepOptions,
    plan: SweepPlan,
    finished: _Finished,
    workers: int,
    started: float,
    interrupted: Interrupted | None,
    log: Log,
) -> Report:
    """The report of what finished; an interrupted sweep's says so."""
    results = sorted(finished.results, key=lambda r: r.ref.id)
    coverage = coverage_of(results, plan.steps)
    models = tuple(_model_entry(result, plan) for result in results)
    stats = SweepStats(
        wall_s=round(time.monotonic() - started, 2),
        optimizer_runs=sum(r.optimizer_runs for r in results),
        runtime_runs=sum(r.runtime_runs for r in results),
        cache_hits=sum(r.cache_hits for r in results),
        worker_restarts=sum(r.restarts for r in results),
        models_total=len(results),
        models_skipped=sum(1 for r in results if r.status != "ok"),
        runners=Counter(entry.runner for entry in models if entry.status == "ok" and entry.runner),
        configs=tuple(step.label for step in plan.steps),
        jobs=workers,
        coverage=coverage,
        interrupted_by=interrupted.signal_name if interrupted is not None else None,
        models_planned=plan.models_planned if interrupted is not None else None,
        pinpoint=finished.pinpoint_stats,
        base_optimizer=finished.base_stats,
        reproduce=finished.reproduce_stats,
        exercised=finished.exercise_stats,
    )
    if interrupted is not None:
        out_of = "" if plan.models_planned is None else f" of {plan.models_planned}"
        log.warning(
            f"interrupted by {interrupted.signal_name}: {len(results)}{out_of} models finished; "
            "the report holds only those"
        )
    index, count = parse_shard(options.shard)
    return Report(
        tool={"name": "ditox-ci", "version": __version__},
        optimizer={**plan.info.to_json(), "build": identify(plan.info, options.optimizer).to_json()},
        environment=environment_info(),
        shard={"index": index, "count": count},
        models=models,
        findings=tuple(sorted(finished.findings, key=lambda f: (f.model, f.config))),
        coverage=coverage.per_pass,
        stats=stats.to_json(),
    )


def run_sweep(
    options: SweepOptions,
    log: Log,
    on_result: Callable[[JobResult], None] | None = None,
    stream: ModelStream | None = None,
    settled: Callable[[], None] = lambda: None,
) -> Report:
    """The sweep's Report: plan, run every job in the worker pool, judge the findings on the base
    build, pinpoint them, assemble the report.

    `settled` is called once every model and finding is done, before the workers are stopped: an
    Interrupted raised after it would lose the report being assembled, so the caller's signal
    handler stops raising there (`SignalStop.disarm`)."""
    started = time.monotonic()
    warm_up()
    with contextlib.ExitStack() as builds:
        with log.group("plan"):
            build = builds.enter_context(optimizer_build(options.optimizer, Path(options.cache_dir), log))
            if options.baseline:  # an entry that could never match is said before the sweep, not after
                baseline = load_baseline(Path(options.baseline), build.info.name)
                check_entry_passes(baseline, f"{build.info.name} {build.info.version}", build.info.passes)
            if stream is None:
                plan = _plan_corpus(options, build, log)
            else:
                plan = _plan_stream(options, build, stream, log)
            if plan.info.opaque:
                log.notice(f"{plan.info.name}: {OPAQUE_NOTE}")
        return _sweep_planned(options, build, plan, log, on_result, stream, settled, started)


def _sweep_planned(
    options: SweepOptions,
    build: Installation,
    plan: SweepPlan,
    log: Log,
    on_result: Callable[[JobResult], None] | None,
    stream: ModelStream | None,
    settled: Callable[[], None],
    started: float,
) -> Report:
    config = _worker_config(options, build)
    workers = _worker_count(options, log)
    finished = _Finished()
    interrupted: Interrupted | None = None
    # On SIGTERM/SIGINT the stack closes the pool (killing the workers) and the report keeps what
    # finished: whole models only, with their findings as far as they were pinpointed.
    try:
        with contextlib.ExitStack() as stack:
            base = None
            if options.base_optimizer:
                with log.group("base optimizer"):
                    cache = Path(options.cache_dir)
                    installing = optimizer_build(
                        options.base_optimizer, cache, log, "--base-optimizer", build.optimizer
                    )
                    base = stack.enter_context(installing)
            pool = stack.enter_context(WorkerPool(config, workers))
            _sweep_models(pool, _alone_last(plan, pool), finished, log, stream, on_result)
            if base is not None and stream is None:
                plan = _exercise(options, plan, base, pool, finished, log)
            pinpointing = _pinpoint_options(options, plan.info, stream)
            # re-runs (on the base, then here) take at most the reduction budget beyond their first try
            if base is not None:
                deadline = time.monotonic() + pinpointing.budget_left()
                _judge_on_base(finished, plan, config, base, workers, deadline, log)
            # re-running, localization and reduction go through the same workers, so the pool stays open
            if pinpointing.budget_left() > 0 and finished.findings:
                _reproduce(finished, plan, pool, pinpointing, log)
            if options.localize != "off" and finished.findings:
                _pinpoint_findings(finished, plan, pool, pinpointing, log)
            settled()
    except Interrupted as stop:
        interrupted = stop
    return _report(options, plan, finished, workers, started, interrupted, log)
