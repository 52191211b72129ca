from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import pytest

from ditox_ci.errors import ConfigError, UsageError
from ditox_ci.report.model import Culprit, Finding, Report
from ditox_ci.triage.baseline import (
    check_entry_passes,
    init_baseline,
    load_baseline,
    parse_baseline,
    update_baseline,
)
from ditox_ci.triage.classify import classify
from tests.helpers import minimal_report

TODAY = dt.date(2025, 6, 1)


def make(
    fp="f" * 20,
    kind="output-mismatch",
    model="m/a.onnx",
    passes=("fuse_bn_into_conv",),
    message="max abs 2.0",
):
    return Finding(
        fp,
        kind,
        model,
        f"pass:{passes[0]}" if passes else "default",
        Culprit("pass", passes),
        measured={"message": message},
    )


def test_entry_matches_every_given_field():
    baseline, _ = parse_baseline(
        "entries:\n- id: e\n  kind: output-mismatch\n  passes: [fuse_bn_into_conv]\n"
        "  model: 'm/*'\n  message: 'max abs'\n  reason: known\n",
        "b.yml",
    )
    assert baseline.match(make(), TODAY)
    assert not baseline.match(make(kind="optimizer-crash"), TODAY)
    assert not baseline.match(make(model="other.onnx"), TODAY)
    assert not baseline.match(make(passes=("eliminate_identity",)), TODAY)
    assert not baseline.match(make(message="shape"), TODAY)


