"""Merging shard reports: refuses what does not fit, unions what does, in any input order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ditox_ci.__main__ import main_inner
from ditox_ci.ci.merge import merge_reports
from ditox_ci.errors import InputError, MergeError
from ditox_ci.report.coverage import coverage_table
from ditox_ci.report.evidence import Triage
from ditox_ci.report.exercised import EXERCISED_KEY, MODEL_IDS_KEY, ExercisedPass, never_fired_warnings
from ditox_ci.report.header import ShardOf
from ditox_ci.report.model import Culprit, Finding, ModelEntry, Report, Verdicts, write_report
from ditox_ci.report.schema import schema_errors
from ditox_ci.report.stats import CHECKED_BY_FAMILY
from ditox_ci.triage.baseline import Baseline, BaselineEntry
from ditox_ci.triage.classify import classify

OPTIMIZER = {
    "name": "onnxoptimizer",
    "version": "0.4.2",
    "passes": ["a", "b"],
    "default_passes": ["a"],
}


def _finding(fingerprint: str, model: str, status: str = "new") -> Finding:
    return Finding(
        fingerprint=fingerprint,
        kind="output-mismatch",
        model=model,
        config="pass:a",
        culprit=Culprit(scope="pass", passes=("a",)),
        status=status,
        repro=f"repro/{fingerprint}/",
    )


def _shard(
    index: int,
    count: int,
    models: list[str],
    findings: Sequence[Finding] = (),
    coverage: dict[str, dict[str, int]] | None = None,
    **stats: Any,
) -> Report:
    return Report(
        tool={"name": "ditox-ci", "version": "0.1.0"},
        optimizer=dict(OPTIMIZER),
        environment={"onnx": "1.23.2"},
        shard={"index": index, "count": count},
        models=tuple(ModelEntry(id=m, source="t", sha256=m * 4, cost_s=1.5) for m in models),
        findings=tuple(findings),
        coverage=coverage or {},
        stats={"wall_s": 1.0, "optimizer_runs": 1, **stats},
    )


def _three_shards() -> list[Report]:
    return [
        _shard(
            0,
            3,
            ["m3", "m0"],
            [_finding("ff", "m3"), _finding("aa", "m0", "known")],
            {"a": {"models_changed": 1, "models_checked": 2}},
            wall_s=4.0,
            optimizer_runs=10,
            screened_steps=7,
        ),
        _shard(
            1,
            3,
            ["m1"],
            [_finding("bb", "m1")],
            {
                "a": {"models_changed": 0, "models_checked": 1},
                "b": {"models_changed": 1, "models_checked": 1},
            },
            wall_s=6.0,
            optimizer_runs=5,
        ),
        _shard(2, 3, [], [], wall_s=0.5, optimizer_runs=0),
    ]


def test_merge_unions_models_and_findings_sorted() -> None:
    merged = merge_reports(_three_shards())
    assert [m.id for m in merged.models] == ["m0", "m1", "m3"]
    assert [(f.fingerprint, f.model) for f in merged.findings] == [
        ("aa", "m0"),
        ("bb", "m1"),
        ("ff", "m3"),
    ]
    assert merged.shard == ShardOf(0, 1)
    assert (merged.count("new"), merged.count("known")) == (2, 1)


def test_merge_sums_coverage_per_pass_and_stats() -> None:
    merged = merge_reports(_three_shards())
    assert merged.coverage == {
        "a": {"models_changed": 1, "models_checked": 3},
        "b": {"models_changed": 1, "models_checked": 1},
    }
    assert merged.stats.optimizer_runs == 15
    # a shard that screened nothing writes no count of it (additive) and adds none
    assert merged.stats.screened_steps == 7
    assert merged.stats.wall_s == 6.0
    assert merged.stats.shard_wall_s == (4.0, 6.0, 0.5)


def test_merge_is_independent_of_argument_order_and_round_trips() -> None:
    shards = _three_shards()
    forward = merge_reports(shards).to_json()
    backward = merge_reports(shards[::-1]).to_json()
    assert json.dumps(forward, sort_keys=True) == json.dumps(backward, sort_keys=True)
    assert Report.from_json(json.loads(json.dumps(forward))).to_json() == forward


def test_missing_shard_is_refused_naming_it() -> None:
    shards = _three_shards()
    with pytest.raises(MergeError, match=r"shard 1/3 missing"):
        merge_reports([shards[0], shards[2]])


def test_duplicated_shard_is_refused() -> None:
    shards = _three_shards()
    with pytest.raises(MergeError, match="more than once"):
        merge_reports([*shards, shards[1]])


def test_mixed_shard_counts_are_refused() -> None:
    shards = _three_shards()
    with pytest.raises(MergeError, match="different shard counts"):
        merge_reports([shards[0], shards[1], _shard(2, 4, [])])


@pytest.mark.parametrize(
    ("key", "value"), [("name", "other"), ("version", "0.3.13"), ("passes", ["a"])]
)
def test_different_optimizer_is_refused(key: str, value: Any) -> None:
    shards = _three_shards()
    shards[2] = replace(shards[2], optimizer={**OPTIMIZER, key: value})
    with pytest.raises(MergeError, match=f"optimizer {key}"):
        merge_reports(shards)


def test_different_schema_is_refused() -> None:
    shards = _three_shards()
    shards[1] = replace(shards[1], schema_version=2)
    with pytest.raises(MergeError, match="schema_version"):
        merge_reports(shards)


def test_model_in_two_shards_is_refused() -> None:
    shards = _three_shards()
    shards[2] = _shard(2, 3, ["m1"])
    with pytest.raises(MergeError, match="'m1'"):
        merge_reports(shards)


def test_no_reports_is_refused() -> None:
    with pytest.raises(MergeError, match="no shard reports"):
        merge_reports([])


def test_fixed_only_when_no_shard_matched_the_baseline_entry() -> None:
    """Shards classified by the real classify: an entry one shard matched is not fixed overall."""
    stale = BaselineEntry("entry-1", "gone", model="*", fingerprint="e1")
    live = BaselineEntry("entry-2", "still there", model="*", fingerprint="c0ffee")
    baseline = Baseline((stale, live))
    shards = [
        classify(_shard(0, 2, ["m0"], []), baseline),
        classify(_shard(1, 2, ["m1"], [_finding("c0ffee", "m1")]), baseline),
    ]
    # shard 0 alone thinks both entries are fixed
    assert {f.evidence["baseline_entry"] for f in shards[0].findings} == {"entry-1", "entry-2"}
    merged = merge_reports(shards)
    assert [(f.fingerprint, f.model, f.status) for f in merged.findings] == [
        ("c0ffee", "m1", "known"),
        ("e1", "*", "fixed"),
    ]


def test_nested_stats_add_up_key_by_key_and_lists_keep_the_first() -> None:
    shards = _three_shards()
    shards[0] = replace(
        shards[0], stats={**shards[0].stats.to_json(), "by": {"a": 1, "b": 2}, "sources": ["x"]}
    )
    shards[1] = replace(
        shards[1], stats={**shards[1].stats.to_json(), "by": {"a": 10, "c": 5}, "sources": ["y"]}
    )
    stats = merge_reports(shards).stats.stages
    assert stats["by"] == {"a": 11, "b": 2, "c": 5}
    assert stats["sources"] == ["x"]


# ---------------------------------------------------------------- models split by config

CONFIGS = ["nop", "default", "pass:a", "pass:b"]


def _nop_finding(also_in: list[str]) -> Finding:
    return Finding(
        fingerprint="n0",
        kind="runtime-error",
        model="m1",
        config="nop",
        culprit=Culprit(scope="infrastructure", method="nop-control"),
        measured={"message": "boom"},
        triage=Triage(also_in=tuple(also_in)),
    )


def _part(configs: tuple[str, ...], cost_s: float, status: str = "ok", reason: str = "") -> ModelEntry:
    return ModelEntry(
        id="m1", source="t", sha256="m1m1", status=status, reason=reason, cost_s=cost_s, configs=configs
    )


def _split(first: ModelEntry, second: ModelEntry) -> list[Report]:
    """m1 split over two shards (each reporting the nop failure), m0 whole in shard 0."""
    shards = [
        _shard(0, 2, ["m0"], [_nop_finding(["pass:b"])], configs=CONFIGS),
        _shard(1, 2, [], [_nop_finding(["default"])], configs=CONFIGS),
    ]
    return [
        replace(shards[0], models=(*shards[0].models, first)),
        replace(shards[1], models=(second,)),
    ]


def test_per_family_coverage_adds_up_and_a_split_model_counts_once_in_the_picture() -> None:
    """m1 (node/nn) split: shard 0 ran pass:b on it, shard 1 pass:a; m0 (simple) whole in shard 0.
    The merged picture's cells and headers count each model once, and the schema takes the keys."""
    split = _split(_part(("nop", "pass:b"), 2.0), _part(("nop", "default", "pass:a"), 3.25))
    changed = [{"a": {"simple": 1}, "b": {"simple": 0, "node/nn": 1}}, {"a": {"node/nn": 0}}]
    checked = [{"a": {"simple": 1}, "b": {"simple": 1, "node/nn": 1}}, {"a": {"node/nn": 1}}]
    shards = [
        replace(shard, stats=replace(shard.stats, coverage_by_family=ran, coverage_checked_by_family=on))
        for shard, ran, on in zip(split, changed, checked, strict=True)
    ]
    merged = merge_reports(shards)
    assert merged.stats.coverage_by_family == {
        "a": {"simple": 1, "node/nn": 0},
        "b": {"simple": 0, "node/nn": 1},
    }
    assert merged.stats.coverage_checked_by_family == {
        "a": {"simple": 1, "node/nn": 1},
        "b": {"simple": 1, "node/nn": 1},
    }
    table = coverage_table(merged)
    assert table.family_models == {"node/nn": 1, "simple": 1}
    assert table.cell("a", "node/nn") == "0/1"

    def stats_errors(data: dict) -> list[str]:
        return [error for error in schema_errors(data, limit=100) if error.startswith("stats")]

    written = merged.to_json()
    assert stats_errors(written) == []
    written["stats"][CHECKED_BY_FAMILY] = {"a": {"simple": "1"}}  # as a crafted file would hold it
    assert stats_errors(written)


