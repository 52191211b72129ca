"""The sweep's stages after the pool's first pass over the models, in one shape.

As onnx-ir's passes each return a `PassResult`, each stage here takes the sweep's state, says
whether it has work (`runs`) and returns a `StageResult`: the findings from then on, the record it
leaves in the report's stats under its key, and the results or the plan it changes. The sweep
loops over `STAGES` in their order; each reads its settings from the state, never from arguments:

- `Exercise` (a PR check, shard 0): models made for the passes the head adds or changes;
- `BaseCheck` (with `--base-optimizer`): what the base build shows too is older than the change;
- `Reproduce`: what would gate as new is run again; a failure no re-run shows is flaky;
- `Pinpoint`: localization and reduction, repro bundles;
- `MissedCheck` (with a reference report): what an earlier build rewrote and this one no longer does.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ditox_ci.engine.pool import JobResult, WorkerPool
from ditox_ci.log import Log
from ditox_ci.optimizers.install import Installation
from ditox_ci.pinpoint.pinpointer import PinpointOptions, pinpoint
from ditox_ci.report.model import INTERNAL_ERROR, Finding
from ditox_ci.report.stats import EXERCISED_KEY
from ditox_ci.sweep.plan import ModelStream, SweepPlan
from ditox_ci.sweep.setup import SweepSetup
from ditox_ci.triage.base_optimizer import check_on_base
from ditox_ci.triage.builds import BuildIdentity, identify, look_alike
from ditox_ci.triage.exercise import exercise, passes_to_exercise
from ditox_ci.triage.missed import missed_optimizations, pinned_on_base
from ditox_ci.triage.reproduce import reproduce

EXERCISED_DIR = "exercised"


@dataclass
class Finished:
    """What the sweep has finished so far, filled in by each stage: an interruption keeps it, and
    the report holds only it (whole models, their findings as far as they were judged, the records
    of the stages that ended)."""

    results: list[JobResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    records: dict[str, StageRecord] = field(default_factory=dict)


@dataclass
class SweepState:
    """What the stages read: the sweep resolved once, its plan, the open pool and what finished."""

    setup: SweepSetup
    plan: SweepPlan
    pool: WorkerPool
    workers: int
    head: BuildIdentity
    pinpointing: PinpointOptions
    stream: ModelStream | None
    finished: Finished
    log: Log

    @property
    def base(self) -> Installation | None:
        return self.setup.base


@dataclass(frozen=True)
class StageResult:
    """A stage's outcome: the findings from then on, its record for the stats (None: it did no
    work worth a record), and the results and plan from then on where it changed them."""

    findings: tuple[Finding, ...]
    record: StageRecord | None = None
    results: tuple[JobResult, ...] | None = None
    plan: SweepPlan | None = None


class StageRecord(Protocol):
    """What a stage did, for `stats.<its key>`: a record whose JSON the report keeps."""

    def to_json(self) -> Mapping[str, Any]: ...


class Stage(Protocol):
    key: str
    title: str

    def runs(self, state: SweepState) -> bool: ...

    def run(self, state: SweepState) -> StageResult: ...


class Exercise:
    """The passes the head adds or changes get models made for them (`triage.exercise`), in shard 0
    only: every shard would make the same ones. Their models join the sweep's, with their configs."""

    key, title = EXERCISED_KEY, "exercise new and changed passes"

    def runs(self, state: SweepState) -> bool:
        options = state.setup.options
        return (
            state.base is not None
            and state.stream is None
            and options.exercise_budget > 0
            and (options.shard.index == 0)
        )

    def run(self, state: SweepState) -> StageResult:
        assert state.base is not None
        options, plan, finished = state.setup.options, state.plan, state.finished
        impact = state.setup.impact
        targets = passes_to_exercise(plan.info, state.base.info, impact.passes if impact is not None else ())
        if not targets:
            return StageResult(tuple(finished.findings))
        out = Path(options.out) / EXERCISED_DIR
        done = exercise(
            targets,
            plan.steps,
            state.pool,
            out,
            options.seed,
            options.exercise_budget,
            state.log,
            among=plan.info.passes,
        )
        return StageResult(
            (*finished.findings, *done.findings),
            done.stats,
            results=(*finished.results, *done.results),
            plan=replace(plan, labels_run={**plan.labels_run, **done.labels_run()}),
        )


