"""Missed optimizations: what the build under test no longer does that a reference build did.

An optimizer can "fix" a miscompilation by doing nothing, and a pass that stops firing passes every
check that asks only whether the result is still correct. With a reference report (`--reuse-from`,
else `--previous`: the PR's base branch's last report, or the previous night's), each (model,
config) both ran on the same original (its sha256) is compared by what its result kept
(`report/effect.py`): a result with more nodes than the reference's is a `missed-optimization`
finding, naming the op types the reference removed and this build no longer does. It is a warning
unless the sweep ran with `--gate-missed`.

Its culprit is the optimizer's own round trip (`infrastructure`) when the `nop` control misses on
the model too; else the config's pass for a single-pass config, and for a config of several passes
the passes whose own single-pass config misses on the same model (`unknown` when none does).

A night compares with the night before, so the next night's sweep sees no difference any more:
the reference's own open missed findings are carried forward while the result still keeps more
nodes than that finding's reference did, and so stay known until the optimizer does as much again
(then the classifier calls them fixed).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ditox_ci.control import NOP
from ditox_ci.engine.findings import effect_of
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import JobResult, WorkerPool
from ditox_ci.log import Log
from ditox_ci.optimizers.install import Installation
from ditox_ci.pinpoint.judge import PoolJudge
from ditox_ci.pinpoint.missed import MissedPinpointer
from ditox_ci.pinpoint.repro import BuildUnderTest
from ditox_ci.report.effect import WHOLE_OPTIMIZER, ModelEffect
from ditox_ci.report.fingerprint import fingerprint
from ditox_ci.report.kinds import FIXED, MISSED_OPTIMIZATION, NEW
from ditox_ci.report.model import Culprit, Finding, ModelEntry, Report

# the method a culprit was found by
SINGLE_PASS_CONFIG = "single-pass config"
SINGLE_PASS_RESULTS = "single-pass results"
CONTROL = "nop control"
MESSAGE = "keeps more nodes than the reference build's result"


@dataclass(frozen=True)
class Reference:
    """A reference report as the check reads it: who made it, its models' effects and the configs
    each ran, and its open missed findings."""

    label: str
    models: Mapping[str, ModelEntry]
    configs: tuple[str, ...]
    missed: tuple[Finding, ...]

    @classmethod
    def of(cls, report: Report) -> Reference:
        optimizer = report.optimizer
        described = (optimizer.build or {}).get("git_describe")
        label = f"{optimizer.name or '?'} {optimizer.version or '?'}"
        label += f" (git {described})" if described else ""
        open_missed = tuple(f for f in report.findings if f.kind == MISSED_OPTIMIZATION and f.status != FIXED)
        return cls(
            label,
            {entry.id: entry for entry in report.models if entry.effect is not None},
            report.stats.configs,
            open_missed,
        )

    def effect(self, model: str, sha256: str, config: str) -> ModelEffect | None:
        """The reference's effect on the same original under `config`, if it ran that."""
        entry = self.models.get(model)
        if entry is None or entry.effect is None or entry.sha256 != sha256:
            return None
        ran = entry.configs or self.configs
        return entry.effect if config in ran else None


def _finding(
    model: str, config: str, culprit: Culprit, head: ModelEffect, base: ModelEffect, reference: str
) -> Finding:
    ours, theirs = head.of(config), base.of(config)
    # what the reference removed that this build keeps, by op type
    kept = {
        op: gone - ours.ops_removed.get(op, 0)
        for op, gone in theirs.ops_removed.items()
        if gone > ours.ops_removed.get(op, 0)
    }
    extra = head.nodes_after(config) - base.nodes_after(config)
    listed = ", ".join(f"{op} ×{count}" for op, count in sorted(kept.items())) or "no op type in particular"
    message = f"{MESSAGE} ({reference}): {extra} more ({listed} no longer removed)"
    measured = {
        "message": message,
        "nodes": head.nodes_after(config),
        "reference_nodes": base.nodes_after(config),
        "original_nodes": head.nodes,
        "not_removed": dict(sorted(kept.items())),
        "reference": reference,
    }
    # a culprit of no pass keys on its scope, and an unknown one on its config too
    keyed = culprit.passes or _unpinned(culprit, config)
    return Finding(
        fingerprint=fingerprint(MISSED_OPTIMIZATION, keyed, MESSAGE, kept),
        kind=MISSED_OPTIMIZATION,
        model=model,
        config=config,
        culprit=culprit,
        measured=measured,
    )


def _unpinned(culprit: Culprit, config: str) -> tuple[str, ...]:
    return (culprit.scope,) if culprit.scope == "infrastructure" else (culprit.scope, config)


def _culprit(step: Step, missing: set[str], control_misses: bool) -> Culprit:
    """The optimizer's own round trip when the `nop` control misses too (every config goes through
    it); else the single pass of a single-pass config, or the passes whose own config misses too
    (`unknown` when none does: no single pass did it in the reference either)."""
    if control_misses:
        return Culprit("infrastructure", (), CONTROL)
    if step.single_pass:
        return Culprit("pass", (step.single_pass,), SINGLE_PASS_CONFIG)
    alone = tuple(name for name in step.passes if name in missing)
    if not alone:
        return Culprit("unknown", (), SINGLE_PASS_RESULTS)
    return Culprit("pass" if len(alone) == 1 else "interaction", alone, SINGLE_PASS_RESULTS)


