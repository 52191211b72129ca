"""The report of a workflow's last finished run: what a nightly passes as `previous`.

Findings still in it are known, those gone are fixed (and their issues closed with
`--close-fixed`), and its per-model timings balance the shards. The artifact is a zip that the
earlier run uploaded; only its `report.json` is read, at most MAX_REPORT_BYTES of it (and its
`history.json`, the nights before, when it has one: `ditox-ci history`), and it must
parse as a report before anything uses it.

A run that failed counts: a nightly fails on the night it finds a bug (`fail_on: new`), and were
only successful runs taken, every later night would compare with the night before that bug, call
it new again and fail again, and never see it fixed, so its issue would never close. What makes a
report usable is that it is whole, not how its run ended: one from an interrupted sweep (a shard
cancelled or out of time), or one that skipped more of its corpus than its --max-skipped, is passed
over for an older one, since the models it never judged would make their bugs new again. (The
example nightlies upload the report only once publish went through: a night whose publish failed
must not be the one the next compares with, or a bug it showed fixed would never be marked fixed
again, and its issue never closed.)

Only runs of this repository's own code count: a fork's pull request can edit `nightly.yml` to
run `on: pull_request` from a branch it names `main`, and its successful run with its own
`ditox-report` would otherwise be the nightly's `previous` (everything in it known, its timings
shaping the shards). The token goes only to the API's own origin.
"""

from __future__ import annotations

import itertools
import tempfile
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import requests
from github import GithubException
from github.Artifact import Artifact
from github.GithubObject import NotSet
from github.WorkflowRun import WorkflowRun

from ditox_ci.errors import ConfigError, GitHubError, GitHubUnavailable, InputError
from ditox_ci.github.client import Retrier, RetryPolicy, connect, error_message
from ditox_ci.github.context import GitHubContext
from ditox_ci.log import Log
from ditox_ci.report.model import MAX_REPORT_BYTES, Report, read_report
from ditox_ci.report.nights import HISTORY_FILE, MAX_HISTORY_BYTES
from ditox_ci.safewrite import write_bytes_atomic, written_or_input_error

# runs of the repository's own code on a trusted trigger looked at, newest first, for one that
# still has the artifact (artifacts expire), among at most RUNS_LISTED finished runs (a workflow
# that also runs on pull_request lists those too)
RUNS_LOOKED_AT = 10
RUNS_LISTED = 100
# the triggers on which only the default branch's workflow file runs, with the repository's code
TRUSTED_EVENTS = ("schedule", "workflow_dispatch", "push")
# artifact names the warning about a misnamed artifact lists
NAMES_LISTED = 10


@dataclass(frozen=True)
class PreviousRun:
    run_id: int
    run_url: str
    report: Path
    event: str
    conclusion: str


def _extract_report(archive: BinaryIO, artifact: str) -> bytes:
    data = _extract(archive, artifact, "report.json", MAX_REPORT_BYTES)
    if data is None:
        raise InputError(f"the previous run's artifact {artifact}.zip has no top-level report.json")
    return data


def _extract(archive: BinaryIO, artifact: str, name: str, limit: int) -> bytes | None:
    """The top-level file `name` of the artifact's zip, at most `limit` bytes; None without one."""
    try:
        with zipfile.ZipFile(archive) as bundle:
            member = next((m for m in bundle.infolist() if m.filename == name), None)
            if member is None:
                return None
            if member.file_size > limit:
                raise InputError(f"the previous run's {name} has {member.file_size} bytes: too many")
            with bundle.open(member) as source:
                data = source.read(limit + 1)
            if len(data) > limit:  # a header that lied about the size
                raise InputError(f"the previous run's {name} is over the size limit")
            return data
    except zipfile.BadZipFile as exc:
        raise InputError(f"the previous run's artifact is not a zip archive ({exc})") from None


def _download(url: str, token: str, sink: BinaryIO, timeout_s: float) -> None:
    """The artifact's zip; GitHub answers with a redirect to storage that needs no token (requests
    drops the Authorization header when the redirect leaves the API's host)."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"}
    try:
        with requests.get(url, headers=headers, stream=True, timeout=timeout_s) as answer:
            answer.raise_for_status()
            size = 0
            for chunk in answer.iter_content(1024 * 1024):
                size += len(chunk)
                if size > MAX_REPORT_BYTES:
                    raise InputError("the previous run's artifact is over the size limit")
                sink.write(chunk)
    except requests.HTTPError as exc:
        status = exc.response.status_code if exc.response is not None else 0
        failed = GitHubUnavailable if status >= 500 else GitHubError
        raise failed(f"could not download the previous run's artifact ({status})") from None
    except requests.RequestException as exc:
        what = type(exc).__name__
        raise GitHubUnavailable(f"could not download the previous run's artifact ({what})") from None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"https": 443, "http": 80}.get(scheme)


def _check_origin(url: str, api_url: str) -> None:
    """The token goes to the API's own origin only, whatever the API names as the download URL."""
    if _origin(url) != _origin(api_url):
        scheme, host, port = _origin(url)
        raise GitHubError(
            f"the artifact's download URL is on {scheme}://{host}:{port}, not on the API's origin "
            f"({api_url}): the token is not sent there; check GITHUB_API_URL"
        )