def test_expired_entry_no_longer_applies():
    baseline, _ = parse_baseline("entries:\n- {id: e, reason: r, expires: 2025-05-31}\n", "b")
    assert baseline.match(make(), TODAY) is None
    assert baseline.expired_match(make(), TODAY).id == "e"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("entries:\n- {id: e}\n", "'reason' is required"),
        ("entries:\n- {id: e, reason: r, kinds: x}\n", "unknown key 'kinds'"),
        ("entries:\n- {id: e, reason: r, kind: crash}\n", "unknown kind 'crash'"),
        ("entries:\n- {id: e, reason: r, kind: output-mismatches}\n", "did you mean 'output-mismatch'"),
        ("entries:\n- {id: e, reason: r, message: '('}\n", "not a valid regex"),
        ("entries:\n- {id: e, reason: r}\n- {id: e, reason: r}\n", "used twice"),
        ("version: 2\n", "version 1"),
        # YAML reads these as a date that is none: exit 70 ("a bug in ditox-ci") before
        ("entries:\n- {id: e, reason: r, expires: 2026-02-30}\n", "holds a value YAML cannot read"),
        # a string or a list that silently matched nothing
        ("include_default: 'false'\nentries: []\n", "'include_default' must be true or false"),
        ("entries:\n- {id: e, reason: r, model: [a, b]}\n", "'model' must be one string"),
        ("entries:\n- {reason: r}\n", "'id' is required; name the entry"),
    ],
)
def test_mistakes_are_config_errors_naming_the_fix(text, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_baseline(text, "b.yml")


def test_shipped_default_knows_split_passes_with_reasons():
    default = load_baseline(None)
    for name in ("split_init", "split_predict"):
        entry = default.match(make(kind="interface-change", passes=(name,)), TODAY)
        assert entry is not None and "split.h" in entry.reason
    assert default.match(make(), TODAY) is None


def test_user_baseline_layers_on_default_unless_opted_out(tmp_path: Path):
    path = tmp_path / "b.yml"
    path.write_text("entries:\n- {id: mine, reason: r, passes: [fuse_bn_into_conv]}\n")
    assert {e.id for e in load_baseline(path).entries} >= {"mine", "split-init-by-design"}
    path.write_text("include_default: false\n" + path.read_text())
    assert [e.id for e in load_baseline(path).entries] == ["mine"]


def test_update_appends_and_keeps_comments(tmp_path: Path):
    path = tmp_path / "b.yml"
    path.write_text(
        "# reviewed by the team\nversion: 1\nentries:\n  - id: old  # keep me\n"
        "    reason: r\n    passes: [eliminate_identity]\n"
    )
    split = make(fp="s" * 20, kind="interface-change", passes=("split_init",))
    result = update_baseline(path, [make(), make(), split], "tracked upstream", None, TODAY)
    assert [e.fingerprint for e in result.added] == ["f" * 20]
    assert result.already_known == 2  # the duplicate and the split_init (shipped default) one
    text = path.read_text()
    assert "# keep me" in text and "# reviewed by the team" in text
    assert load_baseline(path).match(make(), TODAY).reason == "tracked upstream"
    again = update_baseline(path, [make()], "x", None, TODAY)
    assert again.added == () and path.read_text() == text


def test_update_creates_a_new_file(tmp_path: Path):
    path = tmp_path / "new.yml"
    update_baseline(path, [make(model="odd[1]*.onnx")], "why", dt.date(2026, 1, 1), TODAY)
    entry = load_baseline(path).match(make(model="odd[1]*.onnx"), TODAY)
    assert entry is not None and entry.expires == dt.date(2026, 1, 1)
    assert load_baseline(path).match(make(model="odd1x.onnx"), TODAY) is None


def test_a_crash_timeout_or_optimizer_error_is_never_by_design_unless_an_entry_names_it():
    default = load_baseline(None)
    for kind in ("optimizer-crash", "optimizer-timeout", "optimizer-error"):
        assert default.match(make(kind=kind, passes=("split_init",)), TODAY) is None
    named, _ = parse_baseline(
        "entries:\n- {id: e, reason: r, passes: [split_init], kind: optimizer-crash}\n", "b.yml"
    )
    assert named.match(make(kind="optimizer-crash", passes=("split_init",)), TODAY)
    unnamed, _ = parse_baseline("entries:\n- {id: e, reason: r, passes: [split_init]}\n", "b.yml")
    assert unnamed.match(make(kind="output-mismatch", passes=("split_init",)), TODAY)
    assert unnamed.match(make(kind="optimizer-timeout", passes=("split_init",)), TODAY) is None


def test_an_entry_matches_only_when_it_covers_every_culprit_pass():
    baseline, _ = parse_baseline("entries:\n- {id: e, reason: r, passes: [split_init, a]}\n", "b.yml")
    pair = Finding("f" * 20, "output-mismatch", "m", "default", Culprit("interaction", ("a", "split_init")))
    assert baseline.match(pair, TODAY)
    wider = Finding("f" * 20, "output-mismatch", "m", "default", Culprit("interaction", ("split_init", "b")))
    assert baseline.match(wider, TODAY) is None
    infrastructure = Finding("f" * 20, "output-mismatch", "m", "nop", Culprit("infrastructure"))
    assert baseline.match(infrastructure, TODAY) is None
    # the shared code's failure, seen under pass:split_init among others, is not split_init's
    shared = Culprit("shared", (), "single-pass results", 0, ("split_init", "a", "b"))
    assert baseline.match(Finding("f" * 20, "output-mismatch", "m", "pass:split_init", shared), TODAY) is None


def test_classify_calls_a_crash_in_a_by_design_pass_new_and_its_interface_change_known():
    crash = make(fp="c" * 20, kind="optimizer-crash", passes=("split_init",))
    change = make(fp="i" * 20, kind="interface-change", passes=("split_init",))
    report = Report({}, {}, {}, {"index": 0, "count": 1}, (), (crash, change), {}, {})
    statuses = {f.kind: f.status for f in classify(report, load_baseline(None), None).findings}
    assert statuses == {"optimizer-crash": "new", "interface-change": "known"}


def test_an_entry_naming_a_pass_the_optimizer_lacks_is_refused_with_a_suggestion(tmp_path: Path):
    path = tmp_path / "b.yml"
    path.write_text("entries:\n- {id: typo, reason: r, passes: [fuse_bn_into_cnv]}\n")
    baseline = load_baseline(path)
    passes = ("fuse_bn_into_conv", "eliminate_identity", "split_init", "split_predict")
    said = r"typo: onnxoptimizer 0.4.2 has no pass 'fuse_bn_into_cnv'; did you mean 'fuse_bn_into_conv'\?"
    with pytest.raises(ConfigError, match=said) as caught:
        check_entry_passes(baseline, "onnxoptimizer 0.4.2", passes)
    assert caught.value.exit_code == 3
    check_entry_passes(baseline, "opaque-optimizer", ())  # no pass names: nothing to check
    # the shipped entries are not the user's to fix (they name passes of other versions too)
    check_entry_passes(load_baseline(None), "onnxoptimizer 0.4.2", passes[:1])


def test_init_starts_a_baseline_of_todays_findings_and_never_overwrites_one(tmp_path: Path):
    path = tmp_path / ".github" / "ditox-baseline.yml"
    split = make(fp="s" * 20, kind="interface-change", passes=("split_init",))
    result = init_baseline(path, [make(), split], "known at adoption", TODAY)
    assert [e.fingerprint for e in result.added] == ["f" * 20]
    assert load_baseline(path).match(make(), TODAY).reason == "known at adoption"
    with pytest.raises(ConfigError, match="exists already"):
        init_baseline(path, [], "x", TODAY)
    empty = tmp_path / "empty.yml"
    assert init_baseline(empty, [], "x", TODAY).added == ()
    assert parse_baseline(empty.read_text(), "empty")[0].entries == ()


def test_an_interface_change_by_design_does_not_hide_an_invalid_model_written_beside_it():
    """rewrite_input_dtype retypes inputs by design; a default-domain Cast it writes into a model
    without that opset is its own bug, which the entry for the retyping must not accept: an entry
    accepts a finding only when it names each of its verdicts. A checker failure the nop control
    shows alike is not the finding's verdict (it is the round trip's, reported once)."""
    baseline = load_baseline(None)
    retyped = make(kind="interface-change", passes=("rewrite_input_dtype",), message="inputs differ")
    assert baseline.match(retyped, TODAY)
    invalid = replace(retyped, kind="invalid-model", verdicts=("invalid-model", "interface-change"))
    assert baseline.match(invalid, TODAY) is None
    mine, _ = parse_baseline(
        "entries:\n- {id: both, reason: r, kind: [interface-change, invalid-model]}\n"
        "- {id: one, reason: r, kind: invalid-model}\n",
        "b",
    )
    assert mine.match(invalid, TODAY).id == "both"
    assert mine.match(replace(invalid, verdicts=("invalid-model",)), TODAY).id == "both"


@pytest.mark.parametrize("empty", ["entries: []", "entries:"])
def test_update_of_an_empty_list_keeps_comments(tmp_path: Path, empty: str):
    """`baseline init` on a report without findings writes `entries: []` under its header."""
    path = tmp_path / "b.yml"
    path.write_text(f"# reviewed by the team\nversion: 1\n{empty}\n# new ones below\n")
    result = update_baseline(path, [make()], "tracked upstream", None, TODAY)
    assert [e.fingerprint for e in result.added] == ["f" * 20]
    text = path.read_text()
    assert "# reviewed by the team" in text and "# new ones below" in text
    assert load_baseline(path).match(make(), TODAY).reason == "tracked upstream"


def test_update_of_a_file_whose_list_is_not_last_rewrites_it_whole(tmp_path: Path):
    path = tmp_path / "b.yml"
    mine = "- {id: mine, reason: r, passes: [eliminate_identity]}"
    path.write_text(f"entries:\n{mine}\ninclude_default: false\n")
    update_baseline(path, [make()], "tracked upstream", None, TODAY)
    # include_default survived the rewrite: no shipped entry
    assert {e.id for e in load_baseline(path).entries} == {"mine", "accepted-" + "f" * 12}
    assert load_baseline(path).match(make(), TODAY).reason == "tracked upstream"


def test_init_accepts_one_bug_seen_on_several_models_and_each_is_known(tmp_path: Path):
    """Entries are pinned to their model and were all named `accepted-<fingerprint>`: a bug on two
    models wrote one id twice, and `baseline init` refused its own file (exit 3) on any real sweep."""
    path = tmp_path / "b.yml"
    findings = [make(model="m/a.onnx"), make(model="m/b.onnx")]
    result = init_baseline(path, findings, "known at adoption", TODAY)
    assert [e.id for e in result.added] == ["accepted-ffffffffffff", "accepted-ffffffffffff-2"]
    classified = classify(minimal_report(*findings), load_baseline(path), today=TODAY)
    assert {f.status for f in classified.findings} == {"known"}


def test_an_accepted_finding_with_several_verdicts_is_known_by_the_entry_written_for_it(tmp_path: Path):
    """A retyped result the checker refuses too: the entry written for it names both verdicts, so
    it matches the finding (one naming the headline alone never would)."""
    retyped = make(kind="invalid-model", passes=("eliminate_identity",), message="input retyped")
    invalid = replace(retyped, verdicts=("invalid-model", "interface-change"))
    path = tmp_path / "b.yml"
    (entry,) = update_baseline(path, [invalid], "accepted", None, TODAY).added
    assert entry.kinds == ("invalid-model", "interface-change")
    assert load_baseline(path).match(invalid, TODAY) is not None


def test_an_expired_entry_is_renewed_by_update_and_a_past_expiry_refused(tmp_path: Path):
    path = tmp_path / "b.yml"
    update_baseline(path, [make()], "tracked", dt.date(2025, 6, 30), TODAY)
    later = TODAY + dt.timedelta(days=60)
    (renewed,) = update_baseline(path, [make()], "still tracked", dt.date(2025, 12, 31), later).added
    assert renewed.id == "accepted-ffffffffffff-2" and load_baseline(path).match(make(), later) == renewed
    with pytest.raises(UsageError, match="--expires 2025-05-01 is past"):
        update_baseline(path, [make(fp="a" * 20)], "x", dt.date(2025, 5, 1), TODAY)


def test_an_expiry_with_a_time_of_day_expires_on_its_day():
    baseline, _ = parse_baseline("entries:\n- {id: e, reason: r, expires: 2025-06-01 12:00:00}\n", "b")
    assert baseline.match(make(), TODAY) is not None
    assert baseline.match(make(), TODAY + dt.timedelta(days=1)) is None
