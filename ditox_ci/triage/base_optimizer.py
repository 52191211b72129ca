"""Pre-existing or introduced? Each finding's (model, config) run again on the base build.

A pull request is blamed only for what it introduces. After the sweep, every model with a finding
runs again, only the configs that failed (and the nop control), through a worker pool that loads
the `--base-optimizer` build instead of the one under test. A finding whose config fails the same
way on the base (`Outcome.same_failure`) is `known`, with `evidence["known_by"] = "base-optimizer"`;
the others keep what the base did instead in `evidence["on_base"]`, so the PR comment can say so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step, step_on_build
from ditox_ci.engine.worker import Job, JobResult, WorkerConfig, WorkerPool
from ditox_ci.log import Log
from ditox_ci.optimizers import OptimizerInfo
from ditox_ci.optimizers.install import Installation
from ditox_ci.progress import Progress
from ditox_ci.report.model import Finding

KNOWN_BY = "base-optimizer"


@dataclass(frozen=True)
class BaseCheck:
    findings: tuple[Finding, ...]
    stats: dict[str, Any]


def base_jobs(
    findings: Sequence[Finding], results: Sequence[JobResult], steps: Sequence[Step], info: OptimizerInfo
) -> list[Job]:
    """One job per model with a finding: the nop control, then each failing config the base can run."""
    failing: dict[str, set[str]] = {}
    for finding in findings:
        failing.setdefault(finding.model, set()).add(finding.config)
    jobs = []
    for result in results:
        wanted = failing.get(result.ref.id)
        if wanted is None:
            continue
        on_base = (step_on_build(s, info) for s in steps if s.label == "nop" or s.label in wanted)
        jobs.append(Job(result.ref, tuple(step for step in on_base if step is not None)))
    return jobs


def _on_base(outcome: Outcome | None, base: JobResult | None) -> str:
    """What the base build did with the config, in words for the report."""
    if base is None or base.status != "ok":
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
    """Mark the findings the base build reproduces as known; note on the others what it did."""
    ours = {result.ref.id: result for result in results}
    theirs = {result.ref.id: result for result in base_results}
    judged = []
    for finding in findings:
        outcome = ours[finding.model].outcomes.get(finding.config)
        base = theirs.get(finding.model)
        base_outcome = base.outcomes.get(finding.config) if base and base.status == "ok" else None
        if outcome is not None and base_outcome is not None and outcome.same_failure(base_outcome):
            evidence = {**finding.evidence, "known_by": KNOWN_BY, "base_optimizer": label}
            judged.append(replace(finding, status="known", evidence=evidence))
        else:
            evidence = {**finding.evidence, "on_base": _on_base(base_outcome, base)}
            judged.append(replace(finding, evidence=evidence))
    return judged


def check_on_base(
    findings: Sequence[Finding],
    results: Sequence[JobResult],
    steps: Sequence[Step],
    config: WorkerConfig,
    installation: Installation,
    jobs: int,
    log: Log,
) -> BaseCheck:
    """Re-run each finding's model and config on the base build; see the module docstring."""
    started = time.monotonic()
    label = installation.label
    base_config = replace(config, optimizer=installation.optimizer, optimizer_path=installation.path)
    work = base_jobs(findings, results, steps, installation.info)
    base_results: list[JobResult] = []
    if work:
        with (
            WorkerPool(base_config, min(jobs, len(work))) as pool,
            Progress(log, len(work), "models on base") as progress,
        ):
            for result in pool.run(work):
                base_results.append(result)
                progress.advance()
    judged = judge_on_base(findings, results, base_results, label)
    reproduced = sum(1 for f in judged if f.evidence.get("known_by") == KNOWN_BY)
    log.info(f"base optimizer {label}: {reproduced} of {len(judged)} findings reproduce there")
    stats = {
        "spec": installation.spec,
        "version": installation.info.version,
        "models": len(work),
        "findings_checked": len(judged),
        "reproduced": reproduced,
        "optimizer_runs": sum(r.optimizer_runs for r in base_results),
        "wall_s": round(time.monotonic() - started, 2),
    }
    return BaseCheck(tuple(judged), stats)
