"""Verdicts reused by content (engine/reuse.py), with the real onnxoptimizer and ONNX Runtime: a PR
check of a head wheel that changes one pass (tests/fakes/wheels.py), fed the base build's report,
judges only the results the changed pass made and gives the verdicts a run without reuse gives."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from wheels import changed_pass_checkout, changed_pass_onnxoptimizer

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.plan import build_steps
from ditox_ci.engine.pool import Job, WorkerConfig, WorkerPool
from ditox_ci.engine.reuse import failed_outcomes, passed_digests, reuse_table
from ditox_ci.optimizers import load_optimizer
from ditox_ci.report.model import Verdicts
from tests import helpers
from tests.helpers import FAKES
from tests.integration.sequence_models import plain_model

# split_init fails on both models (a known limitation): a failure is reused too
CONFIGS = (
    "default,nop,pass:fuse_bn_into_conv,pass:eliminate_identity,pass:eliminate_nop_transpose,pass:split_init"
)
# what a run's verdicts are: everything in its report but timings and what was reused
TIMINGS = {"cost_s", "reused"}


def _conv_bn() -> onnx.ModelProto:
    """Identity → Conv → BatchNormalization: fuse_bn_into_conv fuses it, so the head's change fires."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), "scale"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "shift"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "mean"),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), "var"),
    ]
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Conv", ["i", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reuse-corpus")
    onnx.save(_conv_bn(), folder / "conv_bn.onnx")
    onnx.save(plain_model("plain"), folder / "plain.onnx")
    return folder


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(changed_pass_onnxoptimizer(tmp_path_factory.mktemp("head"), "0.4.2+changed"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _sweep(
    models: Path, out: Path, cache: Path, *args: str, cwd: Path | None = None
) -> tuple[int, dict, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])}
    common = ("--models", str(models), "--configs", CONFIGS, "--jobs", "1", "--localize", "off")
    return helpers.sweep(*common, "--cache-dir", str(cache), *args, out=out, env=env, cwd=cwd)


def _verdicts(report: dict) -> tuple[list, list]:
    """A run's findings, and its model entries but for timings, what was reused, and the digests
    of the results it judged: onnxoptimizer's split_init writes other bytes from run to run (the
    same failure), so a failure is compared by what it says."""
    findings = sorted(
        (f["model"], f["config"], f["kind"], f["fingerprint"], f["status"]) for f in report["findings"]
    )
    models = []
    for entry in report["models"]:
        kept = {k: v for k, v in entry.items() if k not in TIMINGS}
        verdicts = kept.pop("verdicts")
        failed = sorted(
            (o["kind"], o["message"], o["evidence"]["ops_removed"]) for o in verdicts["failed"].values()
        )
        models.append(
            {**kept, "judged_as": verdicts["judged_as"], "draw": verdicts["draw"], "failed": failed}
        )
    return findings, models


