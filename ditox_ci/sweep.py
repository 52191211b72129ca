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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx
import onnxruntime

from ditox_ci import __version__
from ditox_ci.ci.shard import combine_results, estimate_cost, parse_shard, plan_jobs, previous_costs
from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.tensor import DEFAULT_ATOL, DEFAULT_RTOL
from ditox_ci.corpus import SOURCES, CorpusContext, ModelRef, default_cache_dir, resolve_sources
from ditox_ci.corpus.loading import model_sha256
from ditox_ci.engine.evaluate import EvalSettings
from ditox_ci.engine.outcome import Outcome, failure_fingerprint
from ditox_ci.engine.plan import DEFAULT_CONFIGS, Step, build_steps
from ditox_ci.engine.runner import RUNNER_CHOICES
from ditox_ci.engine.worker import DEFAULT_MEMORY_LIMIT_MB, Job, JobResult, WorkerConfig, WorkerPool
from ditox_ci.errors import InputError, Interrupted, UsageError
from ditox_ci.log import Log
from ditox_ci.optimizers import OPAQUE_NOTE, OptimizerInfo, load_optimizer
from ditox_ci.optimizers.install import base_installation
from ditox_ci.pinpoint.pinpointer import LOCALIZE_MODES, PinpointOptions, pinpoint
from ditox_ci.progress import Progress
from ditox_ci.report import Culprit, Finding, ModelEntry, Report, read_report
from ditox_ci.report.outputs import prepare_out_dir
from ditox_ci.triage.base_optimizer import KNOWN_BY, check_on_base
from ditox_ci.triage.baseline import load_baseline


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
    # gate (exit 1) when a larger share of the corpus than this was skipped; None: no such gate
    max_skipped: float | None = None
    cache_dir: str = field(default_factory=lambda: str(default_cache_dir(os.environ)))

    def __post_init__(self) -> None:
        for name in ("jobs", "samples", "dynamic_dim", "memory_limit"):
            if getattr(self, name) < (0 if name == "jobs" else 1):
                raise UsageError(
                    f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}"
                )
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
            raise UsageError(
                f"--localize must be one of {', '.join(LOCALIZE_MODES)}, got '{self.localize}'"
            )
        if self.runner not in RUNNER_CHOICES:
            raise UsageError(f"--runner must be one of {', '.join(RUNNER_CHOICES)}, got '{self.runner}'")
        if self.reduce_budget < 0:
            raise UsageError(f"--reduce-budget must be >= 0 seconds, got {self.reduce_budget}")
        if self.comparator is not None and self.comparator not in COMPARATORS:
            raise UsageError(
                f"unknown comparator '{self.comparator}'; known: {', '.join(sorted(COMPARATORS))}"
            )


def _file_sha256(ref: ModelRef) -> str:
    """The model file's hash: the one its source just verified (packaged, hub), else read from the
    file; "" for a model that has no file here (an unavailable package)."""
    if ref.meta.get("sha256") and not ref.meta.get("unavailable"):
        return str(ref.meta["sha256"])
    try:
        return model_sha256(ref.path)
    except OSError:
        return ""


def culprit_for(step: Step) -> Culprit:
    """What the sweep alone can say; multi-pass configs are narrowed by localization later."""
    if step.label == "nop":
        return Culprit("infrastructure", (), "nop-control", 0)
    if step.single_pass:
        return Culprit("pass", step.passes, "single-pass", 0)
    return Culprit("unknown", (), "not-localized: multi-pass config", 0)


def finding_fingerprint(outcome: Outcome, culprit: Culprit, config: str) -> str:
    """Semantic: kind, culprit passes (the config when not localized), message, ops rewritten."""
    blame = culprit.passes or ((config,) if culprit.scope == "unknown" else ())
    return failure_fingerprint(outcome, blame)


