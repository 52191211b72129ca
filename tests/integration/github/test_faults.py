"""Publishing under injected faults: retries, rate limits and dropped connections never duplicate."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ditox_ci.errors import GitHubError
from tests.integration.github_fixtures import (
    BUG_A,
    BUG_B,
    github_env,
    report,
    run_publish,
    sticky_comments,
    write,
)


@pytest.mark.parametrize(
    ("method", "path", "mode"),
    [
        ("POST", r"/issues$", "drop-after"),  # created, but the answer was lost
        ("POST", r"/issues$", "drop"),
        ("POST", r"/issues$", "500"),
        ("POST", r"/issues/7/comments$", "drop-after"),
        ("POST", r"/check-runs$", "drop-after"),
        ("GET", r"/issues$", "drop"),
        ("GET", r"/issues$", "500"),
        ("POST", r"/labels$", "drop-after"),
    ],
)
def test_faults_create_nothing_twice(server, tmp_path: Path, method: str, path: str, mode: str):
    server.inject(method, path, mode, times=2)
    env = github_env(tmp_path, server.url)
    rep = write(tmp_path, "r.json", report(BUG_A, BUG_B))
    assert run_publish(["--report", str(rep), "--file-issues"], env)[0] == 0
    assert run_publish(["--report", str(rep), "--file-issues"], env)[0] == 0
    assert len(server.bot_issues()) == 2
    assert len(sticky_comments(server)) == 1
    assert len(server.repo.check_runs) == 1
    assert sorted(server.repo.labels) == ["ditox-ci", "ditox-ci:optimizer-crash", "ditox-ci:output-mismatch"]
    assert {label["color"] for label in server.repo.labels.values()} == {"b60205"}
    assert server.faults[0].times < 2  # the fault really fired


@pytest.mark.parametrize("mode", ["rate-limit", "429"])
def test_rate_limits_are_waited_out(server, tmp_path: Path, mode: str):
    server.inject("POST", r"/issues$", mode)
    server.inject("GET", r"/issues/7/comments$", mode)
    env = github_env(tmp_path, server.url)
    rep = write(tmp_path, "r.json", report(BUG_A))
    start = time.monotonic()
    assert run_publish(["--report", str(rep), "--file-issues"], env)[0] == 0
    assert time.monotonic() - start >= 1.0  # Retry-After / X-RateLimit-Reset were honoured
    assert len(server.bot_issues()) == 1 and len(sticky_comments(server)) == 1
    # (GET /user answers 403 to the Actions token, as on GitHub: not a rate limit)
    assert [x.status for x in server.exchanges if x.status in (403, 429) and x.path != "/user"] == [
        403 if mode == "rate-limit" else 429
    ] * 2


def test_rate_limit_beyond_max_wait_stops_clearly_after_partial_work(server, tmp_path: Path):
    server.inject("POST", r"/issues$", "429", times=5)
    env = {**github_env(tmp_path, server.url), "DITOX_MAX_WAIT_S": "0.5"}
    rep = write(tmp_path, "r.json", report(BUG_A))
    code, _, err = run_publish(["--report", str(rep), "--file-issues"], env)
    # The comment and check were written, so this is a warning, not a failed step.
    assert code == 0 and len(sticky_comments(server)) == 1
    assert "rate limit exhausted while trying to open issue" in err
    assert not server.bot_issues()


def test_github_down_exits_with_github_error(server, tmp_path: Path):
    server.inject("GET", r".*", "500", times=1000)
    server.inject("POST", r".*", "500", times=1000)
    env = {**github_env(tmp_path, server.url), "DITOX_ATTEMPTS": "2"}
    rep = write(tmp_path, "r.json", report(BUG_A))
    with pytest.raises(GitHubError, match="kept failing"):
        run_publish(["--report", str(rep), "--file-issues"], env)
    assert "ditox-ci: 1 new bug (1 finding on 1 model)" in (tmp_path / "summary.md").read_text()
    assert not server.bot_issues()


def test_a_retried_check_is_the_one_this_publish_created_never_an_older_run(server, tmp_path: Path):
    """The commit's check passed; a later report fails it, and its `POST /check-runs` is dropped
    before GitHub takes it. The retry looked up a run of the check's name on the commit, found the
    older `success` one and took it for its own: the commit stayed green while the log said a
    failing check was created. It looks for the run this publish marked (`external_id`) instead."""
    env = github_env(tmp_path, server.url)
    passing = write(tmp_path, "pass.json", report())
    assert run_publish(["--report", str(passing)], env)[0] == 0
    [older] = server.repo.check_runs.values()
    assert older["conclusion"] == "success"
    server.inject("POST", r"/check-runs$", "drop", times=1)
    failing = write(tmp_path, "fail.json", report(BUG_A))
    assert run_publish(["--report", str(failing)], env)[0] == 0
    assert server.faults[0].times == 0  # the fault fired
    newest = max(server.repo.check_runs.values(), key=lambda run: run["id"])
    assert newest["conclusion"] == "failure" and len(server.repo.check_runs) == 2
    assert newest["external_id"] != older["external_id"]
