"""Pre-existing or introduced? Each finding's (model, config) run again on the base build.

A pull request is blamed only for what it introduces. After the sweep, every model with a finding
the baseline does not accept (the sweep leaves those out: they are known whatever the base does)
runs again, only the configs that failed (and the nop control), through a worker pool that loads
the `--base-optimizer` build instead of the one under test; a result byte-identical to the head's
takes the head's outcome without a run (`engine.reuse`). A finding whose config fails the same
way on the base (`Outcome.same_failure`) is `known`, known by the base optimizer (`Triage.known_by`);
the others keep what the base did instead in `Triage.on_base`, so the PR comment can say so.
A failure the base does not show is tried again (`reproduce.retry`): one it shows in any try is
known, since a failure that comes and goes (a heap-dependent read) is no less the base's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ditox_ci.control import NOP
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step, step_on_build
from ditox_ci.engine.pool import Job, JobResult, WorkerConfig, WorkerPool
from ditox_ci.engine.reuse import Reuse
from ditox_ci.log import Log
from ditox_ci.optimizers.install import Installation
from ditox_ci.report.evidence import KnownBy, KnownSource
from ditox_ci.report.header import OptimizerInfo
from ditox_ci.report.kinds import KNOWN, ModelStatus
from ditox_ci.report.model import Finding
from ditox_ci.triage.reproduce import retry, tries_of

BY_BASE = KnownBy(KnownSource.BASE_OPTIMIZER)


@dataclass(frozen=True)
class BaseRecord:
    """`stats.base_optimizer`: the base build checked (`spec`, `version`, and from the sweep its
    `build` and a `look_alike` warning), the findings checked on it and how many it shows too,
    its runs (`reused`: results byte-identical to the head's, which took its outcome), the
    findings the baseline knew and so were not run there, the time."""

    spec: str
    version: str
    models: int = 0
    findings_checked: int = 0
    reproduced: int = 0
    tries: int = 0
    reused: int = 0
    optimizer_runs: int = 0
    wall_s: float = 0.0
    known_by_baseline: int | None = None
    build: Mapping[str, Any] | None = None
    look_alike: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class BaseCheck:
    findings: tuple[Finding, ...]
    stats: BaseRecord


def base_job(result: JobResult, configs: Sequence[str], steps: Sequence[Step], info: OptimizerInfo) -> Job:
    """A model's job on the base build: the nop control, then each failing config the base can run,
    each on a freshly prepared model (a try must not be answered from the worker's cache). A result
    byte-identical to the head's takes the head's outcome (`engine.reuse`): the same bytes fail the
    same way on either build."""
    wanted = (step_on_build(s, info) for s in steps if s.label == NOP or s.label in configs)
    on_base = tuple(step for step in wanted if step is not None)
    labels = {step.label for step in on_base}
    head = {o.digest: o for label, o in result.outcomes.items() if label in labels and o.digest}
    draw = result.draw.to_json() if result.draw is not None else None
    reuse = Reuse(result.judged_as, head, result.info, draw)
    return Job(result.ref, on_base, fresh=True, reuse=reuse if result.judged_as else None)


def _on_base(outcome: Outcome | None, base: JobResult | None) -> str:
    """What the base build did with the config, in words for the report."""
    if base is None or base.status != ModelStatus.OK:
        return f"not checked: {base.reason if base else 'no result'}"
    if outcome is None:
        return "not run: the base build lacks a pass of this config"
    return "no failure" if outcome.kind is None else f"{outcome.kind}: {outcome.message}"[:300]


def judge_on_base(
    findings: Sequence[Finding],
    results: Sequence[JobResult],
    base_results: Sequence[JobResult],
    label: str,
) -> list[Finding]:
    """Mark the findings the base build showed in any try (`base_results` may hold several results
    of a model, one per try) as known; note on the others what it did in its last try."""
    ours = {result.ref.id: result for result in results}
    wanted = {
        (f.model, f.config): ours[f.model].outcomes[f.config]
        for f in findings
        if f.model in ours and f.config in ours[f.model].outcomes
    }
    tried = tries_of(wanted, base_results)
    last = {result.ref.id: result for result in base_results}
    judged = []
    for finding in findings:
        seen = tried.get((finding.model, finding.config))
        if seen is not None and seen.reproduced:
            triage = replace(finding.triage, known_by=BY_BASE, base_optimizer=label)
            judged.append(replace(finding, status=KNOWN, triage=triage))
            continue
        base = last.get(finding.model)
        outcome = base.outcomes.get(finding.config) if base and base.status == ModelStatus.OK else None
        tries = seen.tries if seen is not None and seen.tries > 1 else None
        triage = replace(finding.triage, on_base=_on_base(outcome, base), base_tries=tries)
        judged.append(replace(finding, triage=triage))
    return judged


def check_on_base(
    findings: Sequence[Finding],
    results: Sequence[JobResult],
    steps: Sequence[Step],
    config: WorkerConfig,
    installation: Installation,
    jobs: int,
    deadline: float,
    log: Log,
) -> BaseCheck:
    """Re-run each finding's model and config on the base build, up to `reproduce.TRIES` times
    for those it does not show (the later tries while `deadline` allows); see the module docstring."""
    started = time.monotonic()
    label = installation.label
    base_config = replace(config, optimizer=installation.optimizer, optimizer_path=installation.path)
    ours = {result.ref.id: result for result in results}
    wanted = {
        (f.model, f.config): ours[f.model].outcomes[f.config]
        for f in findings
        if f.model in ours and f.config in ours[f.model].outcomes
    }

    def job_for(model: str, configs: Sequence[str]) -> Job:
        return base_job(ours[model], configs, steps, installation.info)

    base_results: list[JobResult] = []
    if wanted:
        with WorkerPool(base_config, min(jobs, len({model for model, _ in wanted}))) as pool:
            base_results = retry(pool.run, wanted, job_for, deadline)
    judged = judge_on_base(findings, results, base_results, label)
    reproduced = sum(1 for f in judged if f.triage.known_by == BY_BASE)
    log.info(f"base optimizer {label}: {reproduced} of {len(judged)} findings reproduce there")
    stats = BaseRecord(
        spec=installation.spec,
        version=installation.info.version,
        models=len({model for model, _ in wanted}),
        findings_checked=len(judged),
        reproduced=reproduced,
        tries=len(base_results),
        reused=sum(1 for r in base_results for outcome in r.outcomes.values() if outcome.reused),
        optimizer_runs=sum(r.counts.optimizer_runs for r in base_results),
        wall_s=round(time.monotonic() - started, 2),
    )
    return BaseCheck(tuple(judged), stats)
