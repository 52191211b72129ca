"""Where a publish runs: repository, pull request, commit and token, read from the GITHUB_* env."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ditox_ci.errors import ConfigError, InputError
from ditox_ci.report.model import Finding, Report
from ditox_ci.report.upstream import pass_source
from ditox_ci.safeload import parse_json, read_text

_PR_EVENTS = ("pull_request", "pull_request_target")


@dataclass(frozen=True)
class GitHubContext:
    api_url: str
    repository: str
    event_name: str
    sha: str
    pr_number: int | None = None
    run_url: str | None = None
    # the run whose artifacts hold the report: on workflow_run, the run that made it (a fork's PR
    # run), not this publishing one, which uploads none
    report_run_url: str | None = None
    token: str = ""
    # the PR number came from outside the event (`--pr`, e.g. a fork's report artifact): the
    # publisher comments only after checking that the PR's head is the commit the report is for
    pr_unverified: bool = False
    # workflow_run: where the run's commit came from, to find its PR when the event names none
    # (GitHub leaves `pull_requests` empty for a PR from a fork)
    head_repository: str = ""
    head_branch: str = ""
    # the checkout annotations point into, and the running workflow's file in it (from
    # GITHUB_WORKFLOW_REF, `owner/repo/.github/workflows/x.yml@ref`), the place of last resort
    workspace: Path = Path(".")
    workflow_path: str = ""

    def __repr__(self) -> str:
        # The token must never reach logs, tracebacks or test output.
        return (
            f"GitHubContext(repository={self.repository!r}, event={self.event_name!r}, "
            f"sha={self.sha!r}, pr={self.pr_number!r}, token={'***' if self.token else ''!r})"
        )

    __str__ = __repr__

    def repository_file(self, report: Report, finding: Finding) -> str | None:
        """The file of this repository a finding's annotation or code-scanning alert goes on: the
        culprit pass's source when the workspace is the optimizer's checkout, else the running
        workflow's file; None when neither is known."""
        source = pass_source(report, finding)
        if source and (self.workspace / source).is_file():
            return source
        return self.workflow_path or None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> GitHubContext:
        """The GitHub Actions variables; the token from INPUT_GITHUB_TOKEN, else GITHUB_TOKEN.

        On pull requests GITHUB_SHA is the synthetic merge commit; checks and statuses belong on
        the PR head, so the head sha is taken from the event payload. On workflow_run (publishing
        the report of a finished pull_request run) the commit is that run's head; GitHub lists
        its PR only when the PR is not from a fork, otherwise `--pr` names it.
        """
        repository = env.get("GITHUB_REPOSITORY", "")
        if repository and repository.count("/") != 1:
            raise ConfigError(
                f"GITHUB_REPOSITORY must look like owner/name, got {repository!r}; fix the variable"
            )
        event_name = env.get("GITHUB_EVENT_NAME", "")
        event = _read_event(env.get("GITHUB_EVENT_PATH"))
        pull = event.get("pull_request") if event_name in _PR_EVENTS else None
        sha = env.get("GITHUB_SHA", "")
        pr_number = None
        if isinstance(pull, dict):
            pr_number = int(pull.get("number") or event.get("number") or 0) or None
            sha = str((pull.get("head") or {}).get("sha") or sha)
        server_url = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        run_id = env.get("GITHUB_RUN_ID")
        runs = f"{server_url}/{repository}/actions/runs"
        run_url = report_run_url = f"{runs}/{run_id}" if run_id and repository else None
        run = event.get("workflow_run") if event_name == "workflow_run" else None
        head_repository = head_branch = ""
        if isinstance(run, dict):
            made = run.get("id")
            report_run_url = f"{runs}/{made}" if isinstance(made, int) and repository else None
            sha = str(run.get("head_sha") or sha)
            pulls = [p for p in run.get("pull_requests") or () if isinstance(p, dict)]
            if pulls:
                pr_number = int(pulls[0].get("number") or 0) or None
            head_repository = str((run.get("head_repository") or {}).get("full_name") or "")
            head_branch = str(run.get("head_branch") or "")
        return cls(
            api_url=env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/"),
            repository=repository,
            event_name=event_name,
            sha=sha,
            pr_number=pr_number,
            run_url=run_url,
            report_run_url=report_run_url,
            token=env.get("INPUT_GITHUB_TOKEN") or env.get("GITHUB_TOKEN") or "",
            head_repository=head_repository,
            head_branch=head_branch,
            workspace=Path(env.get("GITHUB_WORKSPACE") or "."),
            workflow_path=_workflow_path(env.get("GITHUB_WORKFLOW_REF", ""), repository),
        )


def pull_request_base(env: Mapping[str, str]) -> str:
    """The commit a pull_request event's PR starts from (`pull_request.base.sha`), "" otherwise."""
    if env.get("GITHUB_EVENT_NAME", "") not in _PR_EVENTS:
        return ""
    pull = _read_event(env.get("GITHUB_EVENT_PATH")).get("pull_request")
    return str((pull.get("base") or {}).get("sha") or "") if isinstance(pull, dict) else ""


def _workflow_path(workflow_ref: str, repository: str) -> str:
    """`.github/workflows/x.yml` of `owner/repo/.github/workflows/x.yml@refs/…` (a reusable
    workflow of another repository has no file here: "")."""
    path = workflow_ref.partition("@")[0]
    prefix = f"{repository}/"
    return path[len(prefix) :] if repository and path.startswith(prefix) else ""


def _read_event(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    text = read_text(Path(path), "GITHUB_EVENT_PATH", "unset it or fix the path")
    data = parse_json(text, f"GITHUB_EVENT_PATH {path}", InputError)
    return data if isinstance(data, dict) else {}
