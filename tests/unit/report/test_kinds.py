"""The finding kinds' one table, and the one gate: what the schema, SARIF, the baseline and the docs
say about each kind is the table's, and every consumer that decides "does this fail" agrees with
`closes_gate` for every kind and status (the one place a warning or a flaky finding is shown not
to gate)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ditox_ci.__main__ import main_inner
from ditox_ci.ci.action import gate
from ditox_ci.ci.merge import merge_reports
from ditox_ci.engine.outcome import Outcome
from ditox_ci.report.bugs import bug_context
from ditox_ci.report.junit import junit_xml
from ditox_ci.report.kinds import (
    FINDING_KINDS,
    NAMED_ONLY_KINDS,
    TIERS,
    FindingKind,
    Status,
    closes_gate,
    kind_gates,
    markdown_table,
    tier_table,
)
from ditox_ci.report.model import STATUSES, Culprit, Finding, ModelEntry, Report, write_report
from ditox_ci.report.sarif import sarif_log
from ditox_ci.report.schema import report_schema
from ditox_ci.triage.baseline import BaselineEntry, accepted_entry
from ditox_ci.triage.classify import issue_worthy
from ditox_ci.triage.reproduce import gating
from tests.helpers import ROOT


def _report(
    kind: str, status: str, tier: str | None = None, gate_tiers: tuple[str, ...] | None = None
) -> Report:
    finding = Finding(
        fingerprint="0123456789abcdef",
        kind=kind,
        model="m",
        config="pass:eliminate_identity",
        culprit=Culprit("pass", ("eliminate_identity",), "single", 1),
        status=status,
        measured={"message": "it differs"},
        tier=tier,
    )
    tiers = {"gate_tiers": list(gate_tiers)} if gate_tiers is not None else {}
    return Report(
        tool={"name": "ditox-ci", "version": "0.1.0"},
        optimizer={"name": "onnxoptimizer", "version": "0.4.2", "passes": ["eliminate_identity"]},
        environment={},
        shard={"index": 0, "count": 1},
        models=(ModelEntry("m", "onnx-node", "0" * 64),),
        findings=(finding,),
        coverage={},
        stats={"interrupted": False, "configs": ["pass:eliminate_identity"], **tiers},
    )


def test_the_schema_lists_the_kinds_of_the_table_in_its_order() -> None:
    finding = report_schema()["$defs"]["finding"]["properties"]
    assert tuple(finding["kind"]["enum"]) == FINDING_KINDS == tuple(kind.value for kind in FindingKind)


def test_the_schema_lists_the_tiers_of_the_table_in_its_order() -> None:
    schema = report_schema()
    assert tuple(schema["$defs"]["finding"]["properties"]["tier"]["enum"]) == TIERS
    gate_tiers = schema["properties"]["stats"]["properties"]["gate_tiers"]["items"]
    assert gate_tiers == {"$ref": "#/$defs/finding/properties/tier"}


def test_the_docs_hold_the_table_as_it_is_generated() -> None:
    """`python -m ditox_ci.report.kinds` prints the table docs/cli.md must hold."""
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = docs[docs.index("### Finding kinds") :]
    assert markdown_table() in section.split("\n\n", 2)[1] + "\n"
    assert tier_table() in docs[docs.index("### Tiers") :]


def test_sarif_has_one_rule_per_kind_with_its_text_and_level() -> None:
    rules = sarif_log(_report("warning", "new"))["runs"][0]["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == [f"ditox-ci/{kind.value}" for kind in FindingKind]
    for rule, kind in zip(rules, FindingKind, strict=True):
        assert rule["shortDescription"]["text"] == kind.sarif_rule
        assert rule["defaultConfiguration"]["level"] == ("error" if kind.gates else "note")


@pytest.mark.parametrize("kind", FINDING_KINDS)
def test_a_baseline_entry_naming_no_kind_accepts_exactly_the_kinds_accepted_by_default(kind: str) -> None:
    finding = _report(kind, "new").findings[0]
    kindless = BaselineEntry(id="any", reason="documented", passes=("eliminate_identity",))
    named = replace(kindless, kinds=(kind,))
    assert kindless.matches(finding) == (kind not in NAMED_ONLY_KINDS)
    assert named.matches(finding)
    assert NAMED_ONLY_KINDS == ("optimizer-crash", "optimizer-timeout", "optimizer-error")


def test_only_new_findings_of_a_kind_that_gates_close_the_gate() -> None:
    assert [kind for kind in FINDING_KINDS if not kind_gates(kind)] == ["missed-optimization", "warning"]
    assert [status for status in STATUSES if closes_gate("output-mismatch", status)] == ["new"]
    assert not closes_gate("warning", "new") and not closes_gate("output-mismatch", "flaky")
    # a kind a newer writer added is a failure until this version knows better
    assert closes_gate("optimizer-ate-the-model", "new")
    # a finding gates by every verdict: a values verdict of a tier left out does not hide a crash
    assert not closes_gate(("output-mismatch",), "new", tier="ties", gate_tiers=("wrong-result",))
    assert closes_gate(("invalid-model", "output-mismatch"), "new", tier="ties", gate_tiers=("wrong-result",))
    assert closes_gate(("output-mismatch",), "new", tier="a-newer-tier", gate_tiers=("wrong-result",))
    # a missed optimization gates only when asked (`--gate-missed`: Report.gate_tiers names it)
    assert not closes_gate("missed-optimization", "new")
    assert closes_gate("missed-optimization", "new", gate_tiers=(*TIERS, "missed-optimization"))
    asked = replace(_report("missed-optimization", "new"), stats={"gate_missed": True})
    assert not _report("missed-optimization", "new").closes_gate() and asked.closes_gate()


def _junit_failures(report: Report, tmp: Path) -> bool:
    return 'failures="1"' in junit_xml(report)


def _merge_exit(report: Report, tmp: Path) -> bool:
    write_report(report, tmp / "shard" / "report.json")
    return main_inner(["merge", str(tmp / "shard"), "--out", str(tmp / "out")], {}) == 1


# every place that decides whether a finding fails something, as "did it fail"
CONSUMERS: dict[str, Callable[[Report, Path], bool]] = {
    "report.failures (sweep and merge exit)": lambda report, _: bool(report.failures()),
    "merge exit code": _merge_exit,
    "merged report": lambda report, _: bool(merge_reports([report]).failures()),
    "Action fail_on new": lambda report, _: gate(report, "new") == 1,
    "JUnit failures": _junit_failures,
    "SARIF level": lambda report, _: sarif_log(report)["runs"][0]["results"][0]["level"] == "error"
    if report.findings[0].status == "new"
    else False,
    "comment's new failures": lambda report, _: bool(bug_context(report)["new_failures"]),
    "re-run as could-gate": lambda report, _: gating(
        report.findings[0], lambda finding: False, report.gate_tiers
    ),
    "worker outcome failed": lambda report, _: report.findings[0].status == "new"
    and Outcome(report.findings[0].kind).failed,
    "issue worthy": lambda report, _: (
        report.findings[0].status == "new" and issue_worthy(report.findings[0], report.gate_tiers)
    ),
}


@pytest.mark.parametrize("consumer", [name for name in CONSUMERS if name != "worker outcome failed"])
@pytest.mark.parametrize("gate_tiers", [TIERS, ("wrong-result",), ("precision", "ties")])
@pytest.mark.parametrize("tier", TIERS)
def test_every_consumer_gates_a_values_bug_by_its_tier_as_the_report_says(
    consumer: str, tier: str, gate_tiers: tuple[str, ...], tmp_path: Path
) -> None:
    """`--gate-tiers` (recorded in the report's stats) decides for every reader of the report: a
    values bug of a tier it leaves out is shown but fails nothing."""
    report = _report("output-mismatch", "new", tier, gate_tiers)
    assert CONSUMERS[consumer](report, tmp_path) == (tier in gate_tiers)


@pytest.mark.parametrize("consumer", [name for name in CONSUMERS if name != "worker outcome failed"])
@pytest.mark.parametrize("asked", [False, True])
def test_every_consumer_gates_a_missed_optimization_only_when_the_report_asks(
    consumer: str, asked: bool, tmp_path: Path
) -> None:
    """`--gate-missed` (recorded in the report's stats) decides for every reader of the report."""
    report = _report("missed-optimization", "new")
    report = replace(report, stats={**report.stats.to_json(), "gate_missed": True}) if asked else report
    assert CONSUMERS[consumer](report, tmp_path) == asked


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("kind", FINDING_KINDS)
def test_every_consumer_gates_as_the_table_says(
    consumer: str, kind: str, status: str, tmp_path: Path
) -> None:
    report = _report(kind, status)
    assert CONSUMERS[consumer](report, tmp_path) == closes_gate(kind, status)


def test_what_differs_per_kind_is_read_from_the_member_not_a_name_in_a_template() -> None:
    """A template asks `kind_of(f.kind).crashes_process`, never `f.kind == "optimizer-crash"`: a
    renamed or added kind then needs no template edited."""
    compared = [
        f"{path.name}:{number}"
        for path in sorted((ROOT / "templates").glob("*.j2"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"kind\s*[!=]=\s*['\"]", line)
    ]
    assert compared == []
    per_kind = ("crashes_process", "hangs", "judged_by_checker", "compares_values", "compares_builds")
    assert [[k.value for k in FindingKind if getattr(k, name)] for name in per_kind] == [
        ["optimizer-crash"],
        ["optimizer-timeout"],
        ["invalid-model"],
        ["output-mismatch"],
        ["missed-optimization"],
    ]


def test_a_finding_holds_its_kind_verdicts_and_status_as_members_written_as_names(tmp_path: Path) -> None:
    """Whatever a caller passes their names as, the fields are the types, and report.json, the
    baseline's YAML, templates and messages write each as its plain name."""
    report = _report("output-mismatch", "known", tier="precision")
    finding = report.findings[0]
    assert finding.kind is FindingKind.OUTPUT_MISMATCH and finding.verdicts == (FindingKind.OUTPUT_MISMATCH,)
    assert finding.status is Status.KNOWN and finding.kind.compares_values
    assert f"{finding.kind}: {finding.status}" == "output-mismatch: known"
    path = tmp_path / "report.json"
    write_report(report, path)
    data = json.loads(path.read_text())
    assert (data["findings"][0]["kind"], data["findings"][0]["status"]) == ("output-mismatch", "known")
    read = Report.from_json(data).findings[0]
    assert read.kind is FindingKind.OUTPUT_MISMATCH and read.status is Status.KNOWN
    entry = accepted_entry(finding, "a documented limitation", None)
    assert "kind: output-mismatch" in yaml.safe_dump(entry.to_yaml())
    new = replace(report, findings=(replace(finding, status="new"),))
    assert new.findings[0].status is Status.NEW
    assert '"ruleId": "ditox-ci/output-mismatch"' in json.dumps(sarif_log(new))


def test_a_kind_a_newer_writer_added_is_kept_by_name_gates_and_ranks_first() -> None:
    finding = Finding.from_json(
        _report("invalid-model", "new").findings[0].to_json()
        | {"kind": "optimizer-ate-the-model", "verdicts": ["invalid-model", "optimizer-ate-the-model"]}
    )
    assert not finding.kind.known and FindingKind.INVALID_MODEL.known
    assert finding.kind == finding.to_json()["kind"] == "optimizer-ate-the-model"
    assert finding.verdicts == ("optimizer-ate-the-model", "invalid-model")  # most severe first
    assert finding.closes_gate() and kind_gates(finding.kind)
    with pytest.raises(ValueError):
        Status("maybe")
