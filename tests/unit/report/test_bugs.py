"""Bug-centric texts: summary, PR comment and check lead with bugs (fingerprints), count known
findings per reason, and stay within GitHub's sizes whatever the corpus."""

from __future__ import annotations

from dataclasses import replace

from ditox_ci.github.text import (
    BODY_LIMIT,
    CHECK_SUMMARY_LIMIT,
    UNVERIFIED,
    Texts,
    last_seen_block,
    with_last_seen,
)
from ditox_ci.report.bugs import group_bugs, headline, known_groups
from ditox_ci.report.evidence import KnownBy, KnownSource, Pinpointing, Reduction, ReductionEnd, Triage
from ditox_ci.report.model import Culprit, Finding, ModelEntry, Report
from ditox_ci.report.outputs import SUMMARY_LIMIT, render_summary
from ditox_ci.triage.baseline import parse_baseline
from ditox_ci.triage.classify import classify


def _finding(fingerprint: str, model: str, config: str, kind: str = "output-mismatch",
             status: str = "new", passes: tuple[str, ...] = ("fuse_pad_into_pool",),
             reduction: Reduction | None = None, standalone: dict | None = None,
             known_by: KnownBy | None = None, message: str | None = None) -> Finding:
    return Finding(
        fingerprint=fingerprint,
        kind=kind,
        model=model,
        config=config,
        culprit=Culprit("pass", passes, "bisect", 3),
        status=status,
        measured={"message": f"{kind} on {model}" if message is None else message},
        repro=f"repro/{fingerprint}/",
        triage=Triage(known_by=known_by),
        pinpointing=Pinpointing(reduction=reduction, standalone=standalone),
    )


def _report(findings: list[Finding], models: int, stale: tuple[str, ...] = ()) -> Report:
    return Report(
        tool={"name": "ditox-ci", "version": "0.1.0"},
        optimizer={"name": "onnxoptimizer", "version": "0.4.2", "passes": [], "default_passes": []},
        environment={"onnx": "1.23.2", "onnxruntime": "1.32.0", "python": "3.11"},
        shard={"index": 0, "count": 1},
        models=tuple(ModelEntry(f"m{i}", "onnx-node", "0" * 64) for i in range(models)),
        findings=tuple(findings),
        coverage={},
        stats={"baseline": {"stale": list(stale), "expired": [], "matched": {}}},
    )


def _three_bugs_on_four_models() -> list[Finding]:
    reduction = Reduction(nodes_before=40, nodes_after=2, checks=0, reason=ReductionEnd.MINIMAL)
    bug_a = [_finding("a" * 20, f"m{i}", c, reduction=reduction) for i in range(4)
             for c in ("default", "fixed-point", "pass:fuse_pad_into_pool")][:9]
    bug_b = [_finding("b" * 20, "m0", "default", kind="optimizer-crash", passes=("fuse_bn_into_conv",)),
             _finding("b" * 20, "m1", "default", kind="optimizer-crash", passes=("fuse_bn_into_conv",))]
    bug_c = [_finding("c" * 20, "m2", "default", kind="runtime-load-error"),
             _finding("c" * 20, "m3", "default", kind="runtime-load-error")]
    warning = [_finding("d" * 20, "m3", "nop", kind="warning")]
    return bug_a + bug_b + bug_c + warning


def _known(count: int, entry: str) -> list[Finding]:
    return [
        _finding("e" * 19 + entry[0], f"known-model-{i}", "pass:split_init", kind="interface-change",
                 status="known", passes=("split_init",), known_by=KnownBy(KnownSource.BASELINE, entry))
        for i in range(count)
    ]


def test_headline_counts_bugs_with_their_findings_and_models():
    bugs = group_bugs(_three_bugs_on_four_models())
    assert [b.fingerprint[0] for b in bugs] == ["a", "b", "c", "d"]
    assert headline(bugs, "new") == (
        "3 new bugs (13 findings on 4 models), 1 new warning (1 finding on 1 model)"
    )
    assert bugs[0].reduced == (40, 2) and len(bugs[0].models) == 3


