"""Reproduce before gating: a finding closes the gate as new only if it shows again when re-run.

CIFuzz reports a crash only if it reproduces on the PR's build and not on the base. Here every
finding that could gate (not known, not a warning, not accepted by the baseline) has its model
and config run again on the build under test, a few tries within the reduction budget, each on a
freshly prepared model (`Job.fresh`: no verdict from the worker's cache). A finding that shows
the same failure (`Outcome.same_failure`) in any try is reproduced; one that never does is
`flaky`: kept in the report with its evidence, listed apart, and it does not fail the gate. The
base build's check (`base_optimizer.check_on_base`) re-runs with the same `retry` loop, so a
finding the base shows in any of its tries is known.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import Job, JobResult, WorkerPool
from ditox_ci.log import Log
from ditox_ci.report.evidence import Tries
from ditox_ci.report.kinds import TIERS, ModelStatus
from ditox_ci.report.model import FLAKY, Finding

# how often a finding is run again before it is called flaky (or, on the base, not reproduced)
TRIES = 3

Key = tuple[str, str]  # (model id, config label)


def tries_of(wanted: Mapping[Key, Outcome], results: Iterable[JobResult]) -> dict[Key, Tries]:
    """What the re-runs in `results` (any number per model, one per try) showed of each wanted
    failure: a try counts for every wanted config of its model; it reproduces the failure when it
    shows the same failure (`Outcome.same_failure`)."""
    ran: dict[Key, int] = dict.fromkeys(wanted, 0)
    shown: dict[Key, int] = dict.fromkeys(wanted, 0)
    for result in results:
        for key, failure in wanted.items():
            if key[0] != result.ref.id:
                continue
            ran[key] += 1
            outcome = result.outcomes.get(key[1]) if result.status == ModelStatus.OK else None
            shown[key] += int(outcome is not None and outcome.same_failure(failure))
    return {key: Tries(ran[key], shown[key]) for key in wanted}


def retry(
    run: Callable[[list[Job]], Iterable[JobResult]],
    wanted: Mapping[Key, Outcome],
    job_for: Callable[[str, Sequence[str]], Job | None],
    deadline: float,
    tries: int = TRIES,
) -> list[JobResult]:
    """Run each (model, config) of `wanted` again (`run`: a pool's) until its failure shows or
    `tries` runs or `deadline` (time.monotonic) are spent; the first try always runs. `job_for(model,
    configs)` makes one model's job, None when it cannot run there. Returns every try's results."""
    results: list[JobResult] = []
    pending = dict(wanted)
    for attempt in range(tries):
        if not pending or (attempt and time.monotonic() >= deadline):
            break
        by_model: dict[str, list[str]] = {}
        for model, config in pending:
            by_model.setdefault(model, []).append(config)
        jobs = [job for model, configs in by_model.items() if (job := job_for(model, configs)) is not None]
        this_try = list(run(jobs))
        results.extend(this_try)
        answered = {result.ref.id: result.outcomes for result in this_try}
        seen = tries_of(wanted, results)
        # a config no job could run (the base lacks its pass) or that gave no verdict is not tried again
        pending = {
            key: failure
            for key, failure in pending.items()
            if key[1] in answered.get(key[0], {}) and not seen[key].reproduced
        }
    return results


def gating(
    finding: Finding, by_design: Callable[[Finding], bool], gate_tiers: Collection[str] = TIERS
) -> bool:
    """Whether `finding` could close the gate as new: what re-running is for."""
    return finding.closes_gate(gate_tiers) and not by_design(finding)


@dataclass(frozen=True)
class ReproduceRecord:
    """`stats.reproduce`: the findings run again, how many showed no more, the re-runs, the time."""

    findings_checked: int = 0
    flaky: int = 0
    tries: int = 0
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Reproduced:
    findings: tuple[Finding, ...]
    stats: ReproduceRecord


def reproduce(
    findings: Sequence[Finding],
    results: Iterable[JobResult],
    steps: Sequence[Step],
    pool: WorkerPool,
    by_design: Callable[[Finding], bool],
    deadline: float,
    log: Log,
    gate_tiers: Collection[str] = TIERS,
) -> Reproduced:
    """Mark the gating findings that no re-run shows again `flaky`; see the module docstring."""
    started = time.monotonic()
    by_label = {step.label: step for step in steps}
    results_by_model = {result.ref.id: result for result in results}
    outcomes = {(model, label): o for model, r in results_by_model.items() for label, o in r.outcomes.items()}
    wanted = {
        (f.model, f.config): outcomes[f.model, f.config]
        for f in findings
        if gating(f, by_design, gate_tiers) and (f.model, f.config) in outcomes
    }

    def job_for(model: str, configs: Sequence[str]) -> Job:
        return Job(results_by_model[model].ref, tuple(by_label[c] for c in configs), fresh=True)

    tried = tries_of(wanted, retry(pool.run, wanted, job_for, deadline)) if wanted else {}
    judged = []
    for finding in findings:
        seen = tried.get((finding.model, finding.config))
        if seen is None:
            judged.append(finding)
            continue
        status = finding.status if seen.reproduced else FLAKY
        judged.append(replace(finding, status=status, triage=replace(finding.triage, reproduce=seen)))
    flaky = sum(1 for seen in tried.values() if not seen.reproduced)
    if tried:
        log.info(f"reproduce: {len(tried) - flaky} of {len(tried)} findings show again; {flaky} flaky")
    tries = sum(seen.tries for seen in tried.values())
    stats = ReproduceRecord(len(tried), flaky, tries, round(time.monotonic() - started, 2))
    return Reproduced(tuple(judged), stats)