def findings_for(result: JobResult, steps: Sequence[Step]) -> list[Finding]:
    """One finding per failing step, except that what the nop control already shows is reported once,
    as infrastructure, with the configs that showed it too."""
    nop = result.outcomes.get("nop")
    shared_with_nop: list[str] = []
    findings: list[Finding] = []
    for step in steps:
        outcome = result.outcomes.get(step.label)
        if outcome is None or outcome.kind is None:
            continue
        if step.label != "nop" and nop is not None and outcome.same_failure(nop):
            shared_with_nop.append(step.label)
            continue
        culprit = culprit_for(step)
        findings.append(
            Finding(
                fingerprint=finding_fingerprint(outcome, culprit, step.label),
                kind=outcome.kind,
                model=result.ref.id,
                config=step.label,
                culprit=culprit,
                evidence=dict(outcome.evidence),
            )
        )
    if shared_with_nop:
        findings = [
            replace(f, evidence={**f.evidence, "also_in": shared_with_nop})
            if f.config == "nop"
            else f
            for f in findings
        ]
    return findings


def coverage_of(
    results: Iterable[JobResult], steps: Sequence[Step]
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Per pass: models it changed beyond what the nop control changes, and models checked."""
    coverage = {
        s.single_pass: {"models_changed": 0, "models_checked": 0} for s in steps if s.single_pass
    }
    by_family: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for result in results:
        if result.status != "ok":
            continue
        nop = result.outcomes.get("nop")
        unchanged = {result.sha256, nop.digest if nop else ""}
        for step in steps:
            name = step.single_pass
            outcome = result.outcomes.get(step.label)
            if name is None or outcome is None:
                continue
            coverage[name]["models_checked"] += 1
            changed = outcome.changed and outcome.digest not in unchanged
            coverage[name]["models_changed"] += int(changed)
            by_family[name][result.ref.family or "other"] += int(changed)
    return coverage, {name: dict(families) for name, families in by_family.items()}


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
            raise InputError(
                f"model source {spec!r} has nothing to sweep here: {own[0].meta['unavailable']}"
            )


def _outside_out(refs: list[ModelRef], options: SweepOptions, log: Log | None) -> list[ModelRef]:
    """The models not below --out: a corpus folder that holds the output folder would otherwise
    sweep the previous run's repro bundles as models of its own."""
    out = Path(options.out).resolve()
    kept = [ref for ref in refs if not (ref.path and Path(ref.path).resolve().is_relative_to(out))]
    if len(kept) < len(refs) and log is not None:
        log.notice(f"{len(refs) - len(kept)} model(s) below --out {options.out} are its output, not swept")
    return kept


def plan_sweep(
    options: SweepOptions, log: Log | None = None
) -> tuple[OptimizerInfo, tuple[Step, ...], list[Job]]:
    """Resolve optimizer, steps and this shard's Jobs; every error here is the user's to fix."""
    prepare_out_dir(Path(options.out))
    info = load_optimizer(options.optimizer).info
    steps = build_steps(options.configs, options.passes, info)
    index, count = parse_shard(options.shard)
    corpus = resolve_sources(options.models, CorpusContext(Path(options.cache_dir), options.seed), log)
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
    return info, steps, plan[index]


def configs_run(labels: set[str], steps: Sequence[Step]) -> tuple[str, ...]:
    """The configs a model ran here, in step order, when that is only a part of them; else ()."""
    if all(step.label in labels for step in steps):
        return ()
    return tuple(step.label for step in steps if step.label in labels)


class _Caught:
    exception: Any = None


@contextlib.contextmanager
def _catch(kind: type[BaseException]) -> Iterator[_Caught]:
    """Swallow `kind` raised in the block and keep it on the yielded object."""
    caught = _Caught()
    try:
        yield caught
    except kind as exc:
        caught.exception = exc


@dataclass(frozen=True)
class ModelStream:
    """Models made while the sweep runs (`ditox-ci fuzz`) instead of a corpus planned up front.

    `refs` is drawn from only when a worker is free, so making and judging models share one time
    budget and `refs` decides when to stop; `judged` sees each model's findings as they are known
    (to delete the ones not worth keeping); pinpointing stops reducing at `pinpoint_deadline`."""

    refs: Iterable[ModelRef]
    judged: Callable[[JobResult, Sequence[Finding]], None] = lambda result, findings: None
    pinpoint_deadline: float | None = None


def _machine_memory_mb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def run_sweep(
    options: SweepOptions,
    log: Log,
    on_result: Callable[[JobResult], None] | None = None,
    stream: ModelStream | None = None,
    settled: Callable[[], None] = lambda: None,
) -> Report:
    """The sweep's Report. `settled` is called once every model and finding is done, before the
    workers are stopped: an Interrupted raised after it would lose the report being assembled, so
    the caller's signal handler stops raising there (`SignalStop.disarm`)."""
    started = time.monotonic()
    labels_run: dict[str, set[str]] = defaultdict(set)
    with log.group("plan"):
        planned: Iterable[Job]
        if stream is None:
            info, steps, jobs_planned = plan_sweep(options, log)
            planned = jobs_planned
            parts = Counter(job.ref.id for job in jobs_planned)
            for job in jobs_planned:
                labels_run[job.ref.id].update(step.label for step in job.steps)
            split = [model for model in parts if parts[model] > 1 or configs_run(labels_run[model], steps)]
            what = f"{len(parts)} models × {len(steps)} configs ({info.name} {info.version})"
            what += f", shard {options.shard}"
            if split:
                what += f"; {len(split)} costly models split by config ({len(jobs_planned)} jobs)"
            log.info(what)
        else:
            info = load_optimizer(options.optimizer).info
            steps = build_steps(options.configs, options.passes, info)
            # one job per model, made on demand: `parts` stays empty, each result is a whole model
            planned = (Job(ref, steps) for ref in stream.refs)
            parts = Counter()
            log.info(f"models made as workers free up × {len(steps)} configs ({info.name} {info.version})")
        if info.opaque:
            log.notice(f"{info.name}: {OPAQUE_NOTE}")
    comparators = ("tensor",) + ((options.comparator,) if options.comparator else ())
    config = WorkerConfig(
        optimizer=options.optimizer,
        settings=EvalSettings(
            samples=options.samples,
            seed=options.seed,
            dynamic_dim=options.dynamic_dim,
            rtol=options.rtol,
            atol=options.atol,
            calibrate=options.calibrate,
            runner=options.runner,
        ),
        comparators=comparators,
        timeout_s=options.timeout,
        memory_limit_mb=options.memory_limit,
    )
    jobs = options.jobs or os.cpu_count() or 1
    memory_mb = _machine_memory_mb()
    if memory_mb and jobs * options.memory_limit > memory_mb:
        log.warning(
            f"{jobs} workers × --memory-limit {options.memory_limit} MiB exceed this machine's "
            f"{memory_mb:.0f} MiB: the kernel may kill a worker first (reported as out of memory); "
            "lower --jobs or --memory-limit"
        )
    results: list[JobResult] = []
    findings: list[Finding] = []
    pinpoint_stats: dict[str, int] | None = None
    base_stats: dict[str, Any] | None = None
    interrupted: Interrupted | None = None
    # On SIGTERM/SIGINT the stack closes the pool (killing the workers) and the report keeps what
    # finished: whole models only, with their findings as far as they were pinpointed.
    with _catch(Interrupted) as caught, contextlib.ExitStack() as stack:
        base = None
        if options.base_optimizer:
            with log.group("base optimizer"):
                base = stack.enter_context(
                    base_installation(options.base_optimizer, options.optimizer, Path(options.cache_dir), log)
                )
        pool = stack.enter_context(WorkerPool(config, jobs))
        with log.group("sweep"), Progress(log, len(parts), "models") as progress:
            finished_parts: dict[str, list[JobResult]] = defaultdict(list)
            for part in pool.run(planned):
                finished_parts[part.ref.id].append(part)
                if len(finished_parts[part.ref.id]) < parts[part.ref.id]:
                    continue
                # findings, coverage and the report see one result per model, however it was split
                result = combine_results(finished_parts.pop(part.ref.id), steps)
                new = findings_for(result, steps)
                results.append(result)
                findings.extend(new)
                progress.advance(findings=len(findings))
                if stream is not None:
                    stream.judged(result, new)
                if on_result:
                    on_result(result)
        if base is not None:
            with log.group("base optimizer"):
                checked = check_on_base(findings, results, steps, config, base, jobs, log)
            findings, base_stats = list(checked.findings), checked.stats
        # localization and reduction probe through the same workers, so the pool stays open
        if options.localize != "off" and findings:
            baseline = load_baseline(Path(options.baseline) if options.baseline else None, info.name)
            pinpoint_options = PinpointOptions(
                Path(options.out),
                options.reduce_budget,
                # node-level divergence and repro.py take one tolerance: float32's unless given
                DEFAULT_RTOL if options.rtol is None else options.rtol,
                DEFAULT_ATOL if options.atol is None else options.atol,
                # localized but not reduced: a limitation by design, or older than this build
                by_design=lambda finding: finding.evidence.get("known_by") == KNOWN_BY
                or baseline.match(finding, datetime.date.today()) is not None,
                opaque=info.opaque,
                passes_ordered=info.order_matters,
                deadline=stream.pinpoint_deadline if stream is not None else None,
            )
            with log.group("pinpoint"):
                pinpointed = pinpoint(findings, results, steps, pool, pinpoint_options, log)
            findings, pinpoint_stats = list(pinpointed.findings), pinpointed.to_json()
        settled()
    interrupted = caught.exception
    results.sort(key=lambda r: r.ref.id)
    coverage, by_family = coverage_of(results, steps)
    models = tuple(
        ModelEntry(
            id=r.ref.id,
            source=r.ref.source,
            sha256=_file_sha256(r.ref),
            status=r.status,
            reason=r.reason,
            nodes=r.nodes,
            cost_s=round(r.wall_s, 4),
            configs=configs_run(labels_run[r.ref.id], steps),
            runner=str(r.info.get("runner", "")),
        )
        for r in results
    )
    stats: dict[str, Any] = {
        "wall_s": round(time.monotonic() - started, 2),
        "optimizer_runs": sum(r.optimizer_runs for r in results),
        "runtime_runs": sum(r.runtime_runs for r in results),
        "cache_hits": sum(r.cache_hits for r in results),
        "worker_restarts": sum(r.restarts for r in results),
        "models_total": len(results),
        "models_skipped": sum(1 for r in results if r.status != "ok"),
        "runners": dict(Counter(entry.runner for entry in models if entry.status == "ok" and entry.runner)),
        "configs": [s.label for s in steps],
        "jobs": jobs,
        "coverage_by_family": by_family,
    }
    if interrupted is not None:
        out_of = f" of {len(parts)}" if stream is None else ""  # a stream plans nothing up front
        log.warning(
            f"interrupted by {interrupted.signal_name}: {len(results)}{out_of} models finished; "
            "the report holds only those"
        )
        stats.update(interrupted=True, interrupted_by=interrupted.signal_name)
        if stream is None:
            stats["models_planned"] = len(parts)
    if pinpoint_stats is not None:
        stats["pinpoint"] = pinpoint_stats
    if base_stats is not None:
        stats["base_optimizer"] = base_stats
    index, count = parse_shard(options.shard)
    return Report(
        tool={"name": "ditox-ci", "version": __version__},
        optimizer=info.to_json(),
        environment=environment_info(),
        shard={"index": index, "count": count},
        models=models,
        findings=tuple(sorted(findings, key=lambda f: (f.model, f.config))),
        coverage=coverage,
        stats=stats,
    )
