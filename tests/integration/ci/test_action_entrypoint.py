"""entrypoint.py run exactly as the GitHub runner runs the container: INPUT_* and GITHUB_*
variables, an event payload, temporary GITHUB_OUTPUT and GITHUB_STEP_SUMMARY files, the real
optimizer and runtime on a tiny generated corpus."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ditox_ci.errors import ConfigError, MergeError
from ditox_ci.report.model import write_report
from tests.helpers import FAKES
from tests.integration.action_models import write_models, write_wrong_add
from tests.integration.ci.action_runs import OFFLINE_PUBLISH, TOKEN, run_action, run_sweep
from tests.integration.github_fixtures import BUG_A, report
from tests.integration.github_server import GitHubServer

Result = tuple[subprocess.CompletedProcess[str], dict[str, str], str]


def _findings(report_path: Path) -> list[tuple[str, str, str, str, str]]:
    report = json.loads(report_path.read_text())
    return sorted(
        (f["fingerprint"], f["model"], f["config"], f["kind"], f["status"])
        for f in report["findings"]
    )


def _model_ids(report_path: Path) -> list[str]:
    return sorted(m["id"] for m in json.loads(report_path.read_text())["models"])


def _merge(workspace: Path, event: str, reports: str, out: str, fail_on: str = "never") -> Result:
    """The Action's merge mode: the shard reports under `reports` into one report at `out`."""
    return run_action(workspace, event, mode="merge", reports=reports, out=out, fail_on=fail_on)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    write_models(root / "models")
    return root


@pytest.fixture(scope="module")
def unsharded(workspace: Path) -> Result:
    return run_sweep(workspace, configs="default,single", out="whole")


@pytest.fixture(scope="module")
def shards(workspace: Path) -> list[Result]:
    return [
        run_sweep(
            workspace,
            configs="default,single",
            out=f"shards/shard-{index}",
            shard_index=str(index),
            shard_count="3",
        )
        for index in range(3)
    ]


def test_unsharded_sweep_writes_outputs_and_summary_and_masks_the_token(
    workspace: Path, unsharded: Result
) -> None:
    process, outputs, summary = unsharded
    assert process.returncode == 0, process.stderr
    log = process.stdout + process.stderr
    assert f"::add-mask::{TOKEN}" in log
    assert "::group::ditox-ci sweep" in log and "::endgroup::" in log
    assert outputs["report"] == "whole/report.json"
    report = json.loads((workspace / outputs["report"]).read_text())
    assert [outputs[s] for s in ("new", "known", "fixed")] == [
        str(sum(1 for f in report["findings"] if f["status"] == s))
        for s in ("new", "known", "fixed")
    ]
    assert report["findings"], "the tiny corpus is expected to show findings (e.g. split_init)"
    assert summary.strip()
    assert TOKEN not in summary
    # the stages run as the workspace's owner; when that is root, the job says what that costs
    root_workspace = os.geteuid() == 0 and workspace.stat().st_uid == 0
    warned = "is root's, so ditox-ci's stages and the optimizer under test run as root" in log
    assert warned == root_workspace


def test_three_shards_plus_merge_equal_one_unsharded_run(
    workspace: Path, unsharded: Result, shards: list[Result]
) -> None:
    for process, _outputs, _ in shards:
        assert process.returncode == 0, process.stderr
    shard_models = [_model_ids(workspace / outputs["report"]) for _, outputs, _ in shards]
    assert sum(len(ids) for ids in shard_models) == 4 and all(shard_models)
    process, outputs, summary = _merge(workspace, "workflow_dispatch", "shards", "merged")
    assert process.returncode == 0, process.stderr
    merged, whole = workspace / outputs["report"], workspace / unsharded[1]["report"]
    assert _findings(merged) == _findings(whole)
    assert _model_ids(merged) == _model_ids(whole)
    assert outputs["new"] == unsharded[1]["new"] and outputs["known"] == unsharded[1]["known"]
    assert json.loads(merged.read_text())["shard"] == {"index": 0, "count": 1}
    assert summary.strip()


def test_missing_shard_fails_loudly_with_the_merge_error_code(
    workspace: Path, shards: list[Result]
) -> None:
    process, outputs, _ = _merge(workspace, "schedule", "shards/shard-0\nshards/shard-2", "merged-missing")
    assert process.returncode == MergeError.exit_code
    assert "shard 1/3 missing" in process.stderr
    assert "::error::" in process.stdout + process.stderr
    assert outputs == {}
    assert not (workspace / "merged-missing" / "report.json").exists()