def test_a_model_split_over_shards_becomes_one_entry_and_one_nop_finding() -> None:
    merged = merge_reports(_split(_part(("nop", "pass:b"), 2.0), _part(("nop", "default", "pass:a"), 3.25)))
    entries = {entry.id: entry for entry in merged.models}
    assert sorted(entries) == ["m0", "m1"]
    assert entries["m1"] == ModelEntry(id="m1", source="t", sha256="m1m1", cost_s=5.25)
    (nop,) = merged.findings
    assert nop.evidence["also_in"] == ["default", "pass:b"]
    assert (merged.stats.models_total, merged.stats.models_skipped) == (2, 0)


def test_a_skipped_part_makes_the_merged_model_skipped() -> None:
    skipped = _part(("nop", "default", "pass:a"), 0.5, "skipped", "the original model crashed")
    merged = merge_reports(_split(_part(("nop", "pass:b"), 2.0), skipped))
    entry = next(entry for entry in merged.models if entry.id == "m1")
    assert (entry.status, entry.reason, entry.cost_s) == ("skipped", "the original model crashed", 2.5)
    assert merged.stats.models_skipped == 1


def test_a_model_config_swept_by_two_shards_is_refused() -> None:
    shards = _split(_part(("nop", "pass:a", "pass:b"), 2.0), _part(("nop", "default", "pass:a"), 3.0))
    with pytest.raises(MergeError, match=r"'m1' \(config pass:a\) was swept by shard 0 and shard 1"):
        merge_reports(shards)


