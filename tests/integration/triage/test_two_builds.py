"""Two builds of a planted optimizer (tests/fakes/planted_builds.py) as a PR check sees them: a
control that fails on the base only, a failure that comes and goes, the same bug in the plain
sweep, the PR check and the nightly, passes only the head has."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import onnx
from planted_builds import IDLE_PASS, NEW_PASS

from tests import helpers
from tests.helpers import FAKES
from tests.integration.sequence_models import plain_model, sequence_output_model

HEAD = "planted_head:optimize"
BASE = "planted_base:optimize"
CONFIGS = "default,fixed-point,pass:eliminate_identity"




def sweep(
    tmp_path: Path, model: onnx.ModelProto, *args: str, out: str, cwd: Path | None = None, **env: str
) -> tuple[int, dict, str]:
    path = tmp_path / f"{model.graph.name}.onnx"
    onnx.save(model, path)
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]),
        "PLANTED_FLAKY_COUNT": str(tmp_path / f"{out}.count"),
        **env,
    }
    common = ("--jobs", "1", "--models", str(path), "--cache-dir", str(tmp_path / "cache"))
    return helpers.sweep(*common, *args, out=tmp_path / out, env=environment, cwd=cwd)


def by_config(report: dict) -> dict[str, dict]:
    return {f["config"]: f for f in report["findings"] if f["status"] != "fixed"}


def test_a_bugs_identity_does_not_depend_on_the_control_and_is_one_in_every_mode(tmp_path: Path):
    model = sequence_output_model("retype_seq")
    code, plain, stderr = sweep(tmp_path, model, "--optimizer", BASE, "--configs", CONFIGS, out="base")
    assert code == 1, stderr
    on_base = by_config(plain)
    assert on_base["nop"]["kind"] == "invalid-model"
    retyped = on_base["pass:eliminate_identity"]
    # the base's control fails the checker alike: its checker verdict is the round trip's, context;
    # ONNX Runtime refusing the retyped output is the pass's own, the most severe
    assert (retyped["kind"], retyped["verdicts"]) == (
        "runtime-load-error",
        ["runtime-load-error", "interface-change"],
    )
    assert retyped["evidence"]["control"].startswith("invalid-model")
    bug = retyped["fingerprint"]
    assert {on_base[c]["fingerprint"] for c in ("default", "fixed-point")} == {bug}

    args = ("--optimizer", HEAD, "--configs", CONFIGS)
    code, pr, stderr = sweep(tmp_path, model, *args, "--base-optimizer", BASE, out="pr")
    assert code == 0, stderr
    on_head = by_config(pr)
    assert "nop" not in on_head, "the head's round trip is fixed"
    for config in ("default", "fixed-point", "pass:eliminate_identity"):
        finding = on_head[config]
        # the head's round trip is valid: the checker refusing the retyped output is the pass's too
        assert (finding["kind"], finding["status"]) == ("invalid-model", "known"), config
        assert finding["verdicts"] == ["invalid-model", "runtime-load-error", "interface-change"]
        assert finding["evidence"]["known_by"] == "base-optimizer" and "control" not in finding["evidence"]
        assert finding["fingerprint"] == bug, f"{config}: one bug, one fingerprint, reduced or not"

    previous = ("--previous", str(tmp_path / "base" / "report.json"))
    code, nightly, stderr = sweep(tmp_path, model, *args, *previous, out="nightly")
    assert code == 0, stderr
    fixed = [f for f in nightly["findings"] if f["status"] == "fixed"]
    assert [f["config"] for f in fixed] == ["nop"], "only the round trip's bug is fixed"
    assert {f["fingerprint"] for f in nightly["findings"] if f["status"] == "known"} == {bug}


def test_a_failure_no_rerun_shows_is_flaky_and_does_not_gate(tmp_path: Path):
    model = plain_model("flaky_plain")
    args = ("--optimizer", HEAD, "--configs", "pass:eliminate_deadend")
    code, report, stderr = sweep(tmp_path, model, *args, out="once", PLANTED_FLAKY_CRASHES="1")
    assert code == 0, stderr
    (flaky,) = report["findings"]
    assert (flaky["kind"], flaky["status"]) == ("optimizer-crash", "flaky")
    assert flaky["evidence"]["reproduce"] == {"tries": 3, "reproduced": 0}
    assert flaky["repro"] is None
    summary = (tmp_path / "once" / "summary.md").read_text()
    assert "1 flaky, not blocking" in summary and "### Flaky, not blocking (1)" in summary

    # shown again in the second try: a real bug, which gates
    code, report, stderr = sweep(tmp_path, model, *args, out="twice", PLANTED_FLAKY_CRASHES="1,3")
    assert code == 1, stderr
    (new,) = report["findings"]
    assert new["status"] == "new" and new["evidence"]["reproduce"] == {"tries": 2, "reproduced": 1}


def test_a_failure_the_base_shows_in_any_try_is_known(tmp_path: Path):
    model = plain_model("flaky_plain")
    args = ("--optimizer", HEAD, "--configs", "pass:eliminate_deadend", "--base-optimizer", BASE)
    # the head's sweep crashes (call 1); the base's first try does not (2), its second does (3)
    code, report, stderr = sweep(tmp_path, model, *args, out="pr", PLANTED_FLAKY_CRASHES="1,3")
    assert code == 0, stderr
    (known,) = report["findings"]
    assert (known["status"], known["evidence"]["known_by"]) == ("known", "base-optimizer")
    assert report["stats"]["base_optimizer"]["tries"] == 2


def test_two_builds_of_one_version_are_told_apart_and_the_summary_warns(tmp_path: Path):
    args = ("--optimizer", HEAD, "--configs", "pass:eliminate_identity", "--base-optimizer", BASE)
    code, report, stderr = sweep(tmp_path, plain_model("fine"), *args, out="pr")
    assert code == 0, stderr
    head, base = report["optimizer"]["build"], report["stats"]["base_optimizer"]["build"]
    assert head["version"] == base["version"] == "0.4.2"
    assert head["passes_sha256"] != base["passes_sha256"] and head["files_sha256"] != base["files_sha256"]
    warning = report["stats"]["base_optimizer"]["look_alike"]
    assert "both report version 0.4.2 but differ in pass list and files" in warning
    assert "differ in pass list and files" in stderr
    summary = (tmp_path / "pr" / "summary.md").read_text()
    # the fakes' checkout is this one: both rows name its commit, and differ in their hashes
    assert f"| head | 0.4.2 | {head['git_describe']} | {head['files_sha256'][:12]} |" in summary
    assert f"| {base['files_sha256'][:12]} | {base['passes_sha256'][:12]} |" in summary
    assert "**Warning:** head and base both report version 0.4.2" in summary


def test_passes_the_pr_adds_or_changes_are_exercised_and_one_that_never_fires_warns(tmp_path: Path):
    """In the optimizer's checkout of a pull_request event: NEW_PASS (only the head has it; no
    generator of its own) gets the models of the generators named like it and fires on some;
    IDLE_PASS fires on none and warns; eliminate_identity, whose source the PR touched, is
    exercised as changed."""
    checkout = tmp_path / "optimizer"
    passes = checkout / "onnxoptimizer" / "passes"
    passes.mkdir(parents=True)
    (passes / "eliminate_identity.h").write_text("// base\n")
    git = ("git", "-C", str(checkout))
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"], check=True)
    base_sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
    (passes / "eliminate_identity.h").write_text("// the PR's change\n")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "base": {"sha": base_sha.strip()}}}))

    configs = f"pass:{NEW_PASS},pass:{IDLE_PASS},pass:eliminate_identity"
    args = ("--optimizer", HEAD, "--base-optimizer", BASE, "--configs", configs, "--exercise-budget", "60")
    code, report, stderr = sweep(
        tmp_path, plain_model("fine"), *args, out="pr", cwd=checkout,
        PYTHONPATH=os.pathsep.join([str(FAKES), str(helpers.ROOT), os.environ.get("PYTHONPATH", "")]),
        GITHUB_EVENT_NAME="pull_request", GITHUB_EVENT_PATH=str(event),
    )
    assert code == 0, stderr
    exercised = {p["name"]: p for p in report["stats"]["exercised"]["passes"]}
    assert {name: p["why"] for name, p in exercised.items()} == {
        NEW_PASS: "new", IDLE_PASS: "new", "eliminate_identity": "changed"
    }
    new = exercised[NEW_PASS]
    assert "fuse_consecutive_squeezes" in new["generators"]
    assert 0 < new["models_changed"] < new["models_checked"]
    assert exercised[IDLE_PASS]["models_checked"] > 0 and exercised[IDLE_PASS]["models_changed"] == 0
    assert exercised["eliminate_identity"]["generators"] == ["eliminate_identity"]
    assert exercised["eliminate_identity"]["models_changed"] > 0
    # the generated models are the report's too, and what the new pass did to them is judged there:
    # the base, which lacks the pass, cannot vouch for it
    generated = [m for m in report["models"] if m["source"].endswith("/pr/exercised")]
    assert len(generated) == report["stats"]["exercised"]["models"] == len(report["models"]) - 1
    assert report["stats"]["exercised"]["model_ids"] == sorted(m["id"] for m in generated)
    on_new = [f for f in report["findings"] if f["config"] == f"pass:{NEW_PASS}"]
    assert on_new and all(f["status"] == "new" for f in on_new)
    lacks = "not run: the base build lacks a pass of this config"
    assert {f["evidence"]["on_base"] for f in on_new} == {lacks}

    summary = (tmp_path / "pr" / "summary.md").read_text()
    row = f"| {NEW_PASS} | new | {new['models_changed']} of {new['models_checked']} |".replace("_", "\\_")
    assert row in summary
    warning = f"new pass {IDLE_PASS} never fired".replace("_", "\\_")
    assert f"> **Warning:** {warning}" in summary and f"new pass {IDLE_PASS} never fired" in stderr
    assert f"new pass {NEW_PASS} never fired" not in stderr
