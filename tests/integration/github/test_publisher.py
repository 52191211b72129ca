"""The publisher against a local GitHub REST server, driven by the real PyGithub over HTTP."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from ditox_ci.report.since import Point, Since, Tried
from tests.integration.github_fixtures import (
    BUG_A,
    BUG_B,
    BUG_B_OTHER_MODEL,
    BY_DESIGN,
    PR,
    SHA,
    WORKFLOW,
    github_env,
    report,
    run_publish,
    sticky_comments,
    write,
)
from tests.integration.github_server import GitHubServer


def test_publish_twice_one_issue_per_fingerprint_and_one_comment(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    path = write(tmp_path, "r1.json", report(BUG_A, BUG_B, BUG_B_OTHER_MODEL, BY_DESIGN))
    argv = ["--report", str(path), "--file-issues"]

    assert run_publish(argv, env)[0] == 0
    first_comment = sticky_comments(server)
    assert len(first_comment) == 1
    issues = server.bot_issues()
    # BUG_B is one bug on two models: one issue; BY_DESIGN is baselined (split_init): no issue.
    assert sorted(BUG_A.fingerprint in (i["body"] or "") for i in issues) == [False, True]
    assert len(issues) == 2
    assert "test\\_pad2/model.onnx" in next(i["body"] for i in issues if BUG_B.fingerprint in i["body"])
    assert {lb["name"] for lb in issues[0]["labels"]} >= {"ditox-ci"}

    # Second run on a new commit: same issues, same comment edited in place, and no comment on
    # the issues (quiet on repeat): their "last seen" note is edited instead.
    env["GITHUB_EVENT_PATH"] = str(tmp_path / "event2.json")
    (tmp_path / "event2.json").write_text(
        '{"pull_request": {"number": 7, "head": {"sha": "' + "c" * 40 + '"}}}'
    )
    path2 = write(tmp_path, "r2.json", report(BUG_A, BUG_B))
    assert run_publish(["--report", str(path2), "--file-issues"], env)[0] == 0
    assert len(server.bot_issues()) == 2
    comments = sticky_comments(server)
    assert len(comments) == 1 and comments[0]["id"] == first_comment[0]["id"]
    assert "1 new" not in comments[0]["body"] or "2 new" in comments[0]["body"]
    for issue in server.bot_issues():
        assert server.comments_on(issue["number"]) == []
        assert re.findall(r"Last seen in commit (\w+)", issue["body"]) == ["cccccccccccc"]

    # Re-running the very same commit adds nothing at all.
    before = len(server.repo.comments)
    assert run_publish(["--report", str(path2), "--file-issues"], env)[0] == 0
    assert len(server.repo.comments) == before
    assert len(server.bot_issues()) == 2


def test_fixed_is_noted_closed_and_regression_reopens(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    first = write(tmp_path, "nightly1.json", report(BUG_A, BUG_B))
    assert run_publish(["--report", str(first), "--file-issues"], env)[0] == 0

    # BUG_B disappears: the previous report makes it "fixed"; --close-fixed closes its issue.
    second = write(tmp_path, "nightly2.json", report(BUG_A))
    argv = ["--report", str(second), "--previous", str(first), "--file-issues", "--close-fixed"]
    assert run_publish(argv, env)[0] == 0
    comment = sticky_comments(server)[0]["body"]
    assert "### Fixed (1)" in comment and BUG_B.fingerprint in comment
    issue_b = next(i for i in server.bot_issues() if BUG_B.fingerprint in i["body"])
    assert issue_b["state"] == "closed" and issue_b["state_reason"] == "completed"
    assert any("ditox-ci:fixed" in c["body"] for c in server.comments_on(issue_b["number"]))

    # BUG_B comes back: the closed issue is reopened with a comment, not filed again.
    third = write(tmp_path, "nightly3.json", report(BUG_A, BUG_B))
    assert run_publish(["--report", str(third), "--file-issues"], env)[0] == 0
    assert len(server.bot_issues()) == 2
    assert issue_b["state"] == "open"
    assert any("ditox-ci:regressed" in c["body"] for c in server.comments_on(issue_b["number"]))


INTRODUCED_IN_039 = Since(
    "releases",
    "introduced",
    Point("0.3.8", "0.3.8"),
    Point("0.3.9", "0.3.9", "https://pypi.org/project/onnxoptimizer/0.3.9/"),
    tried=(Tried("0.3.8", "good", 3, 0), Tried("0.3.9", "bad", 3, 3)),
    builds=2,
)
FIXED_BY_271 = Since(
    "commits",
    "fixed",
    Point("c60025a" + "0" * 33, "c60025a Fix unique variable name (#277)"),
    Point(
        "6250b85" + "0" * 33,
        "6250b85 Fix type information vanishing (#271)",
        "https://github.com/o/r/commit/6250b85",
    ),
    builds=5,
    plausibility="the commit touches shared code, not the culprit pass's own source",
)


def _as_read(markdown: str) -> str:
    """The text as GitHub shows it: Markdown's backslash escapes gone."""
    return re.sub(r"\\(.)", r"\1", markdown)