@dataclass(frozen=True)
class Missed:
    """The missed optimizations, and per model family the default config's node reduction here
    and in the reference, over the models both ran it on (`stats.missed.by_family`)."""

    findings: tuple[Finding, ...]
    reference: str
    by_family: Mapping[str, Mapping[str, int]]

    def record(self) -> MissedRecord:
        return MissedRecord(self.reference, len(self.findings), self.by_family)


@dataclass(frozen=True)
class OnBase:
    """What the base build did with the new missed optimizations: its label, how many it does no
    better on (dropped), the reduction's checks and the bundles written (by fingerprint)."""

    base: str
    not_on_base: int
    reduce_checks: int
    bundles: Mapping[str, str]


@dataclass(frozen=True)
class MissedRecord:
    """`stats.missed`: the reference build, the missed optimizations, the per-family reduction
    (`Missed.by_family`), and with a base build what it did (`on_base`)."""

    reference: str
    findings: int
    by_family: Mapping[str, Mapping[str, int]]
    on_base: OnBase | None = None

    def to_json(self) -> dict[str, Any]:
        by_family = {family: dict(totals) for family, totals in self.by_family.items()}
        data = {"reference": self.reference, "findings": self.findings, "by_family": by_family}
        return data | (asdict(self.on_base) if self.on_base is not None else {})


def missed_optimizations(results: Sequence[JobResult], steps: Sequence[Step], reference: Report) -> Missed:
    """The missed optimizations of `results` against `reference` (see the module docstring)."""
    ref = Reference.of(reference)
    found: list[Finding] = []
    carried = {(f.model, f.config): f for f in ref.missed}
    by_family: dict[str, dict[str, int]] = {}
    for result in results:
        head = effect_of(result)
        if head is None:
            continue
        model, sha = result.ref.id, result.sha256
        whole = ref.effect(model, sha, WHOLE_OPTIMIZER)
        if whole is not None and WHOLE_OPTIMIZER in result.outcomes:
            family = by_family.setdefault(
                result.ref.family or "other", {"models": 0, "nodes": 0, "after": 0, "reference_after": 0}
            )
            family["models"] += 1
            family["nodes"] += head.nodes
            family["after"] += head.nodes_after(WHOLE_OPTIMIZER)
            family["reference_after"] += whole.nodes_after(WHOLE_OPTIMIZER)
        fewer: dict[str, ModelEffect] = {}
        for step in steps:
            outcome = result.outcomes.get(step.label)
            base = ref.effect(model, sha, step.label)
            if outcome is None or outcome.failed or base is None:
                continue
            if head.nodes_after(step.label) > base.nodes_after(step.label):
                fewer[step.label] = base
        missing = {step.single_pass for step in steps if step.single_pass and step.label in fewer}
        for step in steps:
            if step.label in fewer:
                culprit = _culprit(step, {name for name in missing if name}, NOP in fewer)
                found.append(_finding(model, step.label, culprit, head, fewer[step.label], ref.label))
            elif (model, step.label) in carried and step.label in result.outcomes:
                still = carried[(model, step.label)]
                nodes = head.nodes_after(step.label)
                if nodes > int(still.measured.get("reference_nodes", 0)):
                    found.append(replace(still, measured={**still.measured, "nodes": nodes}))
    return Missed(tuple(found), ref.label, dict(sorted(by_family.items())))


def pinned_on_base(
    missed: Missed,
    results: Sequence[JobResult],
    steps: Sequence[Step],
    pool: WorkerPool,
    base: Installation,
    out_dir: Path,
    build: BuildUnderTest,
    deadline: float,
    log: Log,
) -> tuple[list[Finding], OnBase]:
    """`missed`'s new findings run on the `--base-optimizer` build: those it does no better on go,
    the others are reduced (`pinpoint.missed`) while `deadline` allows; carried ones stay as they
    are. Returns the findings and what the base build did, for the stage's record."""
    ours = {result.ref.id: result for result in results}
    by_label = {step.label: step for step in steps}
    base_config = replace(pool.config, optimizer=base.optimizer, optimizer_path=base.path)
    kept: list[Finding] = []
    gone = 0
    with (
        tempfile.TemporaryDirectory(prefix="ditox-missed-") as scratch,
        WorkerPool(base_config, 1) as base_pool,
    ):
        judges = (PoolJudge(pool, Path(scratch, "head")), PoolJudge(base_pool, Path(scratch, "base")))
        pinner = MissedPinpointer(*judges, pool.config, out_dir, build, deadline)
        for finding in sorted(missed.findings, key=lambda f: (f.model, f.config)):
            result, step = ours.get(finding.model), by_label.get(finding.config)
            if finding.status != NEW or result is None or step is None:
                kept.append(finding)
                continue
            left = pinner.on_base(result, step)
            if left is not None and left >= int(finding.measured["nodes"]):
                gone += 1
                log.info(
                    f"{finding.model} [{finding.config}]: the base build leaves as many nodes; not missed"
                )
                continue
            measured = {**finding.measured, "base_nodes": left} if left is not None else finding.measured
            kept.append(pinner.reduced(replace(finding, measured=measured), result, step))
    return kept, OnBase(base.label, gone, pinner.checks, pinner.bundles)
