"""Findings grouped into bugs: one bug per fingerprint, what people count and act on.

A sweep's findings are (model, config) pairs, so their number grows with the corpus; the number
of bugs grows with what is broken. Every text for people (summary, PR comment, check) leads with
bugs, and counts known findings per reason they are known (a baseline entry, the base build…),
while `report.json` keeps every finding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ditox_ci.report.evidence import KnownBy, KnownSource, Reduction, ReductionEnd
from ditox_ci.report.kinds import FIXED, KNOWN, NEW, TIERS, verdicts_gate
from ditox_ci.report.model import FLAKY, Culprit, Finding, Report


@dataclass(frozen=True)
class Bug:
    """The findings of one status that share a fingerprint, in report order; `gate_tiers` the
    tiers of values verdicts that gate in their report."""

    findings: tuple[Finding, ...]
    gate_tiers: tuple[str, ...] = TIERS

    @property
    def first(self) -> Finding:
        return self.findings[0]

    @property
    def fingerprint(self) -> str:
        return self.first.fingerprint

    @property
    def example(self) -> Finding:
        """The finding to show: the first with a repro bundle, else the first."""
        return next((f for f in self.findings if f.repro), self.first)

    @property
    def kind(self) -> str:
        return self.first.kind

    @property
    def status(self) -> str:
        return self.first.status

    @property
    def culprit(self) -> Culprit:
        return self.first.culprit

    @property
    def tier(self) -> str | None:
        return self.first.tier

    @property
    def gates(self) -> bool:
        """A bug with a verdict that gates (`kinds.verdicts_gate`): a failure, not a warning nor a
        values bug of a tier its report does not gate."""
        return verdicts_gate(self.first.verdicts, self.first.tier, self.gate_tiers)

    @property
    def message(self) -> str:
        return self.first.message

    @property
    def repro(self) -> str | None:
        return next((f.repro for f in self.findings if f.repro), None)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.model for f in self.findings))

    @property
    def hits(self) -> tuple[str, ...]:
        """'model [config]' per finding, the way the texts list where a bug was seen."""
        return tuple(f"{f.model} [{f.config}]" for f in self.findings)

    @property
    def reduced(self) -> tuple[int, int] | None:
        """(nodes before, nodes after) of the reduction that made the repro, if one ran."""
        reduction = self._reduction
        if reduction is None or reduction.lost_the_failure:
            return None
        return reduction.nodes_before, reduction.nodes_after

    @property
    def standalone(self) -> Mapping[str, Any] | None:
        """The standalone record of the finding that was reduced (`ditox_ci.report.standalone`)."""
        for finding in self.findings:
            record = finding.pinpointing.standalone
            if record is not None and record.get("model"):
                return record
        return None

    @property
    def not_reproducible(self) -> bool:
        """The failure did not come back when reduction ran the culprit again on the same model:
        an optimizer (or runtime) whose result changes from run to run, e.g. one that reads memory
        it does not own."""
        reduction = self._reduction
        return reduction is not None and reduction.reason is ReductionEnd.NOT_REPRODUCIBLE

    @property
    def _reduction(self) -> Reduction | None:
        return next((f.pinpointing.reduction for f in self.findings if f.pinpointing.reduction), None)


@dataclass(frozen=True)
class KnownGroup:
    """The known findings one reason accounts for."""

    known_by: KnownBy
    findings: int
    bugs: int
    models: int
    kinds: tuple[str, ...]

    @property
    def reason(self) -> str:
        """As report.json spells `known_by`: `baseline:<entry id>`, `base-optimizer`, `previous`,
        `engine`."""
        return self.known_by.to_json()

    @property
    def baseline_entry(self) -> str | None:
        return self.known_by.baseline_entry


def group_bugs(findings: Iterable[Finding], gate_tiers: tuple[str, ...] = TIERS) -> list[Bug]:
    """One Bug per fingerprint; failures before warnings, wrong results before losses of precision
    before ties, then the most findings first."""
    grouped: dict[str, list[Finding]] = {}
    for finding in findings:
        grouped.setdefault(finding.fingerprint, []).append(finding)
    bugs = [Bug(tuple(group), gate_tiers) for group in grouped.values()]
    return sorted(bugs, key=_bug_order)


def _bug_order(bug: Bug) -> tuple[bool, int, int, str]:
    tier = TIERS.index(bug.tier) if bug.tier in TIERS else -1
    return (not bug.gates, tier, -len(bug.findings), bug.fingerprint)


def known_groups(findings: Iterable[Finding]) -> list[KnownGroup]:
    """Known findings counted per reason, the largest first."""
    by_reason: dict[KnownBy, list[Finding]] = {}
    for finding in findings:
        by_reason.setdefault(finding.triage.known_by or KnownBy(KnownSource.ENGINE), []).append(finding)
    groups = [
        KnownGroup(
            known_by=reason,
            findings=len(group),
            bugs=len({f.fingerprint for f in group}),
            models=len({f.model for f in group}),
            kinds=tuple(kind for kind, _ in Counter(f.kind for f in group).most_common()),
        )
        for reason, group in by_reason.items()
    ]
    return sorted(groups, key=lambda group: (-group.findings, group.reason))


def headline(bugs: Sequence[Bug], status: str) -> str:
    """'3 new bugs (13 findings on 4 models)', plus the warnings when there are any."""
    failures = [bug for bug in bugs if bug.gates]
    warnings = [bug for bug in bugs if not bug.gates]
    parts = []
    if failures or not warnings:
        parts.append(_count(failures, f"{status} bug"))
    if warnings:
        parts.append(_count(warnings, f"{status} warning"))
    return ", ".join(parts)


def _count(bugs: Sequence[Bug], noun: str) -> str:
    text = f"{len(bugs)} {noun}{'s' if len(bugs) != 1 else ''}"
    if not bugs:
        return text
    findings = sum(len(bug.findings) for bug in bugs)
    models = len({model for bug in bugs for model in bug.models})
    return (
        f"{text} ({findings} finding{'s' if findings != 1 else ''} "
        f"on {models} model{'s' if models != 1 else ''})"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def tally(new: Sequence[Bug], known: int, fixed: int, flaky: int) -> list[str]:
    """The counts every text for people opens with, in one wording: the comment, the check, the
    step summary and the terminal's last line say the same numbers, bugs first."""
    failures = [bug for bug in new if bug.gates]
    opening = headline(new, "new") if failures else "no new bugs"
    if not failures and len(failures) != len(new):
        opening += "; " + headline(new, "new")
    parts = [opening, _plural(known, "known finding"), _plural(fixed, "fixed bug")]
    return parts + ([f"{flaky} flaky, not blocking"] if flaky else [])


def bug_context(report: Report) -> dict[str, Any]:
    """What every bug-centric template takes: new bugs and warnings, fixed and flaky bugs, known
    groups, and the tally they open with."""
    findings, tiers = report.findings, report.gate_tiers
    new = group_bugs((f for f in findings if f.status == NEW), tiers)
    known = [f for f in findings if f.status == KNOWN]
    fixed = group_bugs((f for f in findings if f.status == FIXED), tiers)
    flaky = group_bugs((f for f in findings if f.status == FLAKY), tiers)
    return {
        "tally": tally(new, len(known), len(fixed), len(flaky)),
        "flaky_bugs": flaky,
        "new_bugs": new,
        "new_failures": [bug for bug in new if bug.gates],
        "new_warnings": [bug for bug in new if not bug.gates],
        "fixed_bugs": fixed,
        "known_groups": known_groups(known),
        "known_count": len(known),
        "baseline": report.stats.stages.get("baseline", {}),
    }