def test_where_a_bug_came_from_and_went_is_said_once_on_its_issue(server, tmp_path: Path):
    """`ditox-ci bisect` wrote `since` into the report: a new issue says it in its table, an
    issue filed before gets one comment, and a fixed bug's closed issue names its fix."""
    env = github_env(tmp_path, server.url)
    first = write(tmp_path, "n1.json", report(BUG_A))
    assert run_publish(["--report", str(first), "--file-issues"], env)[0] == 0
    bisected = report(replace(BUG_A, since=INTRODUCED_IN_039), replace(BUG_B, since=INTRODUCED_IN_039))
    path = write(tmp_path, "n2.json", bisected)
    for _ in range(2):  # a re-run adds nothing
        assert run_publish(["--report", str(path), "--file-issues"], env)[0] == 0
    issue_a = next(i for i in server.bot_issues() if BUG_A.fingerprint in i["body"])
    issue_b = next(i for i in server.bot_issues() if BUG_B.fingerprint in i["body"])
    release = "[release](https://pypi.org/project/onnxoptimizer/0.3.9/)"
    row = f"| Since | introduced in 0.3.9 (0.3.8 is fine) ({release}); 2 builds tried |"
    assert row in _as_read(issue_b["body"])
    assert "| Since |" not in issue_a["body"]
    said = [c["body"] for c in server.comments_on(issue_a["number"]) if "ditox-ci:since" in c["body"]]
    assert len(said) == 1 and "introduced in 0.3.9 (0.3.8 is fine)" in _as_read(said[0]), said
    assert server.comments_on(issue_b["number"]) == []  # its body says it
    # BUG_A is gone and its issue closed; bisecting the range then names the fix on the closed issue
    gone = write(tmp_path, "n3.json", report(BUG_B))
    argv = ["--report", str(gone), "--previous", str(path), "--file-issues", "--close-fixed"]
    assert run_publish(argv, env)[0] == 0
    assert issue_a["state"] == "closed"
    fixed = replace(BUG_A, status="fixed", since=FIXED_BY_271)
    after = write(tmp_path, "n4.json", report(BUG_B, fixed))
    assert run_publish(["--report", str(after), "--file-issues", "--close-fixed"], env)[0] == 0
    named = [_as_read(c["body"]) for c in server.comments_on(issue_a["number"])]
    named = [body for body in named if "fixed by 6250b85" in body]
    assert len(named) == 1 and "[commit](https://github.com/o/r/commit/6250b85)" in named[0], named
    assert "touches shared code" in named[0]


