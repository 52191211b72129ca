"""The sweep: every model of the corpus (this shard's share) through every step, into one Report.

set up (`setup.sweep_setup`) → plan (`plan`) → worker pool (optimize, run, compare) →
findings (nop control collapses infrastructure failures into one finding) → base build, re-runs,
pinpointing → coverage and stats → report.
"""

from __future__ import annotations

import datetime
import platform
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import onnx
import onnxruntime

from ditox_ci import __version__
from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.loading import model_sha256
from ditox_ci.corpus.sources import recorded_sha256
from ditox_ci.engine.findings import coverage_of, effect_of, family_effects, findings_for, verdicts_of
from ditox_ci.engine.pool import Job, JobCounts, JobResult, WorkerPool, worker_count
from ditox_ci.engine.reuse import Reuse
from ditox_ci.engine.shard import combine_results
from ditox_ci.errors import Interrupted
from ditox_ci.log import Log
from ditox_ci.pinpoint.pinpointer import PinpointOptions
from ditox_ci.pinpoint.repro import build_under_test
from ditox_ci.report import ModelEntry, Report
from ditox_ci.report.effect import effect_totals
from ditox_ci.report.header import OPAQUE_NOTE, Environment, ShardOf, Tool
from ditox_ci.report.kinds import ModelStatus
from ditox_ci.report.stats import SweepStats, stage_records
from ditox_ci.sweep.plan import Carrying, ModelStream, SweepPlan, alone_last, plan_corpus, plan_stream
from ditox_ci.sweep.progress import Progress
from ditox_ci.sweep.setup import SweepOptions, SweepSetup, sweep_setup
from ditox_ci.sweep.stages import Finished, SweepState, run_stages
from ditox_ci.triage.base_optimizer import BY_BASE
from ditox_ci.triage.builds import BuildIdentity, identify

# where the models made for the passes a PR adds or changes go, below --out


def _file_sha256(ref: ModelRef) -> str:
    """The model file's hash: the one its source just verified (packaged, hub) or recorded when it
    made the file (`recorded_sha256`: the wheel's test cases, the light networks), else read from
    the file; "" for a model that has no file here (an unavailable package)."""
    if ref.meta.get("sha256") and not ref.meta.get("unavailable"):
        return str(ref.meta["sha256"])
    try:
        return recorded_sha256(Path(ref.path)) or model_sha256(ref.path)
    except OSError:
        return ""


def environment_info() -> Environment:
    return Environment(
        onnx=onnx.__version__,
        onnxruntime=onnxruntime.__version__,
        python=platform.python_version(),
        platform=f"{sys.platform}-{platform.machine()}",
    )


def _with_reuse(jobs: Iterable[Job], table: Mapping[str, Reuse], carrying: Carrying) -> Iterator[Job]:
    """Each job with what its model may reuse from a stored report (engine/reuse.py), carrying only
    the configs `carrying` names."""
    for job in jobs:
        found = table.get(job.ref.id)
        yield job if found is None else replace(job, reuse=found.carrying(*carrying))


def _sweep_models(
    pool: WorkerPool,
    plan: SweepPlan,
    finished: Finished,
    log: Log,
    stream: ModelStream | None,
    on_result: Callable[[JobResult], None] | None,
    reuse: Mapping[str, Reuse],
    carrying: Carrying,
) -> None:
    """Every job through the pool, each with what it may reuse and carry; each model's findings once
    all of its parts are back."""
    parts_total = sum(count for count in plan.parts.values() if count > 1)
    with log.group("sweep"), Progress(log, len(plan.parts), "models", parts_total) as progress:
        finished_parts: dict[str, list[JobResult]] = defaultdict(list)
        for part in pool.run(_with_reuse(plan.jobs, reuse, carrying)):
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


def _pinpoint_options(setup: SweepSetup, stream: ModelStream | None) -> PinpointOptions:
    options, info = setup.options, setup.info
    return PinpointOptions(
        Path(options.out),
        options.reduce_budget,
        # localized but not reduced: a limitation by design, or older than this build
        by_design=lambda finding: (
            finding.triage.known_by == BY_BASE
            or setup.baseline.match(finding, datetime.date.today()) is not None
        ),
        opaque=info.opaque,
        passes_ordered=info.order_matters,
        deadline=stream.pinpoint_deadline if stream is not None else None,
        build=build_under_test(setup.build),
    )


def _model_entry(result: JobResult, plan: SweepPlan) -> ModelEntry:
    outcomes = result.outcomes.values()
    judged = result.status == ModelStatus.OK and result.judged_as
    return ModelEntry(
        id=result.ref.id,
        source=result.ref.source,
        sha256=_file_sha256(result.ref),
        status=result.status,
        reason=result.reason,
        nodes=result.nodes,
        cost_s=round(result.wall_s, 4),
        configs=plan.configs_of(result.ref.id),
        runner=result.info.runner or "",
        verdicts=verdicts_of(result) if judged else None,
        reused=sum(1 for outcome in outcomes if outcome.reused),
        effect=effect_of(result),
    )