def test_a_whole_model_and_a_part_of_it_are_refused() -> None:
    whole = ModelEntry(id="m1", source="t", sha256="m1m1", cost_s=4.0)
    with pytest.raises(MergeError, match="different corpora"):
        merge_reports(_split(whole, _part(("nop", "default"), 3.0)))


def test_a_config_no_shard_ran_is_refused() -> None:
    shards = _split(_part(("nop", "pass:b"), 2.0), _part(("nop", "default"), 3.0))
    with pytest.raises(MergeError, match=r"'m1' never ran config\(s\) pass:a"):
        merge_reports(shards)


def test_model_entry_lists_its_configs_only_when_it_is_a_part() -> None:
    part = _part(("nop", "default"), 1.0)
    assert part.to_json()["configs"] == ["nop", "default"]
    assert ModelEntry.from_json(json.loads(json.dumps(part.to_json()))) == part
    whole = ModelEntry(id="m1", source="t", sha256="")
    assert "configs" not in whole.to_json()
    assert ModelEntry.from_json(whole.to_json()) == whole


def test_shards_that_ran_other_configs_are_refused() -> None:
    shards = _split(_part(("nop", "pass:b"), 2.0), _part(("nop", "default", "pass:a"), 3.0))
    shards[1] = replace(shards[1], stats={**shards[1].stats.to_json(), "configs": CONFIGS[:3]})
    with pytest.raises(MergeError, match="other configs"):
        merge_reports(shards)


