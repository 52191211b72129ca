"""The fork flow's second half (examples/pr-fork-comment.yml) against the local GitHub server: on
`workflow_run` GitHub names no PR for a fork, so publish finds it from the run's head repository,
branch and commit; the fork's report gives a neutral "unverified" check and touches no issue."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.github_fixtures import BUG_A, BUG_B, github_env, report, run_publish, write
from tests.integration.github_server import GitHubServer

FORK = "contributor/optimizer"
BRANCH = "fix-fusion"
RUN_SHA = "c" * 40


def _workflow_run_env(tmp_path: Path, api_url: str) -> dict[str, str]:
    env = github_env(tmp_path, api_url)
    event = tmp_path / "workflow_run.json"
    event.write_text(
        json.dumps(
            {
                "action": "completed",
                "workflow_run": {
                    "id": 99,
                    "event": "pull_request",
                    "head_sha": RUN_SHA,
                    "head_branch": BRANCH,
                    "head_repository": {"full_name": FORK},
                    "pull_requests": [],  # what GitHub sends for a PR from a fork
                },
            }
        )
    )
    return {**env, "GITHUB_EVENT_NAME": "workflow_run", "GITHUB_EVENT_PATH": str(event)}


def _seed(server: GitHubServer) -> None:
    # another fork's PR from a branch of the same name, and another PR of the same fork
    server.open_pull(11, "d" * 40, head_repository="someone-else/optimizer", head_ref=BRANCH)
    server.open_pull(12, RUN_SHA, head_repository=FORK, head_ref=BRANCH)
    server.open_pull(13, "e" * 40, head_repository=FORK, head_ref="other-branch")


def _fork_report(tmp_path: Path) -> Path:
    return write(tmp_path, "report.json", report(BUG_A, BUG_B))


def test_the_fork_pr_is_found_from_the_run_and_gets_a_neutral_unverified_check(tmp_path: Path) -> None:
    with GitHubServer() as server:
        _seed(server)
        env = _workflow_run_env(tmp_path, server.url)
        code, _, err = run_publish(
            ["--report", str(_fork_report(tmp_path)), "--untrusted", "--file-issues", "--close-fixed"], env
        )
        assert code == 0, err
        assert [n for n in (11, 12, 13) if server.comments_on(n)] == [12]
        # the comment says it cannot be trusted, and sends readers to the fork's run for the
        # artifact, not to this publishing run, which has none
        (comment,) = server.comments_on(12)
        assert "> **Unverified.**" in comment["body"]
        assert "/actions/runs/99)" in comment["body"]
        assert f"/actions/runs/{env['GITHUB_RUN_ID']})" not in comment["body"]
        (check,) = server.repo.check_runs.values()
        assert check["head_sha"] == RUN_SHA
        assert check["conclusion"] == "neutral"
        assert check["output"]["title"].startswith("unverified")
        assert server.bot_issues() == []


def test_a_run_whose_pr_moved_on_comments_nowhere(tmp_path: Path) -> None:
    with GitHubServer() as server:
        server.open_pull(12, "f" * 40, head_repository=FORK, head_ref=BRANCH)  # pushed since the run
        env = _workflow_run_env(tmp_path, server.url)
        code, _, err = run_publish(["--report", str(_fork_report(tmp_path)), "--untrusted"], env)
        assert code == 0, err
        assert server.comments_on(12) == []


def test_a_token_that_may_not_list_pull_requests_still_reports_the_check(tmp_path: Path) -> None:
    with GitHubServer() as server:
        _seed(server)
        server.inject("GET", r"/pulls$", "403", times=10)
        env = _workflow_run_env(tmp_path, server.url)
        code, _, err = run_publish(["--report", str(_fork_report(tmp_path)), "--untrusted"], env)
        assert code == 0, err
        assert "pull-requests: read" in err
        assert [n for n in (11, 12, 13) if server.comments_on(n)] == []
        (check,) = server.repo.check_runs.values()
        assert check["conclusion"] == "neutral"