def test_not_planned_issue_stays_closed(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    path = write(tmp_path, "r.json", report(BUG_A))
    run_publish(["--report", str(path), "--file-issues"], env)
    issue = server.bot_issues()[0]
    issue.update(state="closed", state_reason="not_planned")
    run_publish(["--report", str(path), "--file-issues"], env)
    assert issue["state"] == "closed" and len(server.bot_issues()) == 1


def test_check_run_with_annotations_and_status_fallback(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    path = write(tmp_path, "r.json", report(BUG_A, BUG_B, BY_DESIGN))
    run_publish(["--report", str(path)], env)
    runs = list(server.repo.check_runs.values())
    assert len(runs) == 1 and runs[0]["head_sha"] == SHA and runs[0]["conclusion"] == "failure"
    assert runs[0]["output"]["annotations_count"] == 2
    assert runs[0]["output"]["title"] == "2 new bugs (2 findings on 2 models)"
    run_publish(["--report", str(path)], env)  # a re-run edits, and does not double annotations
    assert len(server.repo.check_runs) == 1 and runs[0]["output"]["annotations_count"] == 2

    server.no_checks_tokens.add("write-token")
    server.repo.check_runs.clear()
    code, _, err = run_publish(["--report", str(path)], env)
    assert code == 0 and "commit status instead" in err
    assert [s["state"] for s in server.repo.statuses[SHA]] == ["failure"]
    assert server.repo.statuses[SHA][0]["target_url"] == "https://github.com/octo/optimizer/actions/runs/42"
    # `fail_on: never` informs: a success, not a pending status that never resolves
    assert run_publish(["--report", str(path), "--fail-on", "never"], env)[0] == 0
    assert [s["state"] for s in server.repo.statuses[SHA]] == ["failure", "success"]


def test_read_only_token_is_a_warning_with_the_results_in_the_summary(server, tmp_path: Path):
    """A fork's pull request gets a read-only token: publish warns and exits 0, so the job's exit
    code stays the gate's; the step summary has the results."""
    env = github_env(tmp_path, server.url, token="read-token")
    path = write(tmp_path, "r.json", report(BUG_A))
    code, _, err = run_publish(["--report", str(path), "--file-issues"], env)
    assert code == 0
    assert "Resource not accessible" in err and "read-only token" in err
    summary = (tmp_path / "summary.md").read_text()
    assert "ditox-ci: 1 new bug (1 finding on 1 model)" in summary and "token was read-only" in summary
    assert not server.repo.comments and not server.bot_issues()
    denied = [x for x in server.exchanges if x.method != "GET"]
    # one denied write per surface: the comment, the check run then its status fallback, a label
    assert [x.status for x in denied] == [403] * 4
    # the only place the token appears is GitHub's own masking command, which hides it
    assert all("read-token" not in text for text in (err.replace("::add-mask::read-token", ""), summary))


def test_dry_run_prints_actions_and_writes_nothing(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    path = write(tmp_path, "r.json", report(BUG_A, BUG_B))
    swept = path.read_bytes()
    code, out, err = run_publish(["--report", str(path), "--file-issues", "--dry-run"], env)
    assert code == 0
    assert path.read_bytes() == swept  # no status changed: the report is left as the sweep wrote it
    assert "[dry-run] would create the ditox-ci comment on #7" in out
    assert out.count("[dry-run] would open issue") == 2
    assert "[dry-run] would create check run ditox-ci (failure)" in out
    assert all(x.method == "GET" for x in server.exchanges)
    # The only place the token appears is GitHub's own masking command, which hides it.
    assert "::add-mask::write-token" in err
    assert "write-token" not in out + err.replace("::add-mask::write-token", "")


def test_pagination_finds_issues_beyond_the_first_page(tmp_path: Path):
    with GitHubServer(per_page_max=2) as server:
        server.open_pull(PR, SHA)
        env = github_env(tmp_path, server.url)
        fillers = [f"{i:020x}" for i in range(5)]
        for fp in fillers:
            server._new_issue(f"old {fp}", f"<!-- ditox-ci:fingerprint={fp} -->", ["ditox-ci"])
        path = write(tmp_path, "r.json", report(BUG_A))
        run_publish(["--report", str(path), "--file-issues"], env)
        run_publish(["--report", str(path), "--file-issues"], env)
        assert len(server.bot_issues()) == 6
        listed = [x for x in server.exchanges if x.path.endswith("/issues") and x.method == "GET"]
        assert len(listed) >= 2 * 3  # three pages of two issues each, on both runs


def workflow_run_env(tmp_path: Path, api_url: str, pulls: list[dict]) -> dict[str, str]:
    """The base repository's workflow_run after a pull_request run: its head is the PR's commit."""
    event = tmp_path / "workflow_run.json"
    event.write_text(
        json.dumps({"workflow_run": {"event": "pull_request", "head_sha": SHA, "pull_requests": pulls}})
    )
    return {
        **github_env(tmp_path, api_url),
        "GITHUB_EVENT_NAME": "workflow_run",
        "GITHUB_EVENT_PATH": str(event),
    }


def test_workflow_run_comments_on_the_pr_of_a_same_repository_run(server, tmp_path: Path):
    env = workflow_run_env(tmp_path, server.url, [{"number": PR, "head": {"sha": SHA}}])
    assert run_publish(["--report", str(write(tmp_path, "r.json", report(BUG_A)))], env)[0] == 0
    assert len(sticky_comments(server)) == 1
    assert [run["head_sha"] for run in server.repo.check_runs.values()] == [SHA]


def test_workflow_run_for_a_fork_comments_on_the_named_pr_only_at_the_reports_commit(server, tmp_path: Path):
    """GitHub lists no PR for a fork's run: --pr names it, and the PR's head must be the commit."""
    env = workflow_run_env(tmp_path, server.url, [])
    path = write(tmp_path, "r.json", report(BUG_A))
    assert run_publish(["--report", str(path)], env)[0] == 0
    assert sticky_comments(server) == []  # no PR known: check only

    assert run_publish(["--report", str(path), "--pr", str(PR)], env)[0] == 0
    assert len(sticky_comments(server)) == 1

    # an artifact that names another PR (its head elsewhere) gets no comment there
    server.open_pull(PR + 1, "d" * 40)
    code, _, err = run_publish(["--report", str(path), "--pr", str(PR + 1)], env)
    assert code == 0 and "not commenting" in err and f"#{PR + 1} is at dddddddddddd" in err
    assert [c for c in server.comments_on(PR + 1) if "ditox-ci:sticky" in c["body"]] == []


def test_one_annotation_per_bug_on_a_file_of_the_repository(server, tmp_path: Path):
    """Annotations go on the culprit pass's source where the workspace is the optimizer's checkout,
    else on the workflow file; a bug seen on two models is one annotation."""
    env = github_env(tmp_path, server.url)
    source = tmp_path / "onnxoptimizer" / "passes" / "fuse_bn_into_conv.h"
    source.parent.mkdir(parents=True)
    source.write_text("// the pass\n")
    path = write(tmp_path, "r.json", report(BUG_A, BUG_B, BUG_B_OTHER_MODEL))
    assert run_publish(["--report", str(path)], env)[0] == 0
    (run,) = server.repo.check_runs.values()
    places = {a["title"]: a["path"] for a in run["_annotations"]}
    assert places == {
        "output-mismatch in fuse_bn_into_conv": "onnxoptimizer/passes/fuse_bn_into_conv.h",
        # fuse_pad_into_conv.h is not in this checkout: the workflow that ran the check
        "optimizer-crash in fuse_pad_into_conv + eliminate_nop_pad": WORKFLOW,
    }
    assert all((tmp_path / place).is_file() or place == WORKFLOW for place in places.values())
    summary = run["output"]["summary"]
    # the repro command of the first new bug (the one seen most) and the run it came from
    assert f"cd repro/{BUG_B.fingerprint}\npython -m pip install -r requirements.txt" in summary
    assert "[the run that made it](https://github.com/octo/optimizer/actions/runs/42)" in summary


def test_a_sweep_that_skipped_more_than_its_limit_fails_the_check_too(server, tmp_path: Path):
    """The Action's job fails on it like on a new bug; a green "no new bugs" check beside it lied."""
    data = report()
    skipped = tuple(replace(m, status="skipped", reason="the download failed") for m in data.models[:2])
    data = replace(data, models=skipped + data.models[2:], stats={**data.stats.to_json(), "max_skipped": 0.1})
    path = write(tmp_path, "r.json", data)
    assert run_publish(["--report", str(path)], github_env(tmp_path, server.url))[0] == 0
    (run,) = server.repo.check_runs.values()
    assert run["conclusion"] == "failure"
    said = f"{len(skipped) / len(data.models):.1%} of the corpus was skipped, more than --max-skipped 0.1"
    assert run["output"]["title"] == f"no new bugs; {said}"


def test_the_check_fails_as_the_jobs_fail_on_does(server, tmp_path: Path):
    """The check counted new findings whatever the Action's `fail_on`: under `any` a job failed on a
    known bug beside a green check, and the comment called known findings "not blocking"."""
    env = github_env(tmp_path, server.url)
    verdicts = {}
    for name, findings in (("known", (BY_DESIGN,)), ("new", (BUG_A, BY_DESIGN))):
        path = write(tmp_path, f"{name}.json", report(*findings))
        for fail_on in ("new", "any", "never"):
            server.repo.check_runs.clear()
            assert run_publish(["--report", str(path), "--fail-on", fail_on], env)[0] == 0
            (run,) = server.repo.check_runs.values()
            verdicts[name, fail_on] = (run["conclusion"], run["output"]["title"].split(" (")[0])
            comment = sticky_comments(server)[0]["body"]
            assert ("Known findings (1) — blocking (`fail_on: any`)" in comment) == (fail_on == "any")
    assert verdicts == {
        ("known", "new"): ("success", "no new bugs"),
        ("known", "any"): ("failure", "1 known bug"),
        ("known", "never"): ("success", "no new bugs"),
        ("new", "new"): ("failure", "1 new bug"),
        ("new", "any"): ("failure", "1 new bug"),
        ("new", "never"): ("neutral", "1 new bug"),
    }
    with pytest.raises(SystemExit) as refused:  # argparse's choices
        run_publish(["--report", str(path), "--fail-on", "all"], env)
    assert refused.value.code == 2


def test_the_step_summary_is_not_called_a_comment_updated_in_place(server, tmp_path: Path):
    """publish writes the comment's text to the step summary too, where a nightly has no comment."""
    path = write(tmp_path, "r.json", report(BUG_A))
    assert run_publish(["--report", str(path)], github_env(tmp_path, server.url))[0] == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "this comment is updated in place" in sticky_comments(server)[0]["body"]
    assert BUG_A.fingerprint in summary and "this comment is updated in place" not in summary


def test_a_message_quoting_the_bots_marker_cannot_cut_the_issue(server, tmp_path: Path):
    """A finding's message (a node name an error quotes) holding the bot's last-seen marker made
    the next sighting rewrite the issue body from there: the repro steps and the environment went."""
    forged = "<!-- ditox-ci:last-seen families=x -->"
    quoting = replace(BUG_A, measured={**BUG_A.measured, "message": f"node '{forged}' failed"})
    env = github_env(tmp_path, server.url)
    first = write(tmp_path, "r1.json", report(quoting))
    assert run_publish(["--report", str(first), "--file-issues"], env)[0] == 0
    [issue] = server.bot_issues()
    assert forged not in issue["body"] and "Environment" in issue["body"]
    env["GITHUB_EVENT_PATH"] = str(tmp_path / "event2.json")
    event = {"pull_request": {"number": 7, "head": {"sha": "c" * 40}}}
    (tmp_path / "event2.json").write_text(json.dumps(event))
    assert run_publish(["--report", str(first), "--file-issues"], env)[0] == 0
    [issue] = server.bot_issues()
    assert "Environment" in issue["body"] and "Reproduce from the run's artifact" in issue["body"]
    assert re.findall(r"Last seen in commit (\w+)", issue["body"]) == ["cccccccccccc"]


def test_another_optimizers_issue_is_never_noted_or_closed_as_this_sweeps(server, tmp_path: Path):
    """Every workflow's token writes as the same bot: the onnxslim nightly's issue for a bug was
    taken for the onnxoptimizer nightly's own, noted, and closed as fixed when that nightly no
    longer saw it. Each issue names its optimizer (`scope` marker), and only its own sweeps touch it."""
    env = github_env(tmp_path, server.url)
    slim = replace(report(BUG_A, BUG_B), optimizer=replace(report().optimizer, name="onnxslim"))
    assert run_publish(["--report", str(write(tmp_path, "slim.json", slim)), "--file-issues"], env)[0] == 0
    theirs = {i["number"]: i for i in server.bot_issues()}
    assert len(theirs) == 2
    first = write(tmp_path, "nightly1.json", report(BUG_A, BUG_B))
    assert run_publish(["--report", str(first), "--file-issues"], env)[0] == 0
    ours = [i for i in server.bot_issues() if i["number"] not in theirs]
    assert len(ours) == 2  # its own, not the other nightly's
    second = write(tmp_path, "nightly2.json", report(BUG_A))
    argv = ["--report", str(second), "--previous", str(first), "--file-issues", "--close-fixed"]
    assert run_publish(argv, env)[0] == 0
    assert all(issue["state"] == "open" for issue in theirs.values())
    assert all("Last seen" in issue["body"] for issue in theirs.values())
    closed = [i for i in ours if i["state"] == "closed"]
    assert len(closed) == 1 and BUG_B.fingerprint in closed[0]["body"]