def test_a_bug_that_did_not_fail_again_is_called_nondeterministic_not_reduced():
    """Reduction first runs the culprit again on the model as found; when the failure does not
    come back (an optimizer reading memory it does not own), the texts say so."""
    flaky = Reduction(nodes_before=1, nodes_after=1, checks=1, reason=ReductionEnd.NOT_REPRODUCIBLE)
    [bug] = group_bugs([_finding("f" * 20, "m0", "default", reduction=flaky)])
    assert bug.reduced is None and bug.not_reproducible
    row = next(line for line in render_summary(_report([*bug.findings], 1)).splitlines() if "f" * 20 in line)
    assert "did not fail again when re-run: nondeterministic" in row and "1 of 1 nodes" not in row


def test_known_findings_are_counted_per_baseline_entry():
    groups = known_groups(_known(30, "split_init") + _known(5, "rewrite_input_dtype"))
    assert [(g.baseline_entry, g.findings, g.bugs, g.models) for g in groups] == [
        ("split_init", 30, 1, 30),
        ("rewrite_input_dtype", 5, 1, 5),
    ]


def test_summary_comment_and_check_lead_with_bugs():
    report = _report(_three_bugs_on_four_models() + _known(30, "split_init"), 4, stale=("old_entry",))
    summary = render_summary(report)
    texts = Texts(report, "f" * 40, "ditox-report", None)
    comment, check = texts.comment("k"), texts.check_summary()
    for text in (summary, comment, check):
        assert "3 new bugs (13 findings on 4 models)" in text
        assert "baseline entry **split\\_init**" in text and "old\\_entry" in text
        # first few models a bug hit, then how many more; known findings are never listed one by one
        hits = "m0 \\[default\\], m0 \\[fixed-point\\], m0 \\[pass:fuse\\_pad\\_into\\_pool\\] and 6 more"
        assert hits in text
        assert "known-model-" not in text
        assert "2 of 40 nodes" in text
    assert comment.count("#### ") == 4  # one section per new fingerprint, not per finding
    # the warning comes after the bugs, under a heading that names it
    assert "### New bugs and warnings\n" in comment
    assert comment.index("#### 4. warning") > comment.index("#### 3. ")
    # one tally, bugs first, in every text: the warning is not a fourth bug
    tally = "3 new bugs (13 findings on 4 models), 1 new warning (1 finding on 1 model)"
    assert f"## ditox-ci: {tally}\n" in comment
    assert f"**{tally}** · 30 known findings · 0 fixed bugs" in summary
    assert f"**{tally}** · 30 known findings · 0 fixed bugs · 4 models" in check
    # the check says what the first bug is in words before how to reproduce it
    assert "The first bug: Under `fuse_pad_into_pool`, the optimized model computes different values" in check


def test_texts_stay_within_limits_whatever_the_corpus():
    # 30,000 findings of 6,000 distinct bugs, with long model names and messages
    findings = [
        _finding(f"{i:020x}", f"models/{'deep/' * 20}model-{i}-{j}.onnx", "default",
                 message="x" * 3000)
        for i in range(6000) for j in range(5)
    ]
    report = _report(findings + _known(20000, "split_init"), 30000)
    summary = render_summary(report)
    texts = Texts(report, "f" * 40, "ditox-report", None)
    comment, check = texts.comment("k"), texts.check_summary()
    assert len(summary.encode()) <= SUMMARY_LIMIT <= 1024 * 1024
    assert len(comment) <= BODY_LIMIT and len(check) <= CHECK_SUMMARY_LIMIT
    # an untrusted report's note is part of what is fitted, not added on top
    untrusted = replace(texts, untrusted=True)
    comment, check = untrusted.comment("k"), untrusted.check_summary()
    assert len(comment) <= BODY_LIMIT and len(check) <= CHECK_SUMMARY_LIMIT
    assert comment.splitlines()[1] == UNVERIFIED and check.startswith(UNVERIFIED)
    assert "6000 new bugs (30000 findings on 30000 models)" in summary
    for text in (summary, comment, check):
        assert "more" in text and ("report.json" in text or "artifact" in text)


def test_an_issue_lists_each_other_model_once_and_not_its_own():
    findings = [_finding("a" * 20, model, config) for model, config in
                (("m0", "default"), ("m0", "fixed-point"), ("m1", "default"), ("m1", "fixed-point"))]
    issue = Texts(_report(findings, 2), "f" * 40, "ditox-report", None).issue(
        findings[0], others=[f.model for f in findings[1:]]
    )
    seen_on = next(line for line in issue.splitlines() if line.startswith("| Seen on |"))
    assert "m0 \\[default\\]; also m1 with" in seen_on and seen_on.count("m1") == 1