def _report(
    options: SweepOptions,
    plan: SweepPlan,
    build: BuildIdentity,
    finished: Finished,
    workers: int,
    started: float,
    interrupted: Interrupted | None,
    key: str,
    log: Log,
) -> Report:
    """The report of what finished, its verdicts filed under `key` (reuse.verdict_key); an
    interrupted sweep's says so."""
    results = sorted(finished.results, key=lambda r: r.ref.id)
    coverage = coverage_of(results, plan.steps)
    models = tuple(_model_entry(result, plan) for result in results)
    counts = sum((r.counts for r in results), JobCounts())
    stats = SweepStats(
        wall_s=round(time.monotonic() - started, 2),
        optimizer_runs=counts.optimizer_runs,
        runtime_runs=counts.runtime_runs,
        cache_hits=counts.cache_hits,
        screened_steps=counts.screened,
        carried_steps=counts.carried,
        reused_verdicts=sum(entry.reused for entry in models),
        optimizer_s=round(counts.optimizer_s, 2),
        verdict_key=key,
        worker_restarts=counts.restarts,
        models_total=len(results),
        models_skipped=sum(1 for r in results if r.status != ModelStatus.OK),
        runners=Counter(entry.runner for entry in models if entry.status == ModelStatus.OK and entry.runner),
        configs=tuple(step.label for step in plan.steps),
        jobs=workers,
        coverage_by_family=coverage.changed_by_family,
        coverage_checked_by_family=coverage.checked_by_family,
        effect=effect_totals(entry.effect for entry in models if entry.effect is not None),
        effect_by_family=family_effects(results),
        interrupted_by=interrupted.signal_name if interrupted is not None else None,
        models_planned=plan.models_planned if interrupted is not None else None,
        stages=stage_records(**{key: record.to_json() for key, record in finished.records.items()}),
    )
    if interrupted is not None:
        out_of = "" if plan.models_planned is None else f" of {plan.models_planned}"
        log.warning(
            f"interrupted by {interrupted.signal_name}: {len(results)}{out_of} models finished; "
            "the report holds only those"
        )
    return Report(
        tool=Tool(__version__),
        optimizer=replace(plan.info, build=build.to_json()),
        environment=environment_info(),
        shard=ShardOf(options.shard.index, options.shard.count),
        models=models,
        findings=tuple(sorted(finished.findings, key=lambda f: (f.model, f.config))),
        coverage=coverage.per_pass,
        stats=stats,
    )


def run_sweep(
    setup: SweepSetup,
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
    with log.group("plan"):
        plan = plan_corpus(setup, log) if stream is None else plan_stream(setup, stream, log)
        if plan.info.opaque:
            log.notice(f"{plan.info.name}: {OPAQUE_NOTE}")
    return _sweep_planned(setup, plan, log, on_result, stream, settled)


def sweep(options: SweepOptions, log: Log) -> Report:
    """A whole sweep from its options, in one call (the benchmarks'): set up once, then run."""
    with sweep_setup(options, log) as setup:
        return run_sweep(setup, log)


def _sweep_planned(
    setup: SweepSetup,
    plan: SweepPlan,
    log: Log,
    on_result: Callable[[JobResult], None] | None,
    stream: ModelStream | None,
    settled: Callable[[], None],
) -> Report:
    options, config = setup.options, setup.worker_config
    workers = worker_count(options.jobs, options.worker_memory_mb, log.warning)
    finished = Finished()
    interrupted: Interrupted | None = None
    # the build under test as its workers load it: an installed copy from its own folder, never
    # the copy this process would import
    build = setup.build
    head = identify(build.info, build.optimizer, build.path)
    # On SIGTERM/SIGINT leaving the block closes the pool (killing the workers) and the report keeps what
    # finished: whole models only, with their findings as far as they were pinpointed.
    state: SweepState | None = None
    try:
        with WorkerPool(config, workers) as pool:
            carrying = plan.carrying
            if carrying.carried:
                impact = setup.impact
                assert impact is not None
                changed = ", ".join(impact.passes) or "none"
                log.info(
                    f"carrying {len(carrying.carried)} configs the PR leaves unchanged (changed since "
                    f"{impact.since}: {changed}) from the stored report (--no-carry: call every pass)"
                )
            jobs = alone_last(plan, pool)
            _sweep_models(pool, jobs, finished, log, stream, on_result, setup.reuse, carrying)
            # re-running, localization and reduction go through the same workers, so the pool stays open
            pinpointing = _pinpoint_options(setup, stream)
            state = SweepState(setup, plan, pool, workers, head, pinpointing, stream, finished, log)
            run_stages(state)
            settled()
    except Interrupted as stop:
        interrupted = stop
    # the plan as the stages left it (the exercised passes' models run their own configs), however
    # far they got
    plan = state.plan if state is not None else plan
    key = config.verdict_key
    report = _report(options, plan, head, finished, workers, setup.started, interrupted, key, log)
    what_changed = setup.impact.to_json() if setup.impact is not None else None
    return replace(report, stats=replace(report.stats, impact=what_changed))