def test_merge_gates_like_sweep_on_a_new_failure_of_one_shard(tmp_path: Path) -> None:
    """Which kinds gate is tests/unit/report/test_kinds.py's."""
    shards = [
        _shard(0, 2, ["m0"], [replace(_finding("ff", "m0"), kind="output-mismatch")]),
        _shard(1, 2, ["m1"], [_finding("aa", "m1", "known")]),
    ]
    for shard in shards:
        write_report(shard, tmp_path / f"shard-{shard.shard.index}" / "report.json")
    argv = ["merge", str(tmp_path / "shard-0"), str(tmp_path / "shard-1"), "--out", str(tmp_path / "out")]
    assert main_inner(argv, {}) == 1


def test_a_previous_finding_one_part_did_not_see_is_not_fixed_when_another_part_did() -> None:
    """m1 split by config: the part without pass:a calls the previous finding fixed, wrongly."""
    previous = _shard(0, 1, ["m1"], [_finding("f1", "m1")])
    parts = [
        replace(_shard(0, 2, [], configs=CONFIGS), models=(_part(("nop", "default"), 1.0),)),
        replace(
            _shard(1, 2, [], [_finding("f1", "m1")], configs=CONFIGS),
            models=(_part(("nop", "pass:a", "pass:b"), 1.0),),
        ),
    ]
    shards = [classify(part, Baseline(), previous) for part in parts]
    assert [f.status for f in shards[0].findings] == ["fixed"]
    merged = merge_reports(shards)
    assert [(f.fingerprint, f.status) for f in merged.findings] == [("f1", "known")]


def test_an_interrupted_shard_makes_the_merge_incomplete_and_tolerates_its_unfinished_parts() -> None:
    shards = _split(_part(("nop", "pass:b"), 2.0), _part(("nop", "default"), 3.0))
    with pytest.raises(MergeError, match="never ran"):
        merge_reports(shards)
    stopped = {"interrupted": True, "interrupted_by": "SIGTERM", "models_planned": 3}
    shards[1] = replace(shards[1], stats={**shards[1].stats.to_json(), **stopped})
    merged = merge_reports(shards)
    assert (merged.stats.interrupted, merged.stats.interrupted_shards) == (True, (1,))
    entry = next(entry for entry in merged.models if entry.id == "m1")
    assert entry.configs == ("nop", "default", "pass:b")