def test_an_issue_too_long_for_its_standalone_repro_keeps_the_artifacts_steps_instead():
    record = {"model": "<ir_version: 8>\n" + "x" * BODY_LIMIT, "inputs": {}, "passes": ["fuse_pad_into_pool"],
              "fixed_point": False, "rtol": 1e-3, "atol": 1e-4, "versions": {}, "reproduces": True}
    finding = _finding("a" * 20, "m0", "default", standalone=record)
    small = _finding("b" * 20, "m1", "default", standalone={**record, "model": "<ir_version: 8>\nsmall"})
    texts = Texts(_report([finding, small], 2), "f" * 40, "ditox-report", None)
    # just short enough for the body alone, too long with the last-seen note publish appends
    near = {**record, "model": "<ir_version: 8>\n" + "x" * 28_000}  # an issue of about 60,000
    families = {f"family{i}" + "x" * 70 for i in range(100)}
    note = last_seen_block("f" * 40, "2026-11-23", 100, families)
    for standalone in (record, near):
        alone = _finding("a" * 20, "m0", "default", standalone=standalone)
        issue = with_last_seen(Texts(_report([alone], 1), "f" * 40, "ditox-report", None).issue(alone), note)
        assert len(issue) <= BODY_LIMIT and "truncated" not in issue
    issue = texts.issue(finding)
    assert "Reproduce from this issue alone" not in issue
    assert "cd repro/" + "a" * 20 in issue and "<summary>Environment</summary>" in issue
    assert "Reproduce from this issue alone" in texts.issue(small)


def test_a_comment_with_only_a_warning_does_not_list_it_under_new_bugs():
    report = _report([_finding("w" * 20, "m0", "default", kind="warning")], 1)
    comment = Texts(report, "f" * 40, "ditox-report", None).comment("k")
    assert "## ditox-ci: no new bugs; 1 new warning" in comment
    assert "### New warnings\n" in comment and "### New bugs" not in comment


def test_the_summary_points_at_fuzz_for_the_optimizer_of_its_silent_passes():
    """fuzz's generators were onnxoptimizer's passes only; now each built-in optimizer's passes have
    them, so the pointer names the optimizer, and a pass that cannot fire here is not called silent."""
    for name, silent_pass in (("onnxoptimizer", "fuse_bn_into_conv"), ("onnxslim", "FusionConvBN")):
        report = _report([], 2)
        silent = {silent_pass: {"models_changed": 0, "models_checked": 2}}
        report = replace(report, optimizer=replace(report.optimizer, name=name), coverage=silent)
        summary = render_summary(report)
        assert "**Never fired (1):**" in summary
        assert f"`ditox-ci fuzz --optimizer {name}`" in summary
    inert = {"SwiGluFusion": "registered for the CUDA execution provider only"}
    report = _report([], 2)
    report = replace(
        report,
        optimizer=replace(report.optimizer, name="onnxruntime-extended", cannot_fire=tuple(inert.items())),
        coverage={"SwiGluFusion": {"models_changed": 0, "models_checked": 2},
                  "ConvBNFusion": {"models_changed": 1, "models_checked": 2}},
    )
    summary = render_summary(report)
    assert "Never fired" not in summary
    assert "Cannot fire here (1)" in summary and "`SwiGluFusion`: registered for the CUDA" in summary
    assert "1 of 1 passes checked changed a model (100%); 1 more cannot fire here." in summary


def test_a_baseline_entry_that_matches_nothing_any_more_reads_as_such_among_the_fixed():
    """Its fixed record has no model, config nor culprit: the texts said "warning in unknown …
    (was seen on * [])"."""
    entry = f"- {{id: old-accept, reason: r, fingerprint: {'a' * 20}}}"
    baseline, _ = parse_baseline(f"entries:\n{entry}\n", "b.yml")
    report = classify(_report([], 1), baseline)
    assert [f.triage.stale_entry for f in report.findings] == ["old-accept"]
    comment = Texts(report, "f" * 40, "ditox-report", None).comment("k")
    for text in (comment, render_summary(report)):
        assert "baseline entry old-accept" in text and "matches nothing any more" in text
        assert "unknown" not in text and "\\* \\[\\]" not in text


