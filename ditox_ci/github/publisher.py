"""The GitHub bot: one sticky PR comment, a check run (or commit status), one issue per fingerprint.

`publish` runs every registered surface (`surface.py`: `comment.py`, `check.py`, `issues.py`, in
that order) over one `GitHubClient`.

Every object the bot owns carries a hidden marker and is looked up before it is written, so a
re-run (or a run killed halfway) edits what exists instead of creating it twice. An object counts
as the bot's own only when the token's identity wrote it: a marker quoted by someone else is text.
Each surface stands alone: a token that may not write one (checks, say) is a warning there, and
the others still go out. The work is bounded whatever the report's size: at most
`max_annotations` annotations, `max_new_issues` new issues and `max_writes` API writes per run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TextIO

from github import GithubException

from ditox_ci.errors import GitHubError
from ditox_ci.github.check import CheckOptions
from ditox_ci.github.client import GitHubClient, RetryPolicy, WriteBudgetSpent, WriteDenied, error_message
from ditox_ci.github.comment import CommentOptions, pull_of_run
from ditox_ci.github.context import GitHubContext
from ditox_ci.github.issues import IssuesOptions
from ditox_ci.github.surface import SURFACES, Surface
from ditox_ci.github.text import Texts
from ditox_ci.log import Log
from ditox_ci.options import option, seconds
from ditox_ci.report.model import Report
from ditox_ci.report.outputs import REPORT_ARTIFACT


@dataclass(frozen=True)
class PublishOptions(CommentOptions, CheckOptions, IssuesOptions):
    """The surfaces' options (each surface's own dataclass) and what the publisher itself takes."""

    dry_run: bool = option(
        False,
        help="print every GitHub action instead of doing it (local files are still written: SARIF, "
        "JUnit, the statuses published into --report)",
    )
    # whose comments and issues are the bot's; empty: the token's own identity
    bot_login: str = option(
        "",
        help="whose comments and issues are the bot's",
        default_text="the token's own identity; github-actions[bot] for the Actions token",
        metavar="LOGIN",
    )
    artifact: str = option(
        REPORT_ARTIFACT,
        help="the artifact the workflow uploads the report folder as, which the comment, check and "
        "issues tell readers to download",
        metavar="NAME",
    )
    max_writes: int = option(100, help="GitHub API writes per run", metavar="N")
    attempts: int = 4
    backoff_s: float = 2.0
    max_wait_s: float = option(
        300.0,
        help="longest wait for a rate limit to reset; env DITOX_MAX_WAIT_S",
        flags=("--max-wait",),
        metavar="SECONDS",
        type=seconds,
    )
    write_interval_s: float = 1.0
    timeout_s: int = 30


@dataclass(frozen=True)
class PublishResult:
    """What was written (or, with --dry-run, would have been), what failed, and why."""

    done: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    denied: tuple[str, ...] = ()  # the surfaces the token may not write
    read_only: bool = False  # every surface tried was denied (a fork's pull request)
    # the Action outputs each surface sets (comment_url, check_url, issues_opened …)
    outputs: Mapping[str, str] = field(default_factory=dict)
    # what the surfaces add to the step summary (the issues held back by --max-new-issues)
    summaries: tuple[str, ...] = ()
    writes_held_back: bool = False  # --max-writes was reached


def texts_for(report: Report, context: GitHubContext, options: PublishOptions) -> Texts:
    """The texts every surface (and the step summary) publishes: where the artifact is, whether
    the report is trusted, and which findings block (`fail_on`)."""
    return Texts(
        report,
        context.sha,
        options.artifact,
        context.report_run_url,
        untrusted=options.untrusted,
        fail_on=options.fail_on,
    )


def in_order() -> list[tuple[str, type[Surface]]]:
    """The surfaces in the order PublishOptions names their options: the comment, which a fork's
    read-only token may still write, before the check and the issues."""
    bases = PublishOptions.__mro__
    return sorted(SURFACES.items(), key=lambda item: bases.index(item[1].options))


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
    texts = texts_for(report, context, options)
    failed: list[str] = []
    denied: list[str] = []
    surfaces = {name: surface(client, context, options, failed) for name, surface in in_order()}
    steps = [(name, surface) for name, surface in surfaces.items() if surface.wanted(options, log)]
    if steps and not context.repository and not options.dry_run:
        raise GitHubError("GITHUB_REPOSITORY is not set; set it to owner/name or use --dry-run")
    finished = 0
    for name, surface in steps:
        try:
            finished += _step(name, surface, report, texts, options, log, denied)
        except GitHubError as exc:
            # GitHub is down or rate-limited past --max-wait: later steps would fail alike.
            failed.append(f"{surface.step}: {exc}")
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
        outputs={key: value for surface in surfaces.values() for key, value in surface.outputs().items()},
        summaries=tuple(text for surface in surfaces.values() if (text := surface.summary())),
        writes_held_back=client.writes_held_back,
    )


def _step(
    surface_name: str,
    surface: Surface,
    report: Report,
    texts: Texts,
    options: PublishOptions,
    log: Log,
    denied: list[str],
) -> bool:
    """Run one surface; its failure is recorded and does not stop the others."""
    name, failed = surface.step, surface.failed
    try:
        surface.publish(report, texts)
        return True
    except WriteBudgetSpent:
        failed.append(
            f"{name}: stopped after {options.max_writes} API writes (--max-writes); "
            f"the rest is in the `{options.artifact}` artifact"
        )
    except WriteDenied as exc:
        denied.append(surface_name)
        failed.append(f"{name}: {exc}")
        log.warning(
            f"the token may not {name} ({exc}): skipped. Grant the workflow "
            f"`{surface.permission}`, or turn this surface off ({surface.turn_off})."
        )
    except GithubException as exc:
        failed.append(f"{name}: GitHub answered {exc.status}")
        log.error(f"could not {name}: GitHub answered {exc.status} {error_message(exc)}")
    return False
