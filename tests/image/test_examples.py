"""The example workflows, replayed job by job with the Action's real image (see `replay.py`), in an
onnx/optimizer-shaped checkout owned by the runner's uid, against a local GitHub REST server.

Every output is checked for truth, not presence: the filed issue says its bug reproduced and its
script does, the annotations name files that exist, the check carries the repro command, what the
container wrote belongs to the runner, and no credential reaches the workspace.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.image.replay import (
    REPOSITORY,
    RUNTIME_TOKEN,
    TOKEN,
    Event,
    JobRun,
    Runner,
    chown_tree,
    not_the_runners,
    workflow,
)
from tests.integration.github_server import GitHubServer, uploaded_artifact

CULPRIT = "eliminate_consecutive_idempotent_ops"
HEAD_SHA = "1" * 40
PR = 7
PLANTED = "PLANTED-WORKSPACE-CODE-RAN"


def checkout(workspace: Path) -> None:
    """The root of an onnx/optimizer clone: a source package whose code must never run (the
    optimizer under test is the wheel), the culprit pass's header, the baseline and the workflows."""
    package = workspace / "onnxoptimizer"
    (package / "passes").mkdir(parents=True)
    (package / "__init__.py").write_text(
        f"import pathlib\npathlib.Path(__file__).parent.parent.joinpath({PLANTED!r}).write_text('x')\n"
        "raise RuntimeError('the workspace copy of onnxoptimizer was imported')\n"
    )
    (package / "passes" / f"{CULPRIT}.h").write_text("// the pass\n")
    (workspace / "setup.py").write_text(f"open({PLANTED!r}, 'w').write('setup.py ran')\n")
    workflows = workspace / ".github" / "workflows"
    workflows.mkdir(parents=True)
    for example in (Path(__file__).resolve().parents[2] / "examples").glob("*.yml"):
        shutil.copy(example, workflows / example.name)
    (workspace / ".github" / "ditox-baseline.yml").write_text("entries: []\n")


