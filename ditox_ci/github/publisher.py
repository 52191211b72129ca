"""The GitHub bot: one sticky PR comment, a check run (or commit status), one issue per fingerprint.

Every object the bot owns carries a hidden marker and is looked up before it is written, so a
re-run (or a run killed halfway) edits what exists instead of creating it twice. An object counts
as the bot's own only when the token's identity wrote it: a marker quoted by someone else is text.
Each surface stands alone: a token that may not write one (checks, say) is a warning there, and
the others still go out. The work is bounded whatever the report's size: at most
`max_annotations` annotations, `max_new_issues` new issues and `max_writes` API writes per run.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TextIO, TypeVar

from github import Github, GithubException
from github.CheckRun import CheckRun
from github.GithubObject import NotSet
from github.Issue import Issue
from github.IssueComment import IssueComment
from github.Repository import Repository

from ditox_ci.errors import GitHubError
from ditox_ci.github.client import Retrier, RetryPolicy, WriteDenied, connect, error_message
from ditox_ci.github.context import GitHubContext
from ditox_ci.github.text import (
    CHECK_SUMMARY_LIMIT,
    Texts,
    event_marker,
    families_in,
    fingerprint_in,
    issue_title,
    last_seen_block,
    model_family,
    with_last_seen,
)
from ditox_ci.log import Log, inert, printable
from ditox_ci.report.bugs import group_bugs, headline
from ditox_ci.report.model import Finding, Report
from ditox_ci.triage.classify import issue_worthy

T = TypeVar("T")
ANNOTATIONS_PER_REQUEST = 50  # GitHub's limit per check-run create/update call
_LABEL_COLOUR = "b60205"
# The identity of the Actions GITHUB_TOKEN: an app installation, which GitHub does not let read
# GET /user; any other token's own login is read from there.
ACTIONS_BOT_LOGIN = "github-actions[bot]"
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


class _WriteBudgetSpent(Exception):
    """Raised by a write beyond --max-writes; the step stops, the rest is in the artifact."""


@dataclass
class _State:
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    writes: int = 0
    writes_held_back: bool = False
    comment_url: str = ""
    check_url: str = ""
    opened: list[int] = field(default_factory=list)
    reopened: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    held_back: list[str] = field(default_factory=list)


class Publisher:
    def __init__(
        self,
        context: GitHubContext,
        options: PublishOptions,
        log: Log,
        out: TextIO | None = None,
        client: Github | None = None,
    ) -> None:
        self.context = context
        self.options = options
        self.log = log
        self.out = out if out is not None else sys.stdout
        policy = RetryPolicy(
            attempts=max(1, options.attempts),
            backoff_s=options.backoff_s,
            max_wait_s=options.max_wait_s,
            timeout_s=options.timeout_s,
            write_interval_s=options.write_interval_s,
        )
        self.retrier = Retrier(policy, log)
        # A dry run without a token or repository plans against an empty repository.
        self.offline = options.dry_run and not (context.token and context.repository)
        self.client = None if self.offline else client or connect(context, policy)
        self.state = _State()
        self._login: str | None = None

    # -- plumbing -------------------------------------------------------------------------------

    @property
    def repo(self) -> Repository:
        assert self.client is not None
        return self.client.get_repo(self.context.repository, lazy=True)

    def _read(self, what: str, action: Callable[[], T]) -> T:
        return self.retrier.call(what, action)

    def _write(
        self,
        what: str,
        action: Callable[[], T],
        lookup: Callable[[], T | None] | None = None,
        body: str | None = None,
    ) -> T | None:
        if self.state.writes >= self.options.max_writes:
            self.state.writes_held_back = True
            raise _WriteBudgetSpent
        self.state.writes += 1
        if self.options.dry_run:
            # `what` and `body` carry names and messages from the report: inert in the job's log
            print(f"[dry-run] would {inert(printable(what))}", file=self.out)
            if body is not None:
                print("".join(f"    {inert(line)}\n" for line in body.splitlines()), file=self.out)
            self.state.done.append(what)
            return None
        result = self.retrier.call(what, action, write=True, lookup=lookup)
        self.state.done.append(what)
        self.log.info(f"   GitHub: {what}")
        return result

    def _step(self, surface: str, name: str, run: Callable[[], None]) -> bool:
        """Run one publishing step; its failure is recorded and does not stop the others."""
        try:
            run()
            return True
        except _WriteBudgetSpent:
            self.state.failed.append(
                f"{name}: stopped after {self.options.max_writes} API writes (--max-writes); "
                f"the rest is in the `{self.options.artifact}` artifact"
            )
        except WriteDenied as exc:
            self.state.denied.append(surface)
            self.state.failed.append(f"{name}: {exc}")
            self.log.warning(
                f"the token may not {name} ({exc}): skipped. Grant the workflow "
                f"`{_PERMISSION[surface]}`, or turn this surface off ({_TURN_OFF[surface]})."
            )
        except GithubException as exc:
            self.state.failed.append(f"{name}: GitHub answered {exc.status}")
            self.log.error(f"could not {name}: GitHub answered {exc.status} {error_message(exc)}")
        return False

    # -- identity -------------------------------------------------------------------------------

    def _bot_login(self) -> str:
        """Whose comments and issues are the bot's own: --bot-login, else the token's identity."""
        if self._login is None:
            if self.options.bot_login or self.offline:
                self._login = self.options.bot_login or ACTIONS_BOT_LOGIN
            else:
                try:
                    self._login = self._read("read the token's identity", self._token_login)
                except GithubException as exc:
                    if exc.status not in (403, 404):
                        raise
                    self._login = ACTIONS_BOT_LOGIN
        return self._login

    def _token_login(self) -> str:
        assert self.client is not None
        return str(self.client.get_user().login)

    def _is_mine(self, written: Issue | IssueComment) -> bool:
        user = written.user
        return user is not None and str(user.login).lower() == self._bot_login().lower()

    # -- entry point ----------------------------------------------------------------------------

    def publish(self, report: Report) -> PublishResult:
        if self.context.pr_number is None and self.context.head_branch and not self.offline:
            self.context = replace(self.context, pr_number=self._pull_of_run())
        texts = Texts(report, self.context.sha, self.options.artifact, self.context.run_url)
        steps: list[tuple[str, str, Callable[[], None]]] = []
        if self.options.comment and self.context.pr_number:
            steps.append(("comment", "update the pull request comment", lambda: self._comment(texts)))
        if self.options.check and self.context.sha:
            steps.append(("check", "report the check", lambda: self._check(report, texts)))
        if self.options.file_issues and self.options.untrusted:
            self.log.warning("the report is untrusted (--untrusted): no issue is opened, reopened or closed")
        elif self.options.file_issues:
            steps.append(("issues", "file issues", lambda: self._issues(report, texts)))
        if steps and not self.context.repository and not self.options.dry_run:
            raise GitHubError("GITHUB_REPOSITORY is not set; set it to owner/name or use --dry-run")
        finished = 0
        for surface, name, run in steps:
            try:
                finished += self._step(surface, name, run)
            except GitHubError as exc:
                # GitHub is down or rate-limited past --max-wait: later steps would fail alike.
                self.state.failed.append(f"{name}: {exc}")
                self.log.error(str(exc))
                break
        state = self.state
        read_only = bool(steps) and len(state.denied) == len(steps)
        if read_only:
            self.log.warning(
                f"the token may not write to {self.context.repository}; this is expected on pull "
                "requests from forks, which get a read-only token. The results are in the step summary."
            )
        elif state.failed and not finished:
            raise GitHubError(f"nothing could be published to {self.context.repository}: {state.failed[0]}")
        return PublishResult(
            done=tuple(state.done),
            failed=tuple(state.failed),
            denied=tuple(state.denied),
            read_only=read_only,
            comment_url=state.comment_url,
            check_url=state.check_url,
            issues_opened=tuple(state.opened),
            issues_reopened=tuple(state.reopened),
            issues_closed=tuple(state.closed),
            issues_held_back=tuple(state.held_back),
            writes_held_back=state.writes_held_back,
        )

    # -- sticky comment -------------------------------------------------------------------------

    def _pull_of_run(self) -> int | None:
        """The open PR whose head is the workflow_run's commit, from the run's head repository and
        branch (the event names no PR when it comes from a fork). A push since the run moved the
        head: no PR matches, and the stale report is commented nowhere."""
        owner = self.context.head_repository.split("/")[0]
        wanted = f"{owner}:{self.context.head_branch}"
        try:
            pulls = self._read(
                f"find the pull request of {wanted}",
                lambda: list(self.repo.get_pulls(state="open", head=wanted)),
            )
        except GithubException as exc:  # the other surfaces do not need the PR
            self.log.warning(
                f"cannot find the pull request of {wanted} ({exc.status} {error_message(exc)}): no "
                "comment. Grant the workflow `pull-requests: read` (write, to comment)."
            )
            return None
        return next(
            (
                pull.number
                for pull in pulls
                if pull.head.sha == self.context.sha
                and pull.head.repo is not None
                and pull.head.repo.full_name == self.context.head_repository
            ),
            None,
        )

    def _pr_matches(self, number: int) -> bool:
        """Whether PR `number` is at the report's commit. A number from outside the event (a fork's
        artifact) is the fork's word; checking it keeps a report off another PR's thread."""
        if not self.context.pr_unverified or self.offline:
            return True
        head = self._read(f"read the head of #{number}", lambda: self.repo.get_pull(number).head.sha)
        if head == self.context.sha:
            return True
        reason = f"#{number} is at {head[:12]}, the report is for {self.context.sha[:12]}"
        self.state.failed.append(f"update the pull request comment: {reason}")
        self.log.error(f"not commenting: {reason}; --pr must name the PR the swept commit belongs to")
        return False

    def _comment(self, texts: Texts) -> None:
        body = texts.comment(self.options.comment_key)
        marker = body.splitlines()[0]
        number = self.context.pr_number
        assert number is not None
        if not self._pr_matches(number):
            return

        def find() -> IssueComment | None:
            if self.offline:
                return None
            issue = self.repo.get_issue(number)
            return next(
                (c for c in issue.get_comments() if marker in (c.body or "") and self._is_mine(c)), None
            )

        self._bot_login()
        existing = self._read(f"find the ditox-ci comment on #{number}", find)
        if existing is None:
            created = self._write(
                f"create the ditox-ci comment on #{number}",
                lambda: self.repo.get_issue(number).create_comment(body),
                lookup=find,
                body=body,
            )
            self.state.comment_url = created.html_url if created is not None else ""
            return
        self.state.comment_url = existing.html_url
        if existing.body != body:
            self._write(
                f"update the ditox-ci comment on #{number} in place",
                lambda: existing.edit(body),
                body=body,
            )
        else:
            self.log.info(f"   GitHub: the comment on #{number} is up to date")

    # -- check run, or commit status ------------------------------------------------------------

    def _check(self, report: Report, texts: Texts) -> None:
        new = [f for f in report.findings if f.status == "new"]
        failing = report.new_failures()
        title = headline(group_bugs(failing), "new") if failing else "no new bugs"
        conclusion = "failure" if failing else "success"
        annotations = [_annotation(f) for f in new][: max(0, self.options.max_annotations)]
        # the summary leaves room for the notes below it
        summary = replace(texts, limit=CHECK_SUMMARY_LIMIT - 2000).check_summary()
        if len(new) > len(annotations):
            summary += (
                f"\n\n{len(new) - len(annotations)} more new findings are not annotated here (at most "
                f"{self.options.max_annotations} per check): {texts.pointer}\n"
            )
        if self.options.untrusted:
            conclusion, title = "neutral", f"unverified: {title}"
            summary = (
                "> **Unverified.** This report comes from a run whose code ditox-ci cannot vouch for "
                "(a fork's artifact): it informs, it does not gate, and no issue is filed from it.\n\n"
                + summary
            )
        try:
            self._check_run(conclusion, title, summary, annotations)
        except WriteDenied as exc:
            # Tokens without `checks: write` (and GitHub Apps without the permission) can still
            # set a commit status, which branch protection treats the same way.
            self.log.warning(f"cannot create a check run ({exc}); setting a commit status instead")
            state = "failure" if conclusion == "failure" else "success"
            self._write(
                f"set commit status {self.options.check_name}={state} on {self.context.sha[:12]}",
                lambda: self.repo.get_commit(self.context.sha).create_status(
                    state=state,
                    description=title[:140],
                    context=self.options.check_name,
                    **({"target_url": self.context.run_url} if self.context.run_url else {}),
                ),
            )

    def _check_run(
        self, conclusion: str, title: str, summary: str, annotations: list[dict[str, Any]]
    ) -> None:
        """One check run whose annotations are exactly this report's. GitHub only ever adds
        annotations to a run, so a report whose annotations differ gets a new run (GitHub shows,
        and branch protection reads, the newest run of a name)."""
        sha = self.context.sha
        name = self.options.check_name

        def find() -> CheckRun | None:
            if self.offline:
                return None
            runs = self.repo.get_commit(sha).get_check_runs(check_name=name)
            return next(iter(runs), None)

        def annotated(run: CheckRun) -> list[tuple[Any, ...]]:
            return [_annotation_key(_listed_annotation(a)) for a in run.get_annotations()]

        existing = self._read(f"find check run {name} on {sha[:12]}", find)
        wanted = [_annotation_key(a) for a in annotations]
        same = existing is not None and self._read(
            f"read the annotations of {name}", partial(annotated, existing)
        ) == wanted
        if not same:
            existing = None
        output = {"title": title, "summary": summary}
        if existing is not None:
            self.state.check_url = existing.html_url
            current = (existing.conclusion, existing.output.title, existing.output.summary)
            if current == (conclusion, title, summary):
                self.log.info(f"   GitHub: check run {name} is up to date")
                return
            self._write(
                f"update check run {name} ({conclusion})",
                lambda: existing.edit(status="completed", conclusion=conclusion, output=output),
            )
            return
        batches = list(_batches(annotations, ANNOTATIONS_PER_REQUEST)) or [[]]
        run = self._write(
            f"create check run {name} ({conclusion}) with {len(batches[0])} annotations",
            lambda: self.repo.create_check_run(
                name=name,
                head_sha=sha,
                status="completed",
                conclusion=conclusion,
                output={**output, "annotations": batches[0]},
                details_url=self.context.run_url or NotSet,
            ),
            lookup=find,
        )
        self.state.check_url = run.html_url if run is not None else ""
        for batch in batches[1:]:
            if run is None:  # a dry run created nothing to add to
                print(f"[dry-run] would add {len(batch)} annotations", file=self.out)
                continue
            self._write(
                f"add {len(batch)} annotations to check run {name}",
                partial(run.edit, output={**output, "annotations": batch}),
            )

    # -- issues ---------------------------------------------------------------------------------

    def _bot_issues(self) -> dict[str, Issue]:
        """The bot's issues by fingerprint: written by the bot's identity and carrying its hidden
        marker, the oldest one per fingerprint. Listed by author (a maintainer may drop or rename
        the label) and by label (in case `creator=` does not match an app's bot login)."""
        if self.offline:
            return {}
        login = self._bot_login()

        def scan() -> dict[str, Issue]:
            # PyGithub takes a login for `creator` (it asserts str | NamedUser) but types NamedUser
            by_author = self.repo.get_issues(state="all", creator=login)  # type: ignore[arg-type]
            by_label = self.repo.get_issues(state="all", labels=[self.options.bot_label])
            mine = {
                issue.number: issue
                for issue in (*by_author, *by_label)
                if issue.pull_request is None and self._is_mine(issue)
            }
            found: dict[str, Issue] = {}
            for number in sorted(mine):
                fingerprint = fingerprint_in(mine[number].body)
                if fingerprint:
                    found.setdefault(fingerprint, mine[number])
            return found

        return self._read("list the ditox-ci issues", scan)

    def _label_names(self) -> set[str]:
        if self.offline:
            return set()
        return self._read("list labels", lambda: {label.name for label in self.repo.get_labels()})

    def _create_label(self, name: str) -> str:
        try:
            return self.repo.create_label(name, _LABEL_COLOUR, "filed by ditox-ci").name
        except GithubException as exc:
            if exc.status == 422 and "already_exists" in str(exc.data):
                return name  # a concurrent run (another shard's publish) created it first
            raise

    def _label_if_exists(self, name: str) -> str | None:
        return name if name in self._label_names() else None

    def _ensure_labels(self, names: list[str]) -> None:
        """Create missing labels ourselves: GitHub would auto-create them, but colourless."""
        existing = self._label_names()
        for name in dict.fromkeys(names):
            if name not in existing:
                self._write(
                    f"create label {name}",
                    partial(self._create_label, name),
                    lookup=partial(self._label_if_exists, name),
                )

    def _issues(self, report: Report, texts: Texts) -> None:
        open_by_fp = _group(f for f in report.findings if issue_worthy(f))
        fixed_by_fp = _group(f for f in report.findings if f.status == "fixed")
        if not open_by_fp and not (self.options.close_fixed and fixed_by_fp):
            return
        existing = self._bot_issues()
        to_file = [fp for fp in open_by_fp if fp not in existing]
        labels = [self.options.bot_label] + [
            f"{self.options.bot_label}:{open_by_fp[fp][0].kind}"
            for fp in to_file[: self.options.max_new_issues]
        ]
        if to_file:
            self._ensure_labels(labels)
        opened = 0
        for fingerprint, group in open_by_fp.items():
            issue = existing.get(fingerprint)
            if issue is None:
                if opened >= self.options.max_new_issues:
                    self.state.held_back.append(issue_title(group[0]))
                    continue
                self._file_issue(group, texts)
                opened += 1
            elif issue.state == "closed":
                self._reopen(issue, report, group, texts)
            else:
                self._seen_again(issue, group, texts)
        if self.state.held_back:
            self.log.warning(
                f"{len(self.state.held_back)} more issues were not opened this run "
                f"(--max-new-issues {self.options.max_new_issues}); they are listed in the step summary"
            )
        if not self.options.close_fixed:
            return
        for fingerprint, group in fixed_by_fp.items():
            issue = existing.get(fingerprint)
            if issue is None or issue.state == "closed":
                continue
            unproven = _not_run_to_completion(report, group)
            if unproven:
                self.log.info(f"   GitHub: #{issue.number} stays open: this report {unproven}")
                continue
            self._comment_once(issue, group[0], "fixed", texts, closing=True)
            self._write(
                f"close issue #{issue.number} as fixed",
                partial(issue.edit, state="closed", state_reason="completed"),
            )
            self.state.closed.append(issue.number)

    def _last_seen(self, group: list[Finding], families: set[str]) -> str:
        models = {f.model for f in group}
        return last_seen_block(self.context.sha, _today(), len(models), families)

    def _file_issue(self, group: list[Finding], texts: Texts) -> None:
        finding = group[0]
        families = {model_family(f.model) for f in group}
        body = with_last_seen(
            texts.issue(finding, others=[f.model for f in group[1:]]), self._last_seen(group, families)
        )
        title = issue_title(finding)
        labels = [self.options.bot_label, f"{self.options.bot_label}:{finding.kind}"]

        def lookup() -> Issue | None:
            return self._bot_issues().get(finding.fingerprint)

        issue = self._write(
            f"open issue {title!r}",
            lambda: self.repo.create_issue(title=title, body=body, labels=labels),
            lookup=lookup,
            body=body,
        )
        if issue is not None:
            self.state.opened.append(issue.number)

    def _reopen(self, issue: Issue, report: Report, group: list[Finding], texts: Texts) -> None:
        if issue.state_reason == "not_planned":
            self.log.info(f"   GitHub: #{issue.number} was closed as not planned; left closed")
            return
        unproven = _not_run_to_completion(report, group)
        if unproven:
            self.log.info(f"   GitHub: #{issue.number} stays closed: this report {unproven}")
            return
        self._comment_once(issue, group[0], "regressed", texts)
        self._write(f"reopen issue #{issue.number}", partial(issue.edit, state="open"))
        self.state.reopened.append(issue.number)
        self._note_last_seen(issue, group, families_in(issue.body) or set())

    def _seen_again(self, issue: Issue, group: list[Finding], texts: Texts) -> None:
        """Quiet on repeat: the body's last-seen line is edited; a comment only when the bug
        shows on a model family the issue has not seen before."""
        families = {model_family(f.model) for f in group}
        seen = families_in(issue.body)
        fresh = sorted(families - seen) if seen is not None else []
        if fresh:
            finding = next(f for f in group if model_family(f.model) in fresh)
            self._comment_once(issue, finding, "new-family", texts)
        self._note_last_seen(issue, group, (seen or set()) | families)

    def _note_last_seen(self, issue: Issue, group: list[Finding], families: set[str]) -> None:
        body = with_last_seen(issue.body or "", self._last_seen(group, families))
        if body != issue.body:
            self._write(f"note the last sighting in issue #{issue.number}", partial(issue.edit, body=body))

    def _comment_once(
        self, issue: Issue, finding: Finding, event: str, texts: Texts, closing: bool = False
    ) -> None:
        """One comment per (issue, event, commit): a re-run of the same commit adds nothing."""
        marker = event_marker(event, finding.fingerprint, self.context.sha)

        def find() -> IssueComment | None:
            return next(
                (c for c in issue.get_comments() if marker in (c.body or "") and self._is_mine(c)), None
            )

        if self._read(f"read the comments of #{issue.number}", find) is not None:
            return
        body = texts.issue_comment(finding, event, closing=closing)
        self._write(
            f"comment '{event}' on issue #{issue.number}",
            lambda: issue.create_comment(body),
            lookup=find,
            body=body,
        )


def _today() -> str:
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def _not_run_to_completion(report: Report, group: list[Finding]) -> str | None:
    """Why `report` proves nothing about these findings' model and config, or None if it does.

    Only a run that finished a model and config can say a bug is gone or back: an interrupted
    report, or one that never ran the finding's model or config, says nothing either way."""
    if report.stats.get("interrupted"):
        return "is from an interrupted sweep"
    models = {entry.id: entry for entry in report.models}
    swept = tuple(report.stats.get("configs") or ())
    for finding in group:
        entry = models.get(finding.model)
        if entry is None or entry.status != "ok":
            return f"did not run model {finding.model!r} to completion"
        if finding.config not in (entry.configs or swept):
            return f"did not run config {finding.config!r} on model {finding.model!r}"
    return None


def _group(findings: Iterable[Finding]) -> dict[str, list[Finding]]:
    groups: dict[str, list[Finding]] = {}
    for finding in findings:
        groups.setdefault(finding.fingerprint, []).append(finding)
    return groups


def _batches(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _annotation(finding: Finding) -> dict[str, Any]:
    """Annotation text is plain text (GitHub does not render Markdown there)."""
    passes = " + ".join(finding.culprit.passes) or finding.config
    message = str(finding.evidence.get("message", ""))[:2000]
    path = finding.model if finding.model and ":" not in finding.model else "report.json"
    return {
        "path": path.lstrip("/")[:1000],
        "start_line": 1,
        "end_line": 1,
        "annotation_level": "warning" if finding.kind == "warning" else "failure",
        "title": f"{finding.kind} in {passes}"[:255],
        "message": f"{finding.model} ({finding.config}): {message}\nfingerprint {finding.fingerprint}",
    }


def _listed_annotation(annotation: Any) -> dict[str, Any]:
    """A listed annotation (PyGithub object) as the dict it was created from."""
    names = ("path", "start_line", "end_line", "annotation_level", "title", "message")
    return {name: getattr(annotation, name) for name in names}


def _annotation_key(annotation: dict[str, Any]) -> tuple[Any, ...]:
    return (
        annotation["path"],
        annotation["start_line"],
        annotation["annotation_level"],
        annotation["title"],
        annotation["message"],
    )