@pytest.fixture(scope="module")
def base_report(corpus: Path, cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reuse") / "base"
    code, report, stderr = _sweep(corpus, out, cache)
    assert code == 0 and report["stats"]["verdict_key"], stderr
    return out / "report.json"


def test_a_head_that_changes_one_pass_reuses_the_rest_and_judges_alike(
    corpus: Path, cache: Path, head: str, base_report: Path, tmp_path: Path
):
    reuse = ("--reuse-from", str(base_report))
    code, reused, stderr = _sweep(corpus, tmp_path / "reused", cache, "--optimizer", head, *reuse)
    assert code == 1, stderr  # the head's change is a new bug
    code, judged, stderr = _sweep(corpus, tmp_path / "judged", cache, "--optimizer", head, "--no-reuse")
    assert code == 1, stderr
    assert _verdicts(reused) == _verdicts(judged)
    bugs = {(f["model"], f["config"]) for f in reused["findings"] if f["kind"] == "output-mismatch"}
    assert bugs == {("conv_bn.onnx", "default"), ("conv_bn.onnx", "pass:fuse_bn_into_conv")}

    entries = {entry["id"]: entry for entry in reused["models"]}
    base = json.loads(base_report.read_text())
    stored = {entry["id"]: entry["verdicts"] for entry in base["models"]}
    assert [o["kind"] for o in stored["plain.onnx"]["failed"].values()] == ["interface-change"]
    judged_by_base = len(stored["plain.onnx"]["passed"]) + len(stored["plain.onnx"]["failed"])
    # the plain model: every result the base judged, passed or failed, is taken; none is run
    assert entries["plain.onnx"]["reused"] >= judged_by_base > 1
    # conv_bn: what the changed pass made is judged here, the rest (nop, eliminate_identity) reused
    assert 0 < entries["conv_bn.onnx"]["reused"] < len(CONFIGS.split(","))
    assert reused["stats"]["reused_verdicts"] == sum(entry.get("reused", 0) for entry in reused["models"])
    assert "reused_verdicts" not in judged["stats"]
    summary = (tmp_path / "reused" / "summary.md").read_text()
    assert f"| verdicts reused | {reused['stats']['reused_verdicts']} results byte-identical" in summary
    assert "verdicts reused" not in (tmp_path / "judged" / "summary.md").read_text()
    assert reused["stats"]["runtime_runs"] < judged["stats"]["runtime_runs"]
    # what the reused run passes on lets the next run reuse as much
    reuse = ("--reuse-from", str(tmp_path / "reused" / "report.json"))
    code, again, stderr = _sweep(corpus, tmp_path / "again", cache, "--optimizer", head, *reuse)
    assert _verdicts(again) == _verdicts(judged)
    assert again["stats"]["reused_verdicts"] >= reused["stats"]["reused_verdicts"]


def test_verdicts_judged_with_other_settings_are_not_reused_and_the_log_says_why(
    corpus: Path, cache: Path, base_report: Path, tmp_path: Path
):
    args = ("--reuse-from", str(base_report), "--seed", "1")
    code, report, stderr = _sweep(corpus, tmp_path / "seeded", cache, *args)
    assert code == 0, stderr
    assert "reused_verdicts" not in report["stats"]
    assert not any(entry.get("reused") for entry in report["models"])
    assert f"not reusing verdicts from {base_report}: it was judged with other settings" in stderr


def test_previous_is_reused_unless_told_not_to(corpus: Path, cache: Path, base_report: Path, tmp_path: Path):
    code, report, stderr = _sweep(corpus, tmp_path / "nightly", cache, "--previous", str(base_report))
    assert code == 0, stderr
    # the same build, the same models: every changed result is the one judged last time
    assert report["stats"]["reused_verdicts"] > 0
    args = ("--previous", str(base_report), "--no-reuse")
    code, report, stderr = _sweep(corpus, tmp_path / "off", cache, *args)
    assert code == 0 and "reused_verdicts" not in report["stats"], stderr


def test_the_base_check_takes_the_heads_outcome_for_a_byte_identical_result(cache: Path, tmp_path: Path):
    """planted_builds: both builds retype the output under eliminate_identity, and on a model without
    a sequence output the head's round-trip fix changes nothing: the base's results are the head's
    bytes, so each takes the head's outcome without a run, and the finding is known by the base."""
    onnx.save(plain_model("retype_plain"), tmp_path / "retype_plain.onnx")
    args = ("--optimizer", "planted_head:optimize", "--base-optimizer", "planted_base:optimize")
    code, report, stderr = _sweep(tmp_path / "retype_plain.onnx", tmp_path / "pr", cache, *args)
    assert code == 0, stderr
    retyped = [f for f in report["findings"] if f["status"] != "fixed"]
    assert retyped and {f["evidence"]["known_by"] for f in retyped} == {"base-optimizer"}
    checked = report["stats"]["base_optimizer"]
    # each failing config's result (and the control's, if it changed the model) reused, in one try:
    # a reused outcome is the head's, which fails
    assert checked["tries"] == 1 and checked["reused"] >= len(retyped), checked


def test_a_job_whose_every_result_was_judged_before_never_runs_the_original(corpus: Path):
    ref = ModelRef("plain.onnx", "test", str(corpus / "plain.onnx"))
    steps = build_steps(tuple(CONFIGS.split(",")), (), load_optimizer("onnxoptimizer").info)
    with WorkerPool(WorkerConfig(timeout_s=60), jobs=1) as pool:
        (judged,) = pool.run([Job(ref, steps)])
        # what a report keeps of it, and what a later sweep makes of that
        outcomes = judged.outcomes.values()
        draw = judged.draw.to_json() if judged.draw else None
        stored = Verdicts(
            judged.judged_as, passed_digests(outcomes), failed_outcomes(outcomes), draw, judged.info.to_json()
        )
        reuse = reuse_table([(ref.id, "", stored, (), None)])[ref.id]
        (reused,) = pool.run([Job(ref, steps, fresh=True, reuse=reuse)])
        other_inputs = replace(reuse, judged_as="0" * 64)
        (rejudged,) = pool.run([Job(ref, steps, fresh=True, reuse=other_inputs)])
    assert stored.passed and stored.failed and judged.counts.runtime_runs > 0
    # nothing ran, and what the finding's pinpointing and evidence read is the stored run's
    assert (reused.counts.runtime_runs, reused.draw, reused.info) == (0, judged.draw, judged.info)
    for label, outcome in judged.outcomes.items():
        again = reused.outcomes[label]
        # the same verdicts, and the same evidence a fingerprint keys on (the ops a result removed)
        assert (again.kinds, again.message, again.digest, again.evidence) == (
            outcome.kinds,
            outcome.message,
            outcome.digest,
            outcome.evidence,
        ), label
        assert again.reused == outcome.changed, label
    assert rejudged.counts.runtime_runs == judged.counts.runtime_runs
    assert not any(outcome.reused for outcome in rejudged.outcomes.values())


def test_a_stored_report_that_is_no_report_is_a_one_line_error(corpus: Path, cache: Path, tmp_path: Path):
    (tmp_path / "half.json").write_text('{"schema_version": 1, "models": []}')
    for given, says in (
        (tmp_path / "half.json", "does not follow the report.json schema"),
        (tmp_path / "none.json", "does not exist"),
    ):
        code, report, stderr = _sweep(corpus, tmp_path / "out", cache, "--reuse-from", str(given))
        lines = stderr.strip().splitlines()
        assert (code, report) == (4, {}) and len(lines) == 1 and says in lines[0], stderr


def test_a_pr_check_carries_the_steps_of_passes_it_leaves_unchanged_and_judges_alike(
    corpus: Path, cache: Path, head: str, base_report: Path, tmp_path: Path
):
    """With what the PR changed (--changed-since in the checkout), a config whose passes it leaves
    unchanged is not called where the base report knows its result: the control's bytes, or its
    own result's judged there. The findings and model entries (each config's effect too, rebuilt
    from the stored one) are those of a run that calls and judges everything."""
    checkout, since = changed_pass_checkout(tmp_path)
    args = ("--optimizer", head, "--reuse-from", str(base_report), "--changed-since", since)
    code, carried, stderr = _sweep(corpus, tmp_path / "carried", cache, *args, cwd=checkout)
    assert code == 1, stderr
    code, judged, stderr = _sweep(corpus, tmp_path / "judged", cache, "--optimizer", head, "--no-reuse")
    assert code == 1, stderr
    assert _verdicts(carried) == _verdicts(judged)
    changed = {"since": since, "files": 1, "passes": ["fuse_bn_into_conv"], "shared": []}
    assert carried["stats"]["impact"] == changed
    # the configs without fuse_bn_into_conv (default runs it) whose result the base report knows:
    # the control's bytes, or one of its verdicts'
    unchanged = {"pass:eliminate_identity", "pass:eliminate_nop_transpose", "pass:split_init"}
    stored = [entry["verdicts"] for entry in json.loads(base_report.read_text())["models"]]
    as_control = sum(len(unchanged - set(verdicts["own"])) for verdicts in stored)
    own = [verdicts["results"].get(label) for verdicts in stored for label in unchanged]
    known = {digest for verdicts in stored for digest in [*verdicts["passed"], *verdicts.get("failed", {})]}
    # split_init changes both models, and fails on both (a known limitation): its results are carried too
    expected = as_control + sum(digest in known for digest in own)
    assert as_control > 0 and expected >= as_control + len(stored)
    # the control too, on a model where default or fuse_bn_into_conv, called, gave its stored result:
    # plain.onnx; on conv_bn.onnx the changed fuse_bn_into_conv fires, so both give other bytes there
    # and its control is called
    controls = 1
    assert carried["stats"]["carried_steps"] == expected + controls
    assert carried["stats"]["optimizer_runs"] == judged["stats"]["optimizer_runs"] - expected - controls
    summary = (tmp_path / "carried" / "summary.md").read_text()
    expected += controls
    assert f"since {since[:12]}: fuse\\_bn\\_into\\_conv; {expected} results of the other passes" in summary
    assert f"| results carried | {expected} results taken from the stored report without" in summary
    # told not to, or where the PR changed what every pass shares: every config is called
    code, called, stderr = _sweep(corpus, tmp_path / "called", cache, *args, "--no-carry", cwd=checkout)
    assert code == 1 and "carried_steps" not in called["stats"], stderr
    (checkout / "onnxoptimizer" / "pass_manager.cc").write_text("// changed too\n")
    code, shared, stderr = _sweep(corpus, tmp_path / "shared", cache, *args, cwd=checkout)
    assert code == 1 and "carried_steps" not in shared["stats"], stderr
    assert shared["stats"]["impact"]["shared"] == ["onnxoptimizer/pass_manager.cc"]
    said = (tmp_path / "shared" / "summary.md").read_text()
    assert "code every pass shares (onnxoptimizer/pass\\_manager.cc), so every config was called" in said
    assert _verdicts(shared) == _verdicts(judged)


def test_a_pr_check_carries_a_changed_pass_list_where_each_of_its_passes_leaves_the_model_alone(
    corpus: Path, cache: Path, head: str, tmp_path: Path
):
    """With every single pass among the configs, a PR that changed fuse_bn_into_conv (in the default
    list) calls it alone first; on a model where it, and every other pass of the list in the base
    report, left the model as the control did, `default` and `fixed-point` are carried with their
    stored results (engine/reuse.py, `Reuse.composed`). On conv_bn.onnx, where the changed pass acts,
    they are called, and the head's bug in `default` is found as a run that calls everything finds
    it."""
    folder = tmp_path / "models"
    shutil.copytree(corpus, folder)
    relu = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    onnx.save(helper.make_model(relu, opset_imports=[helper.make_opsetid("", 17)]), folder / "relu.onnx")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])}
    common = ("--models", str(folder), "--configs", "nop,default,fixed-point,single", "--jobs", "1")
    common += ("--localize", "off", "--cache-dir", str(cache))

    def sweep(name: str, *args: str, cwd: Path | None = None) -> dict:
        code, report, stderr = helpers.sweep(*common, *args, out=tmp_path / name, env=env, cwd=cwd)
        assert code in (0, 1) and report, stderr
        return report

    base = sweep("base")
    checkout, since = changed_pass_checkout(tmp_path)
    args = ("--optimizer", head, "--reuse-from", str(tmp_path / "base" / "report.json"))
    carried = sweep("carried", *args, "--changed-since", since, "--exercise-budget", "0", cwd=checkout)
    judged = sweep("judged", "--optimizer", head, "--no-reuse")
    assert _verdicts(carried) == _verdicts(judged)
    assert ("conv_bn.onnx", "default") in {(f["model"], f["config"]) for f in carried["findings"]}

    # carried: each config without fuse_bn_into_conv whose result the base report knows; the control
    # where the changed pass gave its stored bytes (relu.onnx, plain.onnx); and default and fixed-point
    # on relu.onnx alone, where each pass of the list alone left the model as the control did (on
    # plain.onnx eliminate_identity acts)
    changed = {"nop", "default", "fixed-point", "pass:fuse_bn_into_conv"}
    unchanged = set(base["stats"]["configs"]) - changed
    expected = 0
    for entry in base["models"]:
        verdicts = entry["verdicts"]
        known = {*verdicts["passed"], *verdicts.get("failed", {})}
        own = [verdicts["results"].get(label) for label in unchanged & set(verdicts["own"])]
        expected += len(unchanged - set(verdicts["own"])) + sum(digest in known for digest in own)
    assert carried["stats"]["carried_steps"] == expected + 2 + 2
    assert carried["stats"]["optimizer_runs"] == judged["stats"]["optimizer_runs"] - expected - 4