@pytest.mark.parametrize(("fail_on", "code"), [("new", 1), ("never", 0)])
def test_max_skipped_fails_the_job_when_more_of_the_corpus_was_skipped(
    tmp_path: Path, fail_on: str, code: int
) -> None:
    """The sweep stage exits 1 for it, which the Action took for "new findings" and then judged
    by the findings alone: a sweep that skipped half its corpus passed."""
    write_models(tmp_path / "models")
    for name in ("torn", "empty"):
        (tmp_path / "models" / f"{name}.onnx").write_bytes(b"\x08\x07" if name == "torn" else b"")
    process, outputs, _ = run_sweep(tmp_path, max_skipped="0.2", fail_on=fail_on, out="skips")
    report = json.loads((tmp_path / outputs["report"]).read_text())
    assert outputs["new"] == "0" and sum(m["status"] != "ok" for m in report["models"]) == 2
    assert process.returncode == code, process.stderr
    # the sweep stage says so in either case (% is %25 in a workflow command)
    said = "::error::33.3%25 of the corpus was skipped, more than --max-skipped 0.2"
    assert said in process.stderr
    # a publish job gates on the report it is given (the limit travels in it), and says why
    process, _, _ = run_action(
        tmp_path, "schedule", mode="publish", out="skips", fail_on=fail_on, **OFFLINE_PUBLISH
    )
    assert process.returncode == code, process.stderr
    assert said in process.stderr


@pytest.mark.parametrize(("fail_on", "expected"), [("new", "new"), ("any", "any"), ("never", None)])
def test_gate_follows_fail_on(
    workspace: Path, unsharded: Result, fail_on: str, expected: str | None
) -> None:
    counts = unsharded[1]
    failing = {"new": int(counts["new"]), "any": int(counts["new"]) + int(counts["known"])}
    process, outputs, _ = _merge(workspace, "release", "whole", f"gate-{fail_on}", fail_on)
    assert process.returncode == (1 if expected and failing[expected] else 0), process.stderr
    assert outputs["report"] == f"gate-{fail_on}/report.json"


def test_bad_input_is_a_config_error_before_anything_runs(workspace: Path) -> None:
    process, outputs, _ = run_sweep(workspace, shard_index="3", shard_count="3", out="never-written")
    assert process.returncode == ConfigError.exit_code
    assert "shard_index" in process.stderr and outputs == {}
    assert not (workspace / "never-written").exists()


def test_mode_all_publishes_what_the_users_baseline_accepted_as_known(workspace: Path) -> None:
    """The publish stage classifies again; the user's baseline must still count there."""
    shutil.copy(FAKES / "faulty_optimizers.py", workspace)  # flips an Add in `wrong*` graphs
    write_wrong_add(workspace / "wrong" / "add.onnx")
    (workspace / "accepted.yml").write_text(
        "entries:\n- {id: flip, reason: accepted, optimizer: 'faulty_optimizers*',"
        " passes: [eliminate_identity]}\n"
    )
    process, outputs, summary = run_action(
        workspace,
        "release",
        mode="all",
        models="wrong",
        configs="default",
        optimizer="faulty_optimizers.py:optimize",  # the workspace is not on the import path
        baseline="accepted.yml",
        out="accepted",
        **OFFLINE_PUBLISH,
    )
    assert process.returncode == 0, process.stderr
    assert (outputs["new"], outputs["known"]) == ("0", "1")
    assert "would create check run ditox-ci (success)" in process.stdout
    assert "baseline entry **flip**" in summary
    # publish's own outputs: code scanning and test-report files, and what it wrote (nothing: dry run)
    assert outputs["sarif"] == "accepted/ditox.sarif" and outputs["junit"] == "accepted/junit.xml"
    assert json.loads((workspace / "accepted" / "ditox.sarif").read_text())["runs"][0]["results"] == []
    assert (workspace / "accepted" / "junit.xml").read_text().count("<testcase") == 2  # nop + default
    assert (outputs["issues_opened"], outputs["comment_url"]) == ("[]", "")


def test_a_read_only_token_warns_and_keeps_the_gates_exit_code(workspace: Path) -> None:
    """A fork's pull request gets a read-only token: every write is refused, and the job still
    ends with the gate's code (1: a new finding), not GitHub's (7)."""
    write_report(report(BUG_A), workspace / "fork-report" / "report.json")
    with GitHubServer("onnx/optimizer") as server:
        server.open_pull(7, "1" * 40)
        process, outputs, summary = run_action(
            workspace,
            "pull_request",
            runner_env={"GITHUB_API_URL": server.url},
            mode="publish",
            out="fork-report",
            github_token="read-token",
        )
        refused = [x.status for x in server.exchanges if x.method != "GET"]
    assert process.returncode == 1, process.stderr
    assert "read-only token" in process.stdout + process.stderr
    assert refused and set(refused) == {403}
    assert "token was read-only" in summary and outputs["new"] == "1"



def test_the_job_gates_on_what_publish_published(workspace: Path) -> None:
    """A nightly whose sweep had no previous report (the CLI sweeps of the other optimizers'
    nightlies) and whose publish has last night's: the check said the bug was known, while the job
    read the sweep's report.json, called it new and failed every night."""
    write_report(report(BUG_A), workspace / "tonight" / "report.json")
    write_report(report(BUG_A), workspace / "last-night" / "report.json")
    process, outputs, _ = run_action(
        workspace,
        "schedule",
        mode="publish",
        out="tonight",
        previous="last-night/report.json",
        fail_on="new",
        **OFFLINE_PUBLISH,
    )
    assert process.returncode == 0, process.stderr
    assert (outputs["new"], outputs["known"]) == ("0", "1")
    assert "would create check run ditox-ci (success)" in process.stdout
    # the artifact uploaded after publish says it too: tomorrow's previous, and a reader's report
    assert _findings(workspace / "tonight" / "report.json")[0][-1] == "known"