def test_complete_shards_merge_into_a_report_that_is_not_interrupted() -> None:
    merged = merge_reports(_split(_part(("nop", "pass:b"), 2.0), _part(("nop", "default", "pass:a"), 3.0)))
    assert not merged.stats.interrupted


def test_a_split_model_counts_once_for_the_runner_that_judged_it() -> None:
    first = replace(_part(("nop", "pass:b"), 2.0), runner="reference")
    second = replace(_part(("nop", "default", "pass:a"), 3.0), runner="reference")
    shards = _split(first, second)
    shards[0] = replace(
        shards[0],
        models=(replace(shards[0].models[0], runner="onnxruntime"), *shards[0].models[1:]),
        stats={**shards[0].stats.to_json(), "runners": {"onnxruntime": 1, "reference": 1}},
    )
    shards[1] = replace(shards[1], stats={**shards[1].stats.to_json(), "runners": {"reference": 1}})
    assert merge_reports(shards).stats.runners == {"onnxruntime": 1, "reference": 1}


def test_shards_whose_models_name_no_runner_keep_their_own_runner_counts() -> None:
    """Older reports' models carry no runner: the shards' own counts add up instead of vanishing."""
    shards = _three_shards()
    shards[0] = replace(shards[0], stats={**shards[0].stats.to_json(), "runners": {"onnxruntime": 2}})
    shards[1] = replace(shards[1], stats={**shards[1].stats.to_json(), "runners": {"onnxruntime": 1}})
    assert merge_reports(shards).stats.runners == {"onnxruntime": 3}
    # beside a newer shard, whose models name their runner, an older one still adds its counts
    newer = tuple(replace(entry, runner="reference") for entry in shards[0].models)
    shards[0] = replace(shards[0], models=newer, stats=replace(shards[0].stats, runners={"reference": 2}))
    assert merge_reports(shards).stats.runners == {"reference": 2, "onnxruntime": 1}


def test_the_merge_gates_on_the_skipped_share_and_exits_4_when_no_model_of_the_sweep_ran(
    tmp_path: Path,
) -> None:
    def skipping(shard: Report, *skipped: str) -> Report:
        models = tuple(
            replace(m, status="skipped", reason="r") if m.id in skipped else m for m in shard.models
        )
        return replace(shard, models=models, stats={**shard.stats.to_json(), "max_skipped": 0.25})

    def merge(shards: list[Report], out: str) -> int:
        for shard in shards:
            write_report(shard, tmp_path / f"{out}-{shard.shard.index}" / "report.json")
        folders = [str(tmp_path / f"{out}-{shard.shard.index}") for shard in shards]
        return main_inner(["merge", *folders, "--out", str(tmp_path / out)], {})

    clean = [replace(skipping(s), findings=()) for s in _three_shards()]
    assert merge(clean, "clean") == 0
    assert merge([skipping(clean[0], "m3"), *clean[1:]], "one") == 1  # 1 of 3 skipped > 0.25
    assert merge_reports([skipping(clean[0], "m3"), *clean[1:]]).stats.max_skipped == 0.25
    with pytest.raises(InputError, match="no model ran: all 3 were skipped"):
        merge([skipping(clean[0], "m3", "m0"), skipping(clean[1], "m1"), clean[2]], "none")


def test_a_merge_counts_as_planned_every_shard_s_models_and_what_the_interrupted_one_left() -> None:
    """Shard 0 finished its 2 models; shard 1 finished 1 of the 3 it planned: 5 planned in all,
    not the 3 of the interrupted shard alone (the summary says "3 models that finished (of N)")."""
    shards = [_shard(0, 2, ["m0", "m1"]), _shard(1, 2, ["m2"])]
    stopped = {"interrupted": True, "interrupted_by": "SIGTERM", "models_planned": 3}
    shards[1] = replace(shards[1], stats=stopped)
    merged = merge_reports(shards)
    assert (len(merged.models), merged.stats.models_planned) == (3, 5)


