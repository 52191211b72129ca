"""The GitHub bot: one sticky PR comment, a check run (or commit status), one issue per fingerprint.

Every object the bot owns carries a hidden marker and is looked up before it is written, so a
re-run (or a run killed halfway) edits what exists instead of creating it twice. Writes are
isolated per step: a read-only token (fork pull requests) stops the writes with one clear
message, and the caller still has the step summary.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
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
from ditox_ci.github.text import Texts, event_marker, fingerprint_in, issue_title
from ditox_ci.log import Log, inert, printable
from ditox_ci.report.model import Finding, Report
from ditox_ci.triage.classify import issue_worthy

T = TypeVar("T")
ANNOTATIONS_PER_REQUEST = 50  # GitHub's limit per check-run create/update call
_LABEL_COLOUR = "b60205"


@dataclass(frozen=True)
class PublishOptions:
    dry_run: bool = False
    comment: bool = True
    check: bool = True
    file_issues: bool = False
    close_fixed: bool = False
    bot_label: str = "ditox-ci"
    comment_key: str = "default"
    check_name: str = "ditox-ci"
    artifact: str = "ditox-report"
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
    read_only: bool = False


class _ReadOnly(Exception):
    """Raised to skip writes once the token turned out to be read-only."""


@dataclass
class _State:
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    read_only: bool = False


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
        if self.state.read_only:
            raise _ReadOnly
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

    def _step(self, name: str, run: Callable[[], None]) -> None:
        """Run one publishing step; its failure is recorded and does not stop the others."""
        try:
            run()
        except _ReadOnly:
            self.state.failed.append(f"{name}: skipped, the token is read-only")
        except WriteDenied as exc:
            self.state.read_only = True
            self.state.failed.append(f"{name}: {exc}")
            self.log.error(
                f"the token cannot write to {self.context.repository} ({exc}); this is expected "
                "on pull requests from forks, which get a read-only token. Otherwise grant the "
                "workflow `pull-requests: write`, `checks: write`, `statuses: write` and "
                "`issues: write`. The results are in the step summary."
            )
        except GithubException as exc:
            self.state.failed.append(f"{name}: GitHub answered {exc.status}")
            self.log.error(f"could not {name}: GitHub answered {exc.status} {error_message(exc)}")

    # -- entry point ----------------------------------------------------------------------------

    def publish(self, report: Report) -> PublishResult:
        texts = Texts(report, self.context.sha, self.options.artifact, self.context.run_url)
        steps: list[tuple[str, Callable[[], None]]] = []
        if self.options.comment and self.context.pr_number:
            steps.append(("update the pull request comment", lambda: self._comment(texts)))
        if self.options.check and self.context.sha:
            steps.append(("report the check", lambda: self._check(report, texts)))
        if self.options.file_issues:
            steps.append(("file issues", lambda: self._issues(report, texts)))
        if steps and not self.context.repository and not self.options.dry_run:
            raise GitHubError("GITHUB_REPOSITORY is not set; set it to owner/name or use --dry-run")
        for name, run in steps:
            try:
                self._step(name, run)
            except GitHubError as exc:
                # GitHub is down or rate-limited past --max-wait: later steps would fail alike.
                self.state.failed.append(f"{name}: {exc}")
                self.log.error(str(exc))
                break
        result = PublishResult(tuple(self.state.done), tuple(self.state.failed), self.state.read_only)
        if result.failed and not result.done:
            raise GitHubError(f"nothing could be published to {self.context.repository}: {result.failed[0]}")
        return result

    # -- sticky comment -------------------------------------------------------------------------

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
            return next((c for c in issue.get_comments() if marker in (c.body or "")), None)

        existing = self._read(f"find the ditox-ci comment on #{number}", find)
        if existing is None:
            self._write(
                f"create the ditox-ci comment on #{number}",
                lambda: self.repo.get_issue(number).create_comment(body),
                lookup=find,
                body=body,
            )
        elif existing.body != body:
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
        conclusion = "failure" if new else "success"
        title = f"{len(new)} new finding{'s' if len(new) != 1 else ''}" if new else "no new findings"
        summary = texts.check_summary()
        annotations = [_annotation(f) for f in new]
        try:
            self._check_run(conclusion, title, summary, annotations)
        except WriteDenied as exc:
            # Tokens without `checks: write` (and GitHub Apps without the permission) can still
            # set a commit status, which branch protection treats the same way.
            self.log.warning(f"cannot create a check run ({exc}); setting a commit status instead")
            state = "failure" if new else "success"
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
        sha = self.context.sha
        name = self.options.check_name

        def find() -> CheckRun | None:
            if self.offline:
                return None
            runs = self.repo.get_commit(sha).get_check_runs(check_name=name)
            return next(iter(runs), None)

        existing = self._read(f"find check run {name} on {sha[:12]}", find)
        batches = list(_batches(annotations, ANNOTATIONS_PER_REQUEST))
        if existing is not None and existing.output.annotations_count >= len(annotations):
            # GitHub appends annotations on every update; a re-run must not double them.
            batches = []
        output = {"title": title, "summary": summary}
        first = batches[0] if batches else []
        if existing is None:
            run = self._write(
                f"create check run {name} ({conclusion}) with {len(first)} annotations",
                lambda: self.repo.create_check_run(
                    name=name,
                    head_sha=sha,
                    status="completed",
                    conclusion=conclusion,
                    output={**output, "annotations": first},
                    details_url=self.context.run_url or NotSet,
                ),
                lookup=find,
            )
        else:
            run = existing
            self._write(
                f"update check run {name} ({conclusion}) with {len(first)} annotations",
                lambda: existing.edit(
                    status="completed",
                    conclusion=conclusion,
                    output={**output, "annotations": first},
                ),
            )
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
        """The bot's issues by fingerprint: bot label + hidden marker, oldest issue first wins."""
        if self.offline:
            return {}
        found: dict[str, Issue] = {}

        def scan() -> dict[str, Issue]:
            issues = self.repo.get_issues(
                state="all", labels=[self.options.bot_label], sort="created", direction="asc"
            )
            for issue in issues:
                fingerprint = fingerprint_in(issue.body)
                if fingerprint and issue.pull_request is None:
                    found.setdefault(fingerprint, issue)
            return found

        return self._read("list the ditox-ci issues", scan)

    def _label_names(self) -> set[str]:
        if self.offline:
            return set()
        return self._read("list labels", lambda: {label.name for label in self.repo.get_labels()})

    def _create_label(self, name: str) -> str:
        return self.repo.create_label(name, _LABEL_COLOUR, "filed by ditox-ci").name

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
        labels = [self.options.bot_label] + [
            f"{self.options.bot_label}:{group[0].kind}" for group in open_by_fp.values()
        ]
        if open_by_fp:
            self._ensure_labels(labels)
        for fingerprint, group in open_by_fp.items():
            issue = existing.get(fingerprint)
            finding = group[0]
            if issue is None:
                self._file_issue(finding, group, texts)
            elif issue.state == "closed":
                if issue.state_reason == "not_planned":
                    self.log.info(f"   GitHub: #{issue.number} was closed as not planned; left closed")
                    continue
                self._comment_once(issue, finding, "regressed", texts)
                self._write(f"reopen issue #{issue.number}", partial(issue.edit, state="open"))
            else:
                self._comment_once(issue, finding, "seen", texts)
        if not self.options.close_fixed:
            return
        for fingerprint, group in fixed_by_fp.items():
            issue = existing.get(fingerprint)
            if issue is None or issue.state == "closed":
                continue
            self._comment_once(issue, group[0], "fixed", texts, closing=True)
            self._write(
                f"close issue #{issue.number} as fixed",
                partial(issue.edit, state="closed", state_reason="completed"),
            )

    def _file_issue(self, finding: Finding, group: list[Finding], texts: Texts) -> None:
        body = texts.issue(finding, others=[f.model for f in group[1:]])
        title = issue_title(finding)
        labels = [self.options.bot_label, f"{self.options.bot_label}:{finding.kind}"]

        def lookup() -> Issue | None:
            return self._bot_issues().get(finding.fingerprint)

        self._write(
            f"open issue {title!r}",
            lambda: self.repo.create_issue(title=title, body=body, labels=labels),
            lookup=lookup,
            body=body,
        )

    def _comment_once(
        self, issue: Issue, finding: Finding, event: str, texts: Texts, closing: bool = False
    ) -> None:
        """One comment per (issue, event, commit): a re-run of the same commit adds nothing."""
        marker = event_marker(event, finding.fingerprint, self.context.sha)

        def find() -> IssueComment | None:
            return next((c for c in issue.get_comments() if marker in (c.body or "")), None)

        if self._read(f"read the comments of #{issue.number}", find) is not None:
            return
        body = texts.issue_comment(finding, event, closing=closing)
        self._write(
            f"comment '{event}' on issue #{issue.number}",
            lambda: issue.create_comment(body),
            lookup=find,
            body=body,
        )


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
        "annotation_level": "failure",
        "title": f"{finding.kind} in {passes}"[:255],
        "message": f"{finding.model} ({finding.config}): {message}\nfingerprint {finding.fingerprint}",
    }
