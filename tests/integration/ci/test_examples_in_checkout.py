"""The example workflows' Action steps, run as GitHub runs them: their own `with:` blocks (read from
examples/*.yml, expressions filled in as the runner would), in a folder laid out like the
onnx/optimizer checkout, on wheels installed the way the examples install them. Only the corpus
is the tiny one instead of the default, and publishing is a dry run."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import yaml
from wheels import repack_installed

from tests.helpers import ROOT
from tests.integration.action_models import write_models
from tests.integration.ci.action_runs import onnx_optimizer_checkout, run_action
from tests.integration.github_fixtures import BUG_A, BUG_B, report, write
from tests.integration.github_server import GitHubServer, uploaded_artifact


def _action_steps(workflow: str, job: str) -> list[dict[str, str]]:
    """The `with:` blocks of the job's `ditox/action` steps, in order."""
    jobs = yaml.safe_load((ROOT / "examples" / workflow).read_text())["jobs"]
    return [
        {key: str(value) for key, value in step["with"].items()}
        for step in jobs[job]["steps"]
        if str(step.get("uses", "")).startswith("ditox/action@")
    ]


def _fill(inputs: dict[str, str], values: dict[str, str]) -> dict[str, str]:
    """`${{ … }}` as the runner evaluates them here; an expression the test does not know fails it,
    so a changed example cannot slip past."""

    def value(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        assert expression in values, f"the test does not know the expression {expression!r}"
        return values[expression]

    return {key: re.sub(r"\$\{\{(.*?)\}\}", value, text) for key, text in inputs.items()}


def _checkout(tmp_path: Path) -> Path:
    workspace = tmp_path / "optimizer"
    onnx_optimizer_checkout(workspace)
    write_models(workspace / "models")
    (workspace / ".github").mkdir()
    (workspace / ".github" / "ditox-baseline.yml").write_text("entries: []\n")
    return workspace


def _run(workspace: Path, python: str, event: str, inputs: dict[str, str], **extra: Any) -> Any:
    process, outputs, _ = run_action(workspace, event, python=python, models="models", **inputs, **extra)
    assert process.returncode == 0, process.stdout + process.stderr
    return outputs


def test_pr_yml_in_an_onnx_optimizer_checkout(tmp_path: Path, fresh_python: str) -> None:
    workspace = _checkout(tmp_path)
    head = repack_installed(workspace / "dist", "onnxoptimizer", "onnxoptimizer", "0.4.2+head")
    base = repack_installed(workspace / "dist-base", "onnxoptimizer", "onnxoptimizer", "0.4.2+base")
    with GitHubServer("onnx/optimizer") as server:
        # the base branch's last nightly, as nightly.yml sweeps and merges it, is what the PR reuses
        server.add_workflow_run("nightly.yml", conclusion="failure")  # its first night: nothing before
        (nightly,) = _action_steps("nightly.yml", "sweep")
        values = {"strategy.job-index": "0", "strategy.job-total": "1", "matrix.shard": "0"}
        values |= {"steps.wheel.outputs.path": str(base.relative_to(workspace)), "github.ref_name": "main"}
        github = {"github_token": "write-token", "runner_env": {"GITHUB_API_URL": server.url}}
        _run(workspace, fresh_python, "schedule", _fill(nightly, values), **github)
        (workspace / "shards").mkdir()
        shutil.move(workspace / "shard-0", workspace / "shards" / "ditox-shard-0")
        merge_nightly, *_ = _action_steps("nightly.yml", "report")
        _run(workspace, fresh_python, "schedule", _fill(merge_nightly, {}))
        uploaded = uploaded_artifact(workspace / "ditox-report")
        server.add_workflow_run("nightly.yml", artifacts={"ditox-report": uploaded})
        for folder in ("shards", "ditox-report"):
            shutil.rmtree(workspace / folder)

        (sweep,) = _action_steps("pr.yml", "sweep")
        shards = yaml.safe_load((ROOT / "examples" / "pr.yml").read_text())["jobs"]["sweep"]["strategy"]
        count = len(shards["matrix"]["shard"])
        for index in range(count):
            filled = _fill(
                sweep,
                {
                    "steps.wheel.outputs.path": str(head.relative_to(workspace)),
                    "steps.wheel.outputs.base": str(base.relative_to(workspace)),
                    "strategy.job-index": str(index),
                    "strategy.job-total": str(count),
                    "matrix.shard": str(index),
                    "github.base_ref": "main",
                },
            )
            assert filled["reuse_from"] == "workflow:nightly.yml@main"
            # the sweep job's token may read the repository's runs, nothing more
            _run(workspace, fresh_python, "pull_request", filled, **{**github, "github_token": "read-token"})
            # what upload-artifact + download-artifact (pattern:) make of the shard's folder
            shutil.copytree(workspace / filled["out"], workspace / "shards" / f"ditox-shard-{index}")

    merge, publish = _action_steps("pr.yml", "report")
    merged = _run(workspace, fresh_python, "pull_request", _fill(merge, {}))
    report = json.loads((workspace / merged["report"]).read_text())
    assert report["optimizer"]["version"] == "0.4.2+head"
    assert len(report["models"]) == 4
    # identical builds: every changed result the head makes passed in the nightly's report
    passed = sum(bool(m.get("verdicts", {}).get("passed")) for m in report["models"])
    assert passed and report["stats"]["reused_verdicts"] > 0, report["stats"]
    # every finding of identical builds reproduces on the base build: nothing is new
    assert merged["new"] == "0", report["findings"]
    _run(workspace, fresh_python, "pull_request", _fill(publish, {}), dry_run="true", github_token="")


def test_nightly_yml_first_night_in_an_onnx_optimizer_checkout(tmp_path: Path, fresh_python: str) -> None:
    workspace = _checkout(tmp_path)
    wheel = repack_installed(workspace / "dist", "onnxoptimizer", "onnxoptimizer", "0.4.2+nightly")
    (sweep,) = _action_steps("nightly.yml", "sweep")
    filled = _fill(
        sweep,
        {
            "steps.wheel.outputs.path": str(wheel.relative_to(workspace)),
            "strategy.job-index": "0",
            "strategy.job-total": "8",
            "matrix.shard": "0",
            "github.ref_name": "main",
        },
    )
    assert filled["previous"] == "workflow:nightly.yml@main"
    with GitHubServer("onnx/optimizer") as server:
        server.add_workflow_run("nightly.yml", conclusion="failure")  # nothing to build on yet
        outputs = _run(
            workspace,
            fresh_python,
            "schedule",
            {**filled, "github_token": "write-token"},
            runner_env={"GITHUB_API_URL": server.url},
        )
    report = json.loads((workspace / outputs["report"]).read_text())
    assert report["optimizer"]["version"] == "0.4.2+nightly"
    assert report["shard"] == {"index": 0, "count": 8}
    assert not (workspace / ".ditox-previous" / "report.json").exists()


def test_pr_fork_comment_yml_publishes_a_forks_report_unverified_on_the_right_pr(tmp_path: Path) -> None:
    workspace = tmp_path / "base-repository"  # nothing of the fork is checked out
    # what download-artifact put there: the fork run's report
    write(workspace / "ditox-report", "report.json", report(BUG_A, BUG_B))
    (publish,) = _action_steps("pr-fork-comment.yml", "publish")
    assert publish["untrusted"] == "true" and "pr_number" not in publish
    with GitHubServer("onnx/optimizer") as server:
        server.open_pull(41, "3" * 40, head_repository="someone-else/optimizer", head_ref="fix-fusion")
        server.open_pull(42, "3" * 40, head_repository="contributor/optimizer", head_ref="fix-fusion")
        process, _, _ = run_action(
            workspace,
            "workflow_run",
            runner_env={"GITHUB_API_URL": server.url},
            **{**_fill(publish, {}), "github_token": "write-token", "file_issues": "true"},
        )
        assert process.returncode == 0, process.stdout + process.stderr
        assert [n for n in (41, 42) if server.comments_on(n)] == [42]
        (check,) = server.repo.check_runs.values()
        assert (check["head_sha"], check["conclusion"]) == ("3" * 40, "neutral")
        assert server.bot_issues() == []
