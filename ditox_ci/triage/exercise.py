"""Passes a pull request adds or changes get models made for them, within a budget, in the PR check.

A corpus rarely holds a model that a brand-new pass rewrites (onnx/optimizer's
`fuse_consecutive_squeeze_unsqueeze` changed none of 2,022), so the check would pass it untested.
The passes the head build has and the base lacks, and, in a checkout of onnx/optimizer, the passes
whose source (or a helper it includes) changed since the PR's base commit (`triage.impact`), get the
pass-directed generators' models (`ditox-ci fuzz`): the pass's own generator, or for a pass that
has none the generators of the passes closest to it by name (a new pass is often a variant of an
old one), else all of them. Each model runs the nop control and every such pass alone on the
build under test; its findings join the sweep's (re-run on the base, reproduced, pinpointed), and
what each pass changed is recorded (`stats.exercised`), with a warning for one that fired on
nothing.
"""

from __future__ import annotations

import difflib
import shutil
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ditox_ci.control import NOP
from ditox_ci.engine.findings import coverage_of, findings_for
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import Job, JobResult, WorkerPool
from ditox_ci.fuzz import GENERATORS
from ditox_ci.fuzz.corpus import StreamedCorpus
from ditox_ci.log import Log
from ditox_ci.report.exercised import MODEL_IDS_KEY, WHY_CHANGED, WHY_NEW, ExercisedPass
from ditox_ci.report.header import OptimizerInfo
from ditox_ci.report.model import Finding

# a pass without a generator of its own gets the models of this many passes closest to it by name
CLOSE_GENERATORS = 3
CLOSE_CUTOFF = 0.6
# models made per exercised pass at most, however fast they come: enough to see a pass fire on
# several seeds of each of its generators, few enough that report.json stays the corpus's
MODELS_PER_PASS = 60


def passes_to_exercise(head: OptimizerInfo, base: OptimizerInfo, changed: Sequence[str]) -> dict[str, str]:
    """{pass: why} for the head's passes the base lacks (new) and the `changed` ones it has."""
    targets = {name: WHY_NEW for name in head.passes if name not in base.passes}
    targets.update({name: WHY_CHANGED for name in changed if name in head.passes and name not in targets})
    return targets


def generators_for(name: str, among: Collection[str] = ()) -> tuple[str, ...]:
    """The pass's own generator, else those of the passes closest to it by name, else all; of the
    generators for `among` (the optimizer's other passes) where it has some, since every built-in
    optimizer's passes have theirs."""
    if name in GENERATORS:
        return (name,)
    pool = sorted(g for g in GENERATORS if g in among) or sorted(GENERATORS)
    close = difflib.get_close_matches(name, pool, n=CLOSE_GENERATORS, cutoff=CLOSE_CUTOFF)
    return tuple(close) or tuple(pool)


@dataclass(frozen=True)
class ExerciseRecord:
    """`stats.exercised`: the budget, seed and limit models were made with, how many were made and
    kept, their ids (they ran the control and the exercised passes only), the time, and each
    exercised pass."""

    budget_s: float
    seed: int
    limit: int
    models: int
    models_kept: int
    model_ids: tuple[str, ...]
    wall_s: float
    passes: tuple[ExercisedPass, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "budget_s": self.budget_s,
            "seed": self.seed,
            "limit": self.limit,
            "models": self.models,
            "models_kept": self.models_kept,
            MODEL_IDS_KEY: list(self.model_ids),
            "wall_s": self.wall_s,
            "passes": [exercised.to_json() for exercised in self.passes],
        }


@dataclass(frozen=True)
class Exercise:
    """The exercised passes, the models made for them, their findings and `stats.exercised`."""

    passes: tuple[ExercisedPass, ...]
    results: tuple[JobResult, ...]
    findings: tuple[Finding, ...]
    stats: ExerciseRecord

    def labels_run(self) -> dict[str, frozenset[str]]:
        """The configs each generated model ran: the control and the exercised passes, no others."""
        return {result.ref.id: frozenset(result.outcomes) for result in self.results}


def _runnable(targets: Mapping[str, str], steps: Sequence[Step]) -> dict[str, Step]:
    single = {step.single_pass: step for step in steps if step.single_pass}
    return {name: single[name] for name in targets if name in single}


def exercise(
    targets: Mapping[str, str],
    steps: Sequence[Step],
    pool: WorkerPool,
    out_dir: Path,
    seed: int,
    budget_s: float,
    log: Log,
    among: Collection[str] = (),
) -> Exercise:
    """Make models for `targets` ({pass: why}) into `out_dir` until `budget_s` is spent (or
    MODELS_PER_PASS for each), and run
    each through `pool` with the nop control and every target the sweep's `steps` run alone; a
    model without a finding is deleted once judged (its seed makes it again). A pass without a
    generator of its own borrows those of the passes of `among` (the optimizer's) closest by name."""
    started = time.monotonic()
    runnable = _runnable(targets, steps)
    generators = list(dict.fromkeys(g for name in runnable for g in generators_for(name, among)))
    shutil.rmtree(out_dir, ignore_errors=True)
    limit = MODELS_PER_PASS * len(runnable)
    corpus = StreamedCorpus(out_dir, seed, generators, limit, started + budget_s)
    job_steps = (*(step for step in steps if step.label == NOP), *runnable.values())
    results: list[JobResult] = []
    findings: list[Finding] = []
    if runnable:
        for result in pool.run(Job(ref, job_steps) for ref in corpus):
            found = findings_for(result, job_steps)
            if not found:  # a finding's model is re-run on the base and reduced: it stays
                corpus.discard(result.ref)
            results.append(result)
            findings.extend(found)
    coverage = coverage_of(results, job_steps).per_pass
    passes = tuple(
        ExercisedPass(
            name,
            why,
            generators_for(name, among) if name in runnable else (),
            coverage.get(name, {}).get("models_checked", 0),
            coverage.get(name, {}).get("models_changed", 0),
            "" if name in runnable else f"the sweep runs no pass:{name} alone (add `single` to --configs)",
        )
        for name, why in targets.items()
    )
    for exercised in passes:
        what = f"not run: {exercised.not_run}" if exercised.not_run else (
            f"changed {exercised.models_changed} of {exercised.models_checked} generated models"
        )
        log.info(f"{exercised.why} pass {exercised.name}: {what}")
    stats = ExerciseRecord(
        budget_s,
        seed,
        limit,
        len(results),
        len(results) - corpus.discarded,
        # which of the report's models these are: they ran the control and these passes only
        tuple(sorted(result.ref.id for result in results)),
        round(time.monotonic() - started, 2),
        tuple(passes),
    )
    return Exercise(passes, tuple(results), tuple(findings), stats)