def test_exercised_passes_travel_from_shard_0_and_the_warning_reads_every_shards_coverage() -> None:
    """Shard 0 alone makes the models for the PR's passes; another shard's corpus may fire one."""
    exercised = {
        "models": 40,
        "passes": [
            ExercisedPass("fires_elsewhere", "new", ("g",), 40, 0).to_json(),
            ExercisedPass("idle", "new", ("g",), 40, 0).to_json(),
        ],
    }
    silent = {"models_changed": 0, "models_checked": 41}
    shards = [
        _shard(0, 2, ["m0"], coverage={"fires_elsewhere": silent, "idle": silent}, exercised=exercised),
        _shard(1, 2, ["m1"], coverage={"fires_elsewhere": {"models_changed": 1, "models_checked": 1}}),
    ]
    assert [w.split(" never")[0] for w in never_fired_warnings(shards[0])] == [
        "new pass fires_elsewhere", "new pass idle"
    ]
    merged = merge_reports(shards)
    assert merged.stats.stages[EXERCISED_KEY] == exercised
    assert [w.split(" never")[0] for w in never_fired_warnings(merged)] == ["new pass idle"]


def test_a_model_made_for_an_exercised_pass_is_whole_with_the_configs_it_ran() -> None:
    """Shard 0's models made for a pass the PR changed run the control and that pass alone, not
    every config of the sweep: the merge of a sharded PR check that exercised a pass refused them."""
    made = ModelEntry(
        id="b-0/model.onnx", source="out/exercised", sha256="b0" * 32, configs=("nop", "pass:b")
    )
    exercised = {
        "models": 1,
        MODEL_IDS_KEY: [made.id],
        "passes": [ExercisedPass("b", "changed", ("g",), 1, 1).to_json()],
    }
    shards = [
        _shard(0, 2, ["m0"], configs=CONFIGS, exercised=exercised),
        _shard(1, 2, ["m1"], configs=CONFIGS),
    ]
    shards[0] = replace(shards[0], models=(*shards[0].models, made))
    merged = merge_reports(shards)
    assert [entry for entry in merged.models if entry.id == made.id] == [made]
    assert merged.stats.models_total == 3
    assert merged.stats.stages[EXERCISED_KEY] == exercised
    # a model of the corpus that ran those configs only is still a part whose others are missing
    partial = replace(made, id="m2", source="t")
    shards[0] = replace(shards[0], models=(*shards[0].models[:-1], partial))
    with pytest.raises(MergeError, match=r"'m2' never ran config\(s\) default, pass:a"):
        merge_reports(shards)


def test_shards_of_two_commits_of_one_version_are_refused() -> None:
    """A pull request's build and the release both call themselves 0.4.2: their shards merged into
    one report carrying the first shard's build alone. Installed files may differ between shards
    of one commit (a build in each shard job compiles its own bytecode): those merge."""

    def built(index: int, commit: str, files: str) -> Report:
        shard = _shard(index, 2, [f"m{index}"])
        build = {"version": "0.4.2", "passes_sha256": "p", "files_sha256": files, "git_describe": commit}
        return replace(shard, optimizer=replace(shard.optimizer, build=build))

    refused = r"tested the build \(git_describe\) 'v0\.4\.2-3-gbbbb', shard 0 'v0\.4\.2"
    with pytest.raises(MergeError, match=refused):
        merge_reports([built(0, "v0.4.2", "a"), built(1, "v0.4.2-3-gbbbb", "a")])
    assert len(merge_reports([built(0, "v0.4.2", "a"), built(1, "v0.4.2", "b")]).models) == 2