def _git(workspace: Path, *args: str) -> None:
    """git in the checkout, with fixed dates: the same commits, the same shas, every time."""
    when = "2026-01-01T00:00:00"
    env = {"PATH": "/usr/bin:/bin", "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    command = ["git", "-C", str(workspace), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    subprocess.run(command, check=True, env=env)


def pr_checkout(workspace: Path) -> None:
    """The PR's merge commit over its base, as actions/checkout fetches it: the PR changed the
    culprit pass's source, so its check exercises that pass (given `fetch-depth: 0`)."""
    checkout(workspace)
    _git(workspace, "init", "-q")
    _git(workspace, "add", "-A")
    _git(workspace, "commit", "-qm", "base")
    (workspace / "onnxoptimizer" / "passes" / f"{CULPRIT}.h").write_text("// the pass, changed by the PR\n")
    _git(workspace, "commit", "-qam", "Merge feature into main")
    chown_tree(workspace)


@functools.cache
def base_sha(root: Path) -> str:
    """The sha of `pr_checkout`'s base commit: its commits are the same every time."""
    probe = root / "probe-pr"
    pr_checkout(probe)
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(probe), "rev-parse", "HEAD~1"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def pull_request(root: Path, head_repository: str = REPOSITORY) -> Event:
    payload = {
        "action": "synchronize",
        "number": PR,
        "pull_request": {
            "number": PR,
            "head": {"sha": HEAD_SHA, "ref": "feature", "repo": {"full_name": head_repository}},
            "base": {"sha": base_sha(root), "ref": "main", "repo": {"full_name": REPOSITORY}},
        },
        "repository": {"full_name": REPOSITORY},
    }
    return Event("pull_request", payload, "9" * 40, f"refs/pull/{PR}/merge", f"{PR}/merge")


SCHEDULE = Event("schedule", {"schedule": "17 3 * * *"}, "3" * 40, "refs/heads/main", "main")


def wheel_artifact(runner: Runner, run_id: int, name: str, wheel: Path) -> None:
    """What the example's cibuildwheel job uploads: the manylinux wheel under `name`."""
    staged = runner.root / "wheels" / str(run_id) / name
    staged.mkdir(parents=True)
    shutil.copy(wheel, staged / wheel.name)
    runner.upload(run_id, name, staged)


def sweep_shards(
    runner: Runner, name: str, event: Event, run_id: int, lay_out: Callable[[Path], None] = checkout
) -> list[JobRun]:
    shards = workflow(name)["jobs"]["sweep"]["strategy"]["matrix"]["shard"]
    runs = [runner.job(name, "sweep", event, run_id, lay_out, matrix={"shard": s}) for s in shards]
    for run in runs:
        (sweep,) = run.action_results()
        assert sweep.code == 0, sweep.log[-3000:]  # fail_on: never
        assert not not_the_runners(run.workspace), not_the_runners(run.workspace)[:5]
        assert not (run.workspace / PLANTED).exists()
    return runs


def no_credentials_in(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert TOKEN.encode() not in data and RUNTIME_TOKEN.encode() not in data, path


def test_pr_yml_shards_merge_and_publish_with_the_base_build(runner: Runner, server: GitHubServer, wheels):
    server.open_pull(PR, HEAD_SHA, head_ref="feature")
    server.repo.workflow_runs.setdefault("nightly.yml", [])  # no nightly yet: every result is judged
    run_id = runner.new_run()
    wheel_artifact(runner, run_id, "optimizer-wheel-head", wheels["0.4.2"])
    wheel_artifact(runner, run_id, "optimizer-wheel-base", wheels["0.4.1"])
    shards = sweep_shards(runner, "pr.yml", pull_request(runner.root), run_id, pr_checkout)
    assert sum("base optimizer" in run.action_results()[0].log for run in shards) >= 1
    # the pass whose source the PR changed got models made for it, in the image that has no git
    assert "not looked up" not in shards[0].action_results()[0].log, shards[0].action_results()[0].log[-3000:]

    report = runner.job("pr.yml", "report", pull_request(runner.root), run_id, pr_checkout)
    merge, *publishes = report.action_results()
    assert merge.code == 0, merge.log[-3000:]
    (publish,) = publishes
    merged = json.loads((report.workspace / merge.outputs["report"]).read_text())
    assert merged["optimizer"]["version"] == "0.4.2"
    assert {m["id"] for m in merged["models"]} >= {"onnx-node:test_group_normalization_example_expanded"}
    # the Reshape bug is in 0.4.1 too: the base build reproduces it, so it is known, not new
    culprits = [f for f in merged["findings"] if CULPRIT in f["culprit"]["passes"]]
    assert culprits and {f["status"] for f in culprits} == {"known"}
    # what the PR changed, read from the checkout in the image: the culprit's header, nothing shared
    impact = merged["stats"]["impact"]
    assert (impact["since"], impact["passes"], impact["shared"]) == (base_sha(runner.root), [CULPRIT], [])
    (exercised,) = [p for p in merged["stats"]["exercised"]["passes"] if p["name"] == CULPRIT]
    assert exercised["why"] == "changed"
    assert exercised["models_checked"] > 0 and not exercised["not_run"], exercised
    assert publish.code == 0 and publish.outputs["new"] == "0", publish.log[-3000:]
    (comment,) = [c for c in server.comments_on(PR) if "ditox-ci:sticky" in c["body"]]
    assert "no new bugs" in comment["body"] and "the base build fails the same way" in comment["body"]
    changed = f"**What the PR changed** since {base_sha(runner.root)[:12]}: {CULPRIT}."
    assert changed in comment["body"].replace("\\_", "_"), comment["body"]
    row = f"| {CULPRIT} | changed | {exercised['models_changed']} of {exercised['models_checked']} |"
    assert row in comment["body"].replace("\\_", "_"), comment["body"]
    (check,) = server.repo.check_runs.values()
    assert (check["name"], check["head_sha"], check["conclusion"]) == ("ditox-ci", HEAD_SHA, "success")
    assert not not_the_runners(report.workspace)
    no_credentials_in(report.workspace)


def test_pr_yml_carries_from_the_nightly_what_the_pr_leaves_unchanged(
    runner: Runner, server: GitHubServer, wheels
):
    """With the base branch's nightly report at hand (`reuse_from: workflow:nightly.yml@main`), the
    PR check in the image reads what the PR changed from its checkout (one pass's header) and
    carries every config whose passes it leaves unchanged, the control among them: their findings
    are the night's, and the comment says how many results were carried. The night swept the build
    the head is, so that what the PR leaves unchanged is the same code, as carrying assumes."""
    night_id, night = _nightly(runner, server, wheels["0.4.2"])
    merge, *_ = night.action_results()
    assert merge.code == 0, merge.log[-3000:]
    artifact = {"ditox-report": uploaded_artifact(runner.artifacts[night_id]["ditox-report"])}
    server.add_workflow_run("nightly.yml", conclusion="failure", artifacts=artifact)
    stored = json.loads((night.workspace / merge.outputs["report"]).read_text())

    server.open_pull(PR, HEAD_SHA, head_ref="feature")
    run_id = runner.new_run()
    wheel_artifact(runner, run_id, "optimizer-wheel-head", wheels["0.4.2"])
    wheel_artifact(runner, run_id, "optimizer-wheel-base", wheels["0.4.1"])
    sweep_shards(runner, "pr.yml", pull_request(runner.root), run_id, pr_checkout)
    report = runner.job("pr.yml", "report", pull_request(runner.root), run_id, pr_checkout)
    merge, publish = report.action_results()
    assert merge.code == 0, merge.log[-3000:]
    merged = json.loads((report.workspace / merge.outputs["report"]).read_text())
    stats = merged["stats"]
    assert stats["impact"]["passes"] == [CULPRIT] and stats["impact"]["shared"] == []
    assert stats.get("carried_steps", 0) > 0, stats
    # default and fixed-point run the changed pass; every other config is unchanged
    changed = {"default", "fixed-point", f"pass:{CULPRIT}"}

    def unchanged(found: dict) -> set[tuple[str, str, str, str]]:
        findings = [f for f in found["findings"] if f["config"] not in changed]
        return {(f["model"], f["config"], f["kind"], f["fingerprint"]) for f in findings}

    assert unchanged(merged) == unchanged(stored) and unchanged(merged)
    assert publish.code == 0, publish.log[-3000:]
    (comment,) = [c for c in server.comments_on(PR) if "ditox-ci:sticky" in c["body"]]
    carried = f"{stats['carried_steps']} results of the other passes, the control and the pass lists"
    assert carried in comment["body"], comment["body"]
    no_credentials_in(report.workspace)


def _nightly(runner: Runner, server: GitHubServer, wheel: Path) -> tuple[int, JobRun]:
    server.repo.workflow_runs.setdefault("nightly.yml", [])  # the workflow that is running
    run_id = runner.new_run()
    wheel_artifact(runner, run_id, "optimizer-wheel", wheel)
    sweep_shards(runner, "nightly.yml", SCHEDULE, run_id)
    report = runner.job("nightly.yml", "report", SCHEDULE, run_id, checkout)
    return run_id, report


def test_nightly_yml_files_a_true_issue_then_knows_it_the_next_night(
    runner: Runner, server: GitHubServer, wheels, tmp_path: Path
):
    run_id, first = _nightly(runner, server, wheels["0.4.2"])
    merge, publish, history = first.action_results()
    assert merge.code == 0, merge.log[-3000:]
    assert "no previous report" in publish.log, publish.log[-3000:]  # the first night
    assert publish.code == 1, publish.log[-3000:]  # fail_on: new, and the Reshape bug is new
    (issue,) = [i for i in server.bot_issues() if CULPRIT in i["title"]]
    body = issue["body"]
    # the issue says what happened when ditox-ci ran its script: it reproduced, and it does
    assert "it did show the bug when ditox-ci ran it" in body and "did not show the bug" not in body
    assert 'subgraph after["after eliminate_consecutive_idempotent_ops"]' in body
    script = re.search(r"```python\n(.*?)\n```", body, re.S)
    assert script, "no standalone script in the issue"
    (tmp_path / "standalone.py").write_text(script.group(1))
    ran = subprocess.run(
        [sys.executable, "standalone.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 1 and "BUG PRESENT" in ran.stdout, ran.stdout + ran.stderr
    # one annotation per new bug, on files of this repository that exist in the checkout
    merged = json.loads((first.workspace / merge.outputs["report"]).read_text())
    new_bugs = {f["fingerprint"] for f in merged["findings"] if f["status"] == "new"}
    (check,) = server.repo.check_runs.values()
    annotations = check["_annotations"]
    assert sorted(a["message"].rsplit(" ", 1)[1] for a in annotations) == sorted(new_bugs)
    assert f"onnxoptimizer/passes/{CULPRIT}.h" in [a["path"] for a in annotations]
    assert all((first.workspace / a["path"]).is_file() for a in annotations), annotations
    summary = check["output"]["summary"]
    assert "cd repro/" in summary and f"/actions/runs/{run_id}" in summary
    # upload-sarif ran on the SARIF publish named (the replay checks its version)
    assert (first.workspace / publish.outputs["sarif"]).is_file()
    assert not not_the_runners(first.workspace)
    no_credentials_in(first.workspace)
    # the first night of the history, uploaded with the report and as the Pages site's index
    assert history.code == 0, history.log[-3000:]
    assert first.pages is not None and "1 night, " in (first.pages / "index.html").read_text()
    assert (runner.artifacts[run_id]["ditox-report"] / "history.json").is_file()

    # the next night: last night's report, as nightly.yml uploaded it, is `previous`; that run
    # failed (its gate found the bug new), as GitHub records it
    artifact = {"ditox-report": uploaded_artifact(runner.artifacts[run_id]["ditox-report"])}
    server.add_workflow_run("nightly.yml", conclusion="failure", artifacts=artifact)
    second_id, second = _nightly(runner, server, wheels["0.4.2"])
    merge, publish, history = second.action_results()
    assert publish.code == 0 and publish.outputs["new"] == "0", publish.log[-3000:]
    # last night's history.json came with its report: two nights now, the bug open on both
    assert history.code == 0, history.log[-3000:]
    nights = json.loads((runner.artifacts[second_id]["ditox-report"] / "history.json").read_text())["nights"]
    assert len(nights) == 2 and all(n["bugs"] for n in nights)
    assert len([i for i in server.bot_issues() if CULPRIT in i["title"]]) == 1
    assert issue["state"] == "open"


def test_the_fork_pair_gates_in_the_fork_run_and_publishes_unverified(
    runner: Runner, server: GitHubServer, wheels
):
    fork = pull_request(runner.root, "contributor/optimizer")
    run_id = runner.new_run()
    wheel_artifact(runner, run_id, "optimizer-wheel-head", wheels["0.4.2"])
    wheel_artifact(runner, run_id, "optimizer-wheel-base", wheels["0.4.1"])
    sweep = runner.job("pr-fork.yml", "sweep", fork, run_id, pr_checkout)
    (swept,) = sweep.action_results()
    assert swept.code == 0 and swept.outputs["new"] == "0", swept.log[-3000:]
    assert "ditox-report" in runner.artifacts[run_id]

    server.open_pull(PR, HEAD_SHA, head_repository="contributor/optimizer", head_ref="feature")
    completed = {
        "action": "completed",
        "workflow_run": {
            "id": run_id, "name": "ditox-ci (fork PR)", "event": "pull_request", "status": "completed",
            "conclusion": "success", "head_sha": HEAD_SHA, "head_branch": "feature",
            "head_repository": {"full_name": "contributor/optimizer"}, "pull_requests": [],
        },
        "repository": {"full_name": REPOSITORY},
    }  # fmt: skip
    event = Event("workflow_run", completed, "4" * 40, "refs/heads/main", "main")
    values = {"github.event.workflow_run.id": str(run_id)}
    nothing_checked_out = lambda _: None  # noqa: E731
    comment = runner.job(
        "pr-fork-comment.yml", "publish", event, runner.new_run(), nothing_checked_out, values=values
    )
    (publish,) = comment.action_results()
    assert publish.code == 0, publish.log[-3000:]
    assert [c for c in server.comments_on(PR) if "ditox-ci:sticky" in c["body"]]
    (check,) = server.repo.check_runs.values()
    unverified = ("ditox-ci (unverified)", HEAD_SHA, "neutral")
    assert (check["name"], check["head_sha"], check["conclusion"]) == unverified
    assert server.bot_issues() == []


def _tagged_checkout(workspace: Path) -> None:
    """A checkout with the history `git describe` reads: v0.4.1, then the release v0.4.2 (the
    same commits every time, so the release's commit is known before the job runs)."""
    checkout(workspace)
    _git(workspace, "init", "-q")
    for tag in ("v0.4.1", "v0.4.2"):
        _git(workspace, "commit", "-q", "--allow-empty", "-m", tag)
        _git(workspace, "tag", tag)
    chown_tree(workspace)


def test_release_yml_sweeps_the_wheel_against_the_previous_release(
    runner: Runner, server: GitHubServer, wheels
):
    run_id = runner.new_run()
    wheel_artifact(runner, run_id, "wheels-linux", wheels["0.4.2"])
    probe = runner.root / "probe"
    _tagged_checkout(probe)
    head = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(probe), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
    )
    event = Event("push", {"ref": "refs/tags/v0.4.2"}, head.stdout.strip(), "refs/tags/v0.4.2", "v0.4.2")
    release = runner.job("release.yml", "ditox", event, run_id, _tagged_checkout)
    assert release.results["builds"].outputs["base"] == "onnxoptimizer==0.4.1", release.results["builds"].log
    (ditox,) = release.action_results()
    # the Reshape bug is in 0.4.1 too: known through the base build, so the release may go out
    assert ditox.code == 0 and ditox.outputs["new"] == "0", ditox.log[-3000:]
    (check,) = server.repo.check_runs.values()
    assert check["head_sha"] == event.sha and check["conclusion"] == "success"
    assert not not_the_runners(release.workspace)
