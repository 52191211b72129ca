from __future__ import annotations

import datetime as dt
from dataclasses import replace

from ditox_ci.report.evidence import KnownBy, KnownSource, Triage
from ditox_ci.report.model import Culprit, Finding, ModelEntry, Report
from ditox_ci.triage.baseline import load_baseline, parse_baseline
from ditox_ci.triage.classify import classify, issue_worthy

TODAY = dt.date(2025, 6, 1)


def finding(fp, model="a.onnx", passes=("fuse_bn_into_conv",), kind="output-mismatch", status="new"):
    return Finding(fp, kind, model, f"pass:{passes[0]}", Culprit("pass", passes), status, {"message": "diff"})


def report(*findings, models=("a.onnx", "b.onnx"), coverage=None):
    return Report(
        {},
        {},
        {},
        {"index": 0, "count": 1},
        tuple(ModelEntry(m, "s", "") for m in models),
        findings,
        coverage or {"split_init": {"models_changed": 1, "models_checked": 2}},
        {},
    )


def test_default_baseline_makes_split_findings_known():
    out = classify(
        report(finding("s1", passes=("split_init",)), finding("n1")), load_baseline(None), today=TODAY
    )
    assert [(f.status, f.evidence.get("known_by")) for f in out.findings] == [
        ("known", "baseline:split-init-by-design"),
        ("new", None),
    ]
    assert out.stats.stages["baseline"]["matched"] == {"split-init-by-design": 1}
    assert out.to_json()["schema_version"] == 1


def test_previous_report_makes_known_and_fixed():
    previous = report(finding("old"), finding("gone"), finding("elsewhere", model="c.onnx"))
    out = classify(report(finding("old"), finding("brand")), load_baseline(None), previous, TODAY)
    statuses = {f.fingerprint: f.status for f in out.findings}
    # c.onnx was not checked in this run, so its finding is not claimed fixed.
    assert statuses == {"old": "known", "brand": "new", "gone": "fixed"}


def test_engine_known_is_kept_and_classify_is_idempotent():
    engine_known = replace(
        finding("base"),
        status="known",
        measured={"message": "d"},
        triage=Triage(known_by=KnownBy(KnownSource.BASE_OPTIMIZER)),
    )
    previous = report(finding("gone"))
    once = classify(report(engine_known, finding("x")), load_baseline(None), previous, TODAY)
    twice = classify(once, load_baseline(None), previous, TODAY)
    assert once == twice
    assert {f.fingerprint: f.status for f in once.findings} == {"base": "known", "x": "new", "gone": "fixed"}


def test_publishing_without_the_sweeps_baseline_or_previous_keeps_their_verdicts():
    user, _ = parse_baseline(
        "entries:\n- {id: mine, reason: r, passes: [fuse_bn_into_conv], expires: 2025-12-31}\n", "u.yml"
    )
    previous = report(finding("old", model="b.onnx"))
    sweep = report(finding("accepted"), finding("old", model="b.onnx", passes=("eliminate_nop_pad",)))
    swept = classify(sweep, load_baseline(None) + user, previous, TODAY)
    published = classify(swept, load_baseline(None), today=TODAY)
    assert [(f.status, f.evidence["known_by"]) for f in published.findings] == [
        ("known", "baseline:mine"),
        ("known", "previous"),
    ]
    # what is given again decides again: the entry has expired, the new previous report lacks "old"
    later = classify(swept, load_baseline(None) + user, report(), dt.date(2026, 1, 1))
    assert [f.status for f in later.findings] == ["new", "new"]


def test_stale_expired_and_unchecked_entries_are_flagged():
    baseline, _ = parse_baseline(
        "entries:\n"
        "- {id: stale, reason: r, fingerprint: dead, kind: optimizer-crash, model: a.onnx}\n"
        "- {id: old, reason: r, expires: 2025-01-01, passes: [fuse_bn_into_conv]}\n"
        "- {id: far, reason: r, model: 'zoo/*'}\n",
        "b.yml",
    )
    out = classify(report(finding("n1")), baseline, today=TODAY)
    stats = out.stats.stages["baseline"]
    assert stats["stale"] == ["stale"] and stats["expired"] == ["old"]
    assert stats["unchecked"] == ["far"] and stats["expired_matches"] == {"old": ["n1"]}
    fixed = [f for f in out.findings if f.status == "fixed"]
    assert [(f.fingerprint, f.kind, f.evidence["baseline_entry"]) for f in fixed] == [
        ("dead", "optimizer-crash", "stale")
    ]
    assert out.findings[0].status == "new"  # the expired entry no longer covers it


def test_a_shipped_entry_that_matches_nothing_is_not_stale(tmp_path):
    """Users cannot remove the shipped default's entries, so the summary never tells them to."""
    user = tmp_path / "b.yml"
    user.write_text("entries:\n- {id: mine, reason: r, passes: [split_init], kind: runtime-error}\n")
    out = classify(report(finding("n1")), load_baseline(user), today=TODAY)
    stats = out.stats.stages["baseline"]
    assert stats["stale"] == ["mine"]
    assert "split-init-by-design" not in stats["stale"] + stats["unchecked"]
    assert len(stats["sources"]) == 2


def test_issue_worthy_excludes_by_design_warnings_and_fixed():
    by_base = Triage(known_by=KnownBy(KnownSource.BASE_OPTIMIZER))
    on_base = replace(finding("on-base"), status="known", measured={}, triage=by_base)
    out = classify(
        report(finding("s", passes=("split_init",)), finding("w", kind="warning"), finding("bug"), on_base),
        load_baseline(None),
        report(finding("bug")),
        today=TODAY,
    )
    # a bug the base build shares, or the previous report had, is still a bug: the nightly, which
    # has no base build, files it too
    assert [f.fingerprint for f in out.findings if issue_worthy(f)] == ["bug", "on-base"]


def test_infrastructure_findings_are_bugs_that_get_an_issue():
    """The optimizer's own round trip failing (every pass, the nop control too) is its bug."""
    infra = replace(finding("infra", kind="invalid-model"), culprit=Culprit("infrastructure"), config="nop")
    out = classify(report(infra), load_baseline(None), today=TODAY)
    assert [f.fingerprint for f in out.findings if issue_worthy(f)] == ["infra"]


def test_an_interrupted_report_marks_nothing_fixed_and_no_entry_stale():
    baseline, _ = parse_baseline(
        "entries:\n- {id: stale, reason: r, fingerprint: dead, kind: optimizer-crash, model: a.onnx}\n",
        "b.yml",
    )
    previous = report(finding("gone"))
    complete = classify(report(finding("n1")), baseline, previous, TODAY)
    assert sorted(f.fingerprint for f in complete.findings if f.status == "fixed") == ["dead", "gone"]
    interrupted = replace(report(finding("n1")), stats={"interrupted": True})
    out = classify(interrupted, baseline, previous, TODAY)
    assert [f.status for f in out.findings] == ["new"]
    health = out.stats.stages["baseline"]
    assert (health["stale"], health["unchecked"]) == ([], ["stale"])