def test_a_shard_whose_build_description_is_gone_or_judged_by_another_runtime_is_refused() -> None:
    """A shard whose `build` was dropped, or one judged by another onnx or ONNX Runtime (its
    verdicts are another oracle's), merged as if it were part of the same sweep."""
    first = _shard(0, 2, ["m0"])
    build = {"version": "0.4.2", "passes_sha256": "p", "files_sha256": "a", "git_describe": "v0.4.2"}
    first = replace(first, optimizer=replace(first.optimizer, build=build))
    second = _shard(1, 2, ["m1"])
    with pytest.raises(MergeError, match=r"shard 1 tested the build \(version\) '', shard 0 '0\.4\.2'"):
        merge_reports([first, replace(second, optimizer=replace(second.optimizer, build=None))])
    with_build = replace(second, optimizer=replace(second.optimizer, build=build))
    other_runtime = replace(with_build, environment=replace(with_build.environment, onnxruntime="1.20.0"))
    with pytest.raises(MergeError, match=r"judged by onnxruntime '1\.20\.0'"):
        merge_reports([first, other_runtime])
    assert len(merge_reports([first, with_build]).models) == 2


def test_a_split_models_reusable_verdicts_are_its_parts_together_and_the_schema_takes_them() -> None:
    judged_as = "c" * 64
    # each part ran the control, whose bytes every config but each part's `own` gave
    control = "e" * 64
    stored = Verdicts(judged_as, ("a" * 64,), control=control, own=("pass:b",), results={"pass:b": "a" * 64})
    first = replace(_part(("nop", "pass:b"), 2.0), verdicts=stored, reused=2)
    # the second part ran the original (its draw) and has a failure to reuse
    failure = {"kind": "interface-change", "message": "retyped", "evidence": {}}
    ran = {"samples": 1}, {"runner": "reference"}
    own_result = ("default",), {"default": "f" * 64}
    drawn = Verdicts(judged_as, ("b" * 64, "a" * 64), {"f" * 64: failure}, *ran, control, *own_result)
    second = replace(_part(("nop", "default", "pass:a"), 3.0), verdicts=drawn)
    shards = [
        replace(shard, stats={**shard.stats.to_json(), "reused_verdicts": 2 - i, "verdict_key": "d" * 64})
        for i, shard in enumerate(_split(first, second))
    ]
    merged = merge_reports(shards)
    entry = next(entry for entry in merged.models if entry.id == "m1")
    both, own = ("a" * 64, "b" * 64), ("pass:b", "default")
    results = {"pass:b": "a" * 64, "default": "f" * 64}
    assert entry.verdicts == Verdicts(judged_as, both, {"f" * 64: failure}, *ran, control, own, results)
    assert entry.reused == 2
    assert (merged.stats.reused_verdicts, merged.stats.verdict_key) == (3, "d" * 64)
    assert ModelEntry.from_json(entry.to_json()) == entry
    def verdicts_errors(report: Report) -> list[str]:
        return [error for error in schema_errors(report.to_json(), limit=100) if "verdicts" in error]

    assert verdicts_errors(merged) == []
    unhashed = replace(entry, verdicts=Verdicts("not a digest", ()))
    assert verdicts_errors(replace(merged, models=(unhashed,)))
    result_unhashed = replace(entry, verdicts=replace(entry.verdicts, results={"default": "not a digest"}))
    assert verdicts_errors(replace(merged, models=(result_unhashed,)))
    # parts whose controls gave other bytes: no config is known to have given the control's
    moved = replace(second, verdicts=replace(drawn, control="9" * 64))
    (apart,) = [e for e in merge_reports(_split(first, moved)).models if e.id == "m1"]
    assert apart.verdicts is not None
    assert (apart.verdicts.control, apart.verdicts.own, apart.verdicts.results) == ("", (), {})
    # shards judged by different settings: nothing of the merge may be reused
    other = [replace(shards[0], stats={**shards[0].stats.to_json(), "verdict_key": "e" * 64}), shards[1]]
    assert not merge_reports(other).stats.verdict_key
