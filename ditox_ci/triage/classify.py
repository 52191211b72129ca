"""Classification: each finding becomes `new` or `known`, and what no longer reproduces `fixed`.
A `flaky` finding (no re-run showed it, triage/reproduce.py) stays flaky unless the baseline or
the previous report knows it.

Sources of "known", strongest first: an unexpired baseline entry, the engine itself (a finding it
already marked known, e.g. because it reproduces on `--base-optimizer`), the previous report.
Why a finding is known is kept in `Finding.triage.known_by` (report.json's `evidence.known_by`) so
the bot can say so. A report is
classified twice (by the sweep, then by publish): an earlier verdict is decided again only by a
call that holds its baseline entry or a previous report, so publishing without them keeps it.
Baseline health (stale, expired, out-of-scope entries) goes to `report.stats["baseline"]`; the
rest of the report keeps schema_version 1 unchanged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import replace

from ditox_ci.report.evidence import KnownBy, KnownSource, Triage
from ditox_ci.report.kinds import FIXED, KNOWN, NEW, TIERS, FindingKind, ModelStatus, verdicts_gate
from ditox_ci.report.model import FLAKY, Culprit, Finding, Report
from ditox_ci.triage.baseline import Baseline, BaselineEntry


def _known(finding: Finding, by: KnownBy) -> Finding:
    return replace(finding, status=KNOWN, triage=replace(finding.triage, known_by=by))


def _new(finding: Finding) -> Finding:
    return replace(finding, status=NEW, triage=replace(finding.triage, known_by=None))


def _decided_here(known_by: KnownBy, entry_ids: set[str], previous: Report | None) -> bool:
    """Whether this call holds what made an earlier `known` verdict (and so decides it again): its
    baseline entry (which may have expired or changed since) or a previous report."""
    if known_by.source is KnownSource.BASELINE:
        return known_by.entry in entry_ids
    return known_by.source is KnownSource.PREVIOUS and previous is not None


def _fixed_from_entry(entry: BaselineEntry) -> Finding:
    """A `fixed` record for a baseline entry that named one exact finding and no longer matches."""
    return Finding(
        fingerprint=entry.fingerprint or "",
        kind=FindingKind.named(entry.kinds[0]) if entry.kinds else FindingKind.WARNING,
        model=entry.model,
        config="",
        culprit=Culprit(scope="pass" if entry.passes else "unknown", passes=entry.passes),
        status=FIXED,
        measured={"message": f"baseline entry '{entry.id}' no longer matches any finding"},
        triage=Triage(stale_entry=entry.id),
    )


def classify(
    report: Report,
    baseline: Baseline,
    previous: Report | None = None,
    today: dt.date | None = None,
) -> Report:
    """Return `report` with statuses set, `fixed` records appended and `stats["baseline"]` filled.

    Idempotent: classifying an already classified report gives the same report.
    """
    today = today or dt.date.today()
    previous_open = {f.fingerprint: f for f in (previous.findings if previous else ()) if f.status != FIXED}
    matched: dict[str, int] = {e.id: 0 for e in baseline.entries}
    entry_ids = set(matched)
    expired_hits: dict[str, list[str]] = {}
    findings: list[Finding] = []
    for finding in report.findings:
        if finding.status == FIXED:
            findings.append(finding)
            continue
        for candidate in baseline.entries:
            if candidate.matches(finding):
                matched[candidate.id] += 1
        entry = baseline.match(finding, today)
        known_by = finding.triage.known_by or KnownBy(KnownSource.ENGINE)
        if entry:
            findings.append(_known(finding, KnownBy(KnownSource.BASELINE, entry.id)))
        elif finding.status == KNOWN and not _decided_here(known_by, entry_ids, previous):
            findings.append(_known(finding, known_by))
        elif finding.fingerprint in previous_open:
            findings.append(_known(finding, KnownBy(KnownSource.PREVIOUS)))
        elif finding.status == FLAKY:  # no re-run showed it: it stays apart, and does not gate
            findings.append(finding)
        else:
            findings.append(_new(finding))
        expired = baseline.expired_match(finding, today)
        if expired and not entry:
            expired_hits.setdefault(expired.id, []).append(finding.fingerprint)

    present = {f.fingerprint for f in findings}
    # an interrupted sweep may have stopped before a finding's config or its localization: what it
    # did not show proves nothing, so it marks nothing fixed
    complete = not report.stats.interrupted
    checked_models = {m.id for m in report.models if m.status == ModelStatus.OK} if complete else set()
    for old in previous_open.values():
        # A model this run did not check (another shard, a narrower --models) proves nothing.
        if old.fingerprint not in present and old.model in checked_models:
            findings.append(replace(old, status=FIXED))
            present.add(old.fingerprint)

    stale, unchecked = [], []
    for entry in baseline.entries:
        if matched[entry.id] or entry.expired(today):
            continue
        if not complete or not entry.in_scope(report):
            unchecked.append(entry.id)
            continue
        if entry.shipped:
            continue
        stale.append(entry.id)
        if entry.fingerprint and entry.fingerprint not in present:
            findings.append(_fixed_from_entry(entry))
            present.add(entry.fingerprint)

    health = {
        "baseline": {
            "sources": list(baseline.sources),
            "entries": len(baseline.entries),
            "matched": {k: v for k, v in matched.items() if v},
            "stale": stale,
            "expired": [e.id for e in baseline.entries if e.expired(today)],
            "expired_matches": expired_hits,
            "unchecked": unchecked,
        },
    }
    stats = replace(report.stats, stages={**report.stats.stages, **health})
    return replace(report, findings=tuple(findings), stats=stats)


def issue_worthy(finding: Finding, gate_tiers: Collection[str] = TIERS) -> bool:
    """A real, open bug: not fixed, not flaky (nothing to reproduce it by), not by design
    (baseline), not a warning nor of a tier that does not gate (`gate_tiers`). Infrastructure
    findings (the optimizer's own round trip fails, whatever the passes) are bugs of the optimizer
    like any other and get an issue too."""
    return (
        finding.status not in (FIXED, FLAKY)
        and verdicts_gate(finding.verdicts, finding.tier, gate_tiers)
        and not (finding.triage.known_by and finding.triage.known_by.baseline_entry is not None)
    )
