"""The GitHub bot: one sticky PR comment, a check run (or commit status), one issue per fingerprint.

`publish` runs the surfaces (`comment.py`, `check.py`, `issues.py`) over one `GitHubClient`.

Every object the bot owns carries a hidden marker and is looked up before it is written, so a
re-run (or a run killed halfway) edits what exists instead of creating it twice. An object counts
as the bot's own only when the token's identity wrote it: a marker quoted by someone else is text.
Each surface stands alone: a token that may not write one (checks, say) is a warning there, and
the others still go out. The work is bounded whatever the report's size: at most
`max_annotations` annotations, `max_new_issues` new issues and `max_writes` API writes per run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TextIO

from github import GithubException

from ditox_ci.errors import GitHubError
from ditox_ci.github.check import Check
from ditox_ci.github.client import GitHubClient, RetryPolicy, WriteBudgetSpent, WriteDenied, error_message
from ditox_ci.github.comment import StickyComment, pull_of_run
from ditox_ci.github.context import GitHubContext
from ditox_ci.github.issues import Issues
from ditox_ci.github.text import Texts
from ditox_ci.log import Log
from ditox_ci.report.model import Report

# What each surface needs from the workflow's `permissions:` block.
_PERMISSION = {
    "comment": "pull-requests: write",
    "check": "checks: write (or statuses: write)",
    "issues": "issues: write",
}
_TURN_OFF = {"comment": "--no-comment", "check": "--no-check", "issues": "--no-file-issues"}


@dataclass(frozen=True)
class PublishOptions:
    dry_run: bool = False
    comment: bool = True
    check: bool = True
    file_issues: bool = False
    close_fixed: bool = False
    # a report from a run we cannot vouch for (a fork's artifact): a neutral "unverified" check,
    # and no issue is opened, reopened or closed from it
    untrusted: bool = False
    bot_label: str = "ditox-ci"
    # whose comments and issues are the bot's; empty: the token's own identity
    bot_login: str = ""
    comment_key: str = "default"
    check_name: str = "ditox-ci"
    artifact: str = "ditox-report"
    max_new_issues: int = 10
    max_annotations: int = 50
    max_writes: int = 100
    attempts: int = 4
    backoff_s: float = 2.0
    max_wait_s: float = 300.0
    write_interval_s: float = 1.0
    timeout_s: int = 30


@dataclass(frozen=True)
class PublishResult:
    """What was written (or, with --dry-run, would have been), what failed, and why."""

    done: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    denied: tuple[str, ...] = ()  # the surfaces the token may not write
    read_only: bool = False  # every surface tried was denied (a fork's pull request)
    comment_url: str = ""
    check_url: str = ""
    issues_opened: tuple[int, ...] = ()
    issues_reopened: tuple[int, ...] = ()
    issues_closed: tuple[int, ...] = ()
    issues_held_back: tuple[str, ...] = ()  # titles not filed this run: over --max-new-issues
    writes_held_back: bool = False  # --max-writes was reached


def publish(
    report: Report,
    context: GitHubContext,
    options: PublishOptions,
    log: Log,
    out: TextIO | None = None,
) -> PublishResult:
    """Publish `report` to every surface `options` turns on; each surface stands alone."""
    policy = RetryPolicy(
        attempts=max(1, options.attempts),
        backoff_s=options.backoff_s,
        max_wait_s=options.max_wait_s,
        timeout_s=options.timeout_s,
        write_interval_s=options.write_interval_s,
    )
    client = GitHubClient(
        context,
        policy,
        log,
        dry_run=options.dry_run,
        max_writes=options.max_writes,
        bot_login=options.bot_login,
        out=out,
    )
    if context.pr_number is None and context.head_branch and not client.offline:
        context = replace(context, pr_number=pull_of_run(client, context))
    texts = Texts(report, context.sha, options.artifact, context.run_url)
    failed: list[str] = []
    denied: list[str] = []
    comment = StickyComment(client, context, options.comment_key, failed)
    check = Check(
        client,
        context,
        check_name=options.check_name,
        max_annotations=options.max_annotations,
        untrusted=options.untrusted,
    )
    issues = Issues(
        client,
        context,
        bot_label=options.bot_label,
        max_new_issues=options.max_new_issues,
        close_fixed=options.close_fixed,
    )
    steps: list[tuple[str, str, Callable[[], None]]] = []
    if options.comment and context.pr_number:
        steps.append(("comment", "update the pull request comment", lambda: comment.publish(texts)))
    if options.check and context.sha:
        steps.append(("check", "report the check", lambda: check.publish(report, texts)))
    if options.file_issues and options.untrusted:
        log.warning("the report is untrusted (--untrusted): no issue is opened, reopened or closed")
    elif options.file_issues:
        steps.append(("issues", "file issues", lambda: issues.publish(report, texts)))
    if steps and not context.repository and not options.dry_run:
        raise GitHubError("GITHUB_REPOSITORY is not set; set it to owner/name or use --dry-run")
    finished = 0
    for surface, name, run in steps:
        try:
            finished += _step(surface, name, run, options, log, failed, denied)
        except GitHubError as exc:
            # GitHub is down or rate-limited past --max-wait: later steps would fail alike.
            failed.append(f"{name}: {exc}")
            log.error(str(exc))
            break
    read_only = bool(steps) and len(denied) == len(steps)
    if read_only:
        log.warning(
            f"the token may not write to {context.repository}; this is expected on pull "
            "requests from forks, which get a read-only token. The results are in the step summary."
        )
    elif failed and not finished:
        raise GitHubError(f"nothing could be published to {context.repository}: {failed[0]}")
    return PublishResult(
        done=tuple(client.done),
        failed=tuple(failed),
        denied=tuple(denied),
        read_only=read_only,
        comment_url=comment.url,
        check_url=check.url,
        issues_opened=tuple(issues.opened),
        issues_reopened=tuple(issues.reopened),
        issues_closed=tuple(issues.closed),
        issues_held_back=tuple(issues.held_back),
        writes_held_back=client.writes_held_back,
    )


def _step(
    surface: str,
    name: str,
    run: Callable[[], None],
    options: PublishOptions,
    log: Log,
    failed: list[str],
    denied: list[str],
) -> bool:
    """Run one surface; its failure is recorded and does not stop the others."""
    try:
        run()
        return True
    except WriteBudgetSpent:
        failed.append(
            f"{name}: stopped after {options.max_writes} API writes (--max-writes); "
            f"the rest is in the `{options.artifact}` artifact"
        )
    except WriteDenied as exc:
        denied.append(surface)
        failed.append(f"{name}: {exc}")
        log.warning(
            f"the token may not {name} ({exc}): skipped. Grant the workflow "
            f"`{_PERMISSION[surface]}`, or turn this surface off ({_TURN_OFF[surface]})."
        )
    except GithubException as exc:
        failed.append(f"{name}: GitHub answered {exc.status}")
        log.error(f"could not {name}: GitHub answered {exc.status} {error_message(exc)}")
    return False