def test_the_no_bundle_hint_gives_a_command_the_sweep_takes():
    """A `--passes` config is labelled passes:a,b, which --configs splits at the comma."""
    cases = (("pass:split_init", "--configs pass:split_init"), ("passes:a,b", "--configs nop --passes a,b"))
    for config, flags in cases:
        finding = replace(_finding("n" * 20, "m0", config, kind="warning"), repro="")
        comment = Texts(_report([finding], 1), "f" * 40, "ditox-report", None).comment("k")
        assert f"`ditox-ci sweep --optimizer onnxoptimizer {flags} --models <that model>`" in comment


def test_the_summary_says_a_shards_skipped_share_is_the_merges_to_judge():
    report = _report([], 2)
    skipped = (replace(report.models[0], status="skipped", reason="r"), report.models[1])
    stats = {**report.stats.to_json(), "max_skipped": 0.2}
    whole = replace(report, models=skipped, stats=stats)
    shard = replace(whole, shard={"index": 1, "count": 4})
    assert "50.0% of the models skipped (**more than --max-skipped 0.2**)" in render_summary(whole)
    said = "50.0% of the models skipped (more than --max-skipped 0.2 in this shard: the merge judges"
    assert said in render_summary(shard) and "**more than" not in render_summary(shard)


def test_the_summary_names_a_shard_only_where_there_are_shards():
    """Every unsharded sweep and every merge read "shard 0 of 1"."""

    def rows(report: Report) -> list[str]:
        return [line for line in render_summary(report).splitlines() if line.startswith("| shard")]

    whole = _report([], 2)
    assert rows(whole) == []
    assert rows(replace(whole, shard={"index": 2, "count": 4})) == ["| shard | 2 of 4 |"]
    merged = replace(whole, stats={**whole.stats.to_json(), "shard_wall_s": [1.0, 2.0, 3.0]})
    assert rows(merged) == ["| shards | 3, merged |"]


def test_the_summary_names_coverage_svg_without_a_link_that_leads_nowhere():
    """In the step summary a relative link resolves against the run's page: a 404."""
    coverage = {"eliminate_identity": {"models_changed": 1, "models_checked": 2}}
    report = replace(_report([], 2), coverage=coverage)
    summary = render_summary(report)
    assert "`coverage.svg` in the report folder" in summary and "](coverage.svg)" not in summary


def test_known_findings_are_called_blocking_only_where_fail_on_any_counts_them():
    """Under fail_on: any a known warning still passes (warnings never gate): it is not blocking."""
    for kind, fail_on, blocking in (
        ("output-mismatch", "any", True),
        ("output-mismatch", "new", False),
        ("warning", "any", False),
    ):
        known = _finding("a" * 20, "m0", "default", kind=kind, status="known")
        comment = Texts(_report([known], 1), "f" * 40, "ditox-report", None, fail_on=fail_on).comment("k")
        assert ("— blocking (`fail_on: any`)" in comment) is blocking, (kind, fail_on)
        assert ("— not blocking" in comment) is not blocking


def test_an_issue_without_numbers_has_no_empty_table_of_them():
    """An optimizer's error has a message and nothing measured: a table header with no rows."""
    raised = _finding("e" * 20, "m0", "default", kind="optimizer-error", message="RuntimeError: replaceInput")
    raised = replace(raised, measured={"message": "RuntimeError: replaceInput"})
    issue = Texts(_report([raised], 1), "f" * 40, "ditox-report", None).issue(raised)
    assert "RuntimeError: replaceInput" in issue and "| measured |" not in issue


def test_a_model_no_node_of_which_could_go_reads_as_not_reduced():
    """"Reduced to 1 of 1 nodes" beside a README that says "not reduced"."""
    reduction = Reduction(1, 1, 3, ReductionEnd.MINIMAL)
    found = _finding("r" * 20, "m0", "default", reduction=reduction)
    issue = Texts(_report([found], 1), "f" * 40, "ditox-report", None).issue(found)
    assert "| Reduced to | not reduced (1 node) |" in issue and "1 of 1 nodes" not in issue


def test_the_summary_counts_the_models_run_and_skipped_as_the_gate_does():
    report = _report([], 4)
    skipped = replace(report.models[1], status="skipped", reason="unreadable model: truncated")
    report = replace(report, models=(report.models[0], skipped, *report.models[2:]))
    (row,) = [line for line in render_summary(report).splitlines() if line.startswith("| models run")]
    assert row == "| models run | 3 of 4 (1 skipped) |"
    assert (report.skips().models, report.skips().skipped) == (4, 1)
