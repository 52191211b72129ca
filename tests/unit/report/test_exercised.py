"""The passes a PR adds or changes: their record in report.stats, and the warning for one that
fired on nothing, in the summary and the PR comment alike."""

from __future__ import annotations

from dataclasses import replace

from ditox_ci.github.text import Texts
from ditox_ci.report.exercised import EXERCISED_KEY, ExercisedPass, exercised_passes, never_fired_warnings
from ditox_ci.report.model import Report
from ditox_ci.report.outputs import render_summary
from tests.helpers import minimal_report

FIRES = ExercisedPass("fuse_squeeze_unsqueeze", "new", ("fuse_consecutive_squeezes",), 40, 7)
IDLE = ExercisedPass("eliminate_nop_squeeze", "new", ("eliminate_nop_cast", "eliminate_nop_split"), 40, 0)
TOUCHED = ExercisedPass("fuse_bn_into_conv", "changed", ("fuse_bn_into_conv",), 20, 0)


def _report(*passes: ExercisedPass, coverage: dict[str, int] | None = None) -> Report:
    changed = coverage or {p.name: p.models_changed for p in passes}
    return replace(
        minimal_report(),
        coverage={name: {"models_changed": n, "models_checked": 50} for name, n in changed.items()},
        stats={EXERCISED_KEY: {"models": 40, "passes": [p.to_json() for p in passes]}},
    )


def _comment(report: Report) -> str:
    return Texts(report, "abc", "ditox-report", None).comment("pr")


def test_the_record_round_trips_through_json() -> None:
    for exercised in (FIRES, IDLE, ExercisedPass("p", "new", not_run="the sweep runs no pass:p alone")):
        assert ExercisedPass.from_json(exercised.to_json()) == exercised
    assert exercised_passes(_report(FIRES, IDLE)) == (FIRES, IDLE)
    assert exercised_passes(minimal_report()) == ()


def test_a_pass_that_changed_no_model_warns_and_one_that_fired_does_not() -> None:
    (warning,) = never_fired_warnings(_report(FIRES, IDLE))
    assert warning.startswith("new pass eliminate_nop_squeeze never fired: it changed none of the 40 ")
    assert "(its generators: eliminate_nop_cast, eliminate_nop_split) and no corpus model" in warning
    (changed,) = never_fired_warnings(_report(TOUCHED))
    assert changed.startswith("changed pass fuse_bn_into_conv never fired")


def test_the_corpus_firing_it_is_enough_whatever_the_generated_models_did() -> None:
    # the report's coverage counts the corpus and the generated models of every shard
    report = _report(IDLE, coverage={IDLE.name: 2})
    assert never_fired_warnings(report) == []


def test_a_pass_not_run_says_why() -> None:
    not_run = ExercisedPass("p", "new", not_run="the sweep runs no pass:p alone (add `single` to --configs)")
    (warning,) = never_fired_warnings(_report(not_run, coverage={}))
    assert "it was not exercised: the sweep runs no pass:p alone" in warning


def test_summary_and_comment_list_each_pass_and_warn() -> None:
    report = _report(FIRES, IDLE)
    for text in (render_summary(report), _comment(report)):
        assert "| fuse\\_squeeze\\_unsqueeze | new | 7 of 40 | fuse\\_consecutive\\_squeezes |" in text
        assert "| eliminate\\_nop\\_squeeze | new | 0 of 40 |" in text
        assert "> **Warning:** new pass eliminate\\_nop\\_squeeze never fired" in text
    for text in (render_summary(minimal_report()), _comment(minimal_report())):
        assert "pass the PR adds or changes" not in text