def _untrusted_because(run: WorkflowRun, repository: str) -> str | None:
    """Why `run` cannot be the previous run, or None when its own repository ran it on a trusted trigger."""
    head = getattr(run.head_repository, "full_name", None)
    if head != repository:
        return f"its code came from {head or 'an unnamed repository'}, not {repository}"
    if run.event not in TRUSTED_EVENTS:
        return f"it ran on '{run.event}', not on {', '.join(TRUSTED_EVENTS)}"
    return None


def _not_whole_because(report: Report) -> str | None:
    """Why `report` would call bugs new that are not: models it never finished or skipped."""
    if report.stats.interrupted:
        return "its sweep was interrupted"
    skips = report.skips()
    if skips.too_many:
        return f"its sweep skipped too much ({skips.said()})"
    return None


def _refused(what: str, exc: GithubException) -> GitHubError:
    return GitHubError(
        f"GitHub refused to {what} ({exc.status} {error_message(exc)}); the job needs "
        "`permissions: actions: read`"
    )


def fetch_previous(
    context: GitHubContext,
    workflow: str,
    artifact: str,
    out_dir: Path,
    log: Log,
    branch: str | None = None,
    own_run_id: str | None = None,
    policy: RetryPolicy | None = None,
) -> PreviousRun | None:
    """Download the report of the newest finished run of `workflow` (a file name such as
    nightly.yml) that still has `artifact`, from a sweep that was not interrupted, into
    `out_dir`/report.json; None when there is none (the first night)."""
    policy = policy or RetryPolicy()
    retrier = Retrier(policy, log)
    repo = connect(context, policy).get_repo(context.repository, lazy=True)

    def newest_runs() -> list[WorkflowRun]:
        runs = repo.get_workflow(workflow).get_runs(branch=branch or NotSet, status="completed")
        return list(itertools.islice(runs, RUNS_LISTED))  # PaginatedList's slices overrun short lists

    def artifacts(run: WorkflowRun) -> list[Artifact]:
        return list(run.get_artifacts())

    try:
        runs = retrier.call(f"list the finished runs of {workflow}", newest_runs)
    except GithubException as exc:
        if exc.status == 404:
            raise ConfigError(
                f"no workflow {workflow!r} in {context.repository}: name the file under .github/workflows"
            ) from None
        raise _refused(f"list the runs of {workflow}", exc) from None
    names: set[str] = set()
    looked_at = 0
    for run in runs:
        if own_run_id and str(run.id) == own_run_id:
            continue
        why = _untrusted_because(run, context.repository)
        if why is not None:
            log.warning(f"run {run.id} ({run.html_url}) is not taken as the previous run: {why}")
            continue
        looked_at += 1
        if looked_at > RUNS_LOOKED_AT:
            log.warning(
                f"no report among the last {RUNS_LOOKED_AT} trusted runs of {workflow}; older runs "
                "are not looked at"
            )
            break
        what = f"list the artifacts of run {run.id}"
        try:
            found = retrier.call(what, partial(artifacts, run))
        except GithubException as exc:
            raise _refused(what, exc) from None
        names.update(a.name for a in found)
        match = next((a for a in found if a.name == artifact and not a.expired), None)
        if match is None:
            state = "expired" if any(a.name == artifact for a in found) else "absent"
            log.info(f"run {run.id} ({run.html_url}) is passed over: its artifact '{artifact}' is {state}")
            continue
        _check_origin(match.archive_download_url, context.api_url)
        # a file without a name, so nothing in a folder another user can reach is ever written
        # through: the out folder gets report.json alone, written through no link
        with tempfile.TemporaryFile() as archive:
            _download(match.archive_download_url, context.token, archive, policy.timeout_s)
            archive.seek(0)
            data = _extract_report(archive, artifact)
            archive.seek(0)
            # the nights before it, which `ditox-ci history` carries forward (report/nights.py)
            nights = _extract(archive, artifact, HISTORY_FILE, MAX_HISTORY_BYTES)
        report = out_dir / "report.json"
        try:
            write_bytes_atomic(report, data)
        except OSError as exc:
            raise written_or_input_error(report, exc) from None
        why = _not_whole_because(read_report(report))  # read with the checks of any report from outside
        if why is not None:
            report.unlink()
            log.warning(f"run {run.id} ({run.html_url}) is not taken as the previous run: {why}")
            continue
        if nights is not None:
            try:
                write_bytes_atomic(out_dir / HISTORY_FILE, nights)
            except OSError as exc:
                raise written_or_input_error(out_dir / HISTORY_FILE, exc) from None
        return PreviousRun(run.id, run.html_url, report, run.event, run.conclusion)
    if names and artifact not in names:  # a misnamed artifact would look like the first night forever
        listed = ", ".join(sorted(names)[:NAMES_LISTED]) + (", …" if len(names) > NAMES_LISTED else "")
        log.warning(
            f"the runs of {workflow} looked at have no artifact '{artifact}', only {listed}: "
            "check the name (the Action's `artifact` input, `ditox-ci previous --artifact`)"
        )
    return None