class BaseCheck:
    """Findings the base build shows too are older than the change under test (`check_on_base`);
    the base's identity is recorded beside it, with a warning when it looks like the head's. A
    finding the baseline knows is known whatever the base does: it is not run there. Its re-runs
    take at most the reduction budget beyond their first try."""

    key, title = "base_optimizer", "base optimizer"

    def runs(self, state: SweepState) -> bool:
        return state.base is not None

    def run(self, state: SweepState) -> StageResult:
        base, finished, setup = state.base, state.finished, state.setup
        assert base is not None
        deadline = time.monotonic() + state.pinpointing.budget_left()
        today = datetime.date.today()
        by_baseline: list[Finding] = []
        checking: list[Finding] = []
        for finding in finished.findings:
            (checking if setup.baseline.match(finding, today) is None else by_baseline).append(finding)
        checked = check_on_base(
            checking,
            finished.results,
            state.plan.steps,
            setup.worker_config,
            base,
            state.workers,
            deadline,
            state.log,
        )
        build = identify(base.info, base.optimizer, base.path)
        warning = look_alike(state.head, build)
        if warning:
            state.log.warning(warning)
        record = replace(checked.stats, known_by_baseline=len(by_baseline), build=build.to_json())
        record = replace(record, look_alike=warning or None)
        return StageResult((*checked.findings, *by_baseline), record)


class Reproduce:
    """What would gate as new is run again first: a failure no re-run shows is flaky (`reproduce`)."""

    key, title = "reproduce", "reproduce"

    def runs(self, state: SweepState) -> bool:
        return state.pinpointing.budget_left() > 0 and bool(state.finished.findings)

    def run(self, state: SweepState) -> StageResult:
        finished, pinpointing = state.finished, state.pinpointing
        done = reproduce(
            finished.findings,
            finished.results,
            state.plan.steps,
            state.pool,
            pinpointing.by_design,
            time.monotonic() + pinpointing.budget_left(),
            state.log,
            state.setup.options.gate_tiers,
        )
        return StageResult(tuple(done.findings), done.stats)


class Pinpoint:
    """Localization and reduction (`pinpoint`); a model whose pinpointing failed in ditox-ci's own
    code is marked so."""

    key, title = "pinpoint", "pinpoint"

    def runs(self, state: SweepState) -> bool:
        return state.setup.options.localize != "off" and bool(state.finished.findings)

    def run(self, state: SweepState) -> StageResult:
        finished = state.finished
        # in the report's order, not the order workers finished in: the first finding of a bug is
        # the one reduced and given the standalone script, the same one on every run
        in_order = sorted(finished.findings, key=lambda f: (f.model, f.config))
        pinpointed = pinpoint(
            in_order, finished.results, state.plan.steps, state.pool, state.pinpointing, state.log
        )
        failed = pinpointed.internal_errors
        results = tuple(
            replace(result, status=INTERNAL_ERROR, reason=failed[result.ref.id])
            if result.ref.id in failed and result.status != INTERNAL_ERROR
            else result
            for result in finished.results
        )
        return StageResult(tuple(pinpointed.findings), pinpointed, results=results)


class MissedCheck:
    """What the reference report's build did to the same models and this one does no more
    (`missed_optimizations`): findings of their own, after the failures' pinpointing; with a base
    build, run there too (those it does no better on go) and reduced (`pinned_on_base`)."""

    key, title = "missed", "missed optimizations"

    def runs(self, state: SweepState) -> bool:
        # another optimizer's report is no reference for this one's: the same name, or (a build
        # given by import path) the same default passes
        reference, info = state.setup.reference, state.plan.info
        return reference is not None and (
            reference.optimizer.name == info.name or reference.optimizer.default_passes == info.default_passes
        )

    def run(self, state: SweepState) -> StageResult:
        reference, finished = state.setup.reference, state.finished
        assert reference is not None
        missed = missed_optimizations(finished.results, state.plan.steps, reference)
        state.log.info(f"{len(missed.findings)} missed optimizations against {missed.reference}")
        found, record = list(missed.findings), missed.record()
        pinpointing = state.pinpointing
        if state.base is not None and found and state.setup.options.localize != "off":
            deadline = time.monotonic() + pinpointing.budget_left()
            found, on_base = pinned_on_base(
                missed,
                finished.results,
                state.plan.steps,
                state.pool,
                state.base,
                pinpointing.out_dir,
                pinpointing.build,
                deadline,
                state.log,
            )
            record = replace(record, findings=len(found), on_base=on_base)
        return StageResult((*finished.findings, *found), record)


STAGES: tuple[Stage, ...] = (Exercise(), BaseCheck(), Reproduce(), Pinpoint(), MissedCheck())


def run_stages(state: SweepState) -> None:
    """Each stage that has work, in order, its result kept in `state` as it ends (what finished, and
    the plan)."""
    for stage in STAGES:
        if not stage.runs(state):
            continue
        with state.log.group(stage.title):
            result = stage.run(state)
        finished = state.finished
        finished.findings = list(result.findings)
        if result.results is not None:
            finished.results = list(result.results)
        if result.record is not None:
            finished.records[stage.key] = result.record
        if result.plan is not None:
            state.plan = result.plan
