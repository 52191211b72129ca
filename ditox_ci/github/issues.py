"""One issue per fingerprint: filed, noted when seen again, reopened on a regression, closed when fixed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial

from github import GithubException
from github.Issue import Issue
from github.IssueComment import IssueComment

from ditox_ci.github.client import GitHubClient
from ditox_ci.github.context import GitHubContext
from ditox_ci.github.surface import SURFACES, Surface, SurfaceOptions, numbers
from ditox_ci.github.text import (
    BISECTED,
    Texts,
    comment_marker,
    families_in,
    fingerprint_in,
    issue_title,
    last_seen_block,
    model_family,
    scope_in,
    since_marker,
    subject_in,
    with_last_seen,
    with_scope,
    with_subject,
)
from ditox_ci.log import Log
from ditox_ci.options import option
from ditox_ci.report.kinds import FIXED, ModelStatus
from ditox_ci.report.model import Finding, Report
from ditox_ci.report.since import NOT_REPRODUCED
from ditox_ci.report.text import md
from ditox_ci.triage.classify import issue_worthy

_LABEL_COLOUR = "b60205"


@dataclass(frozen=True)
class IssuesOptions(SurfaceOptions):
    file_issues: bool = option(False, help="one issue per fingerprint")
    close_fixed: bool = option(False, help="comment on and close fixed issues")
    max_new_issues: int = option(10, help="issues opened per run", metavar="N")
    bot_label: str = "ditox-ci"


@SURFACES.register("issues")
class Issues(Surface):
    """Files the report's issues; what it opened, reopened, closed and held back is kept here."""

    step = "file issues"
    switch = "file_issues"
    permission = "issues: write"
    options = IssuesOptions

    def __init__(
        self, client: GitHubClient, context: GitHubContext, options: IssuesOptions, failed: list[str]
    ) -> None:
        super().__init__(client, context, options, failed)
        self.bot_label = options.bot_label
        self.max_new_issues = options.max_new_issues
        self.close_fixed = options.close_fixed
        self.opened: list[int] = []
        self.reopened: list[int] = []
        self.closed: list[int] = []
        self.held_back: list[str] = []  # titles not filed this run: over --max-new-issues

    def wanted(self, options: IssuesOptions, log: Log) -> bool:
        if options.file_issues and options.untrusted:
            log.warning("the report is untrusted (--untrusted): no issue is opened, reopened or closed")
            return False
        return options.file_issues

    def outputs(self) -> dict[str, str]:
        return {
            "issues_opened": numbers(self.opened),
            "issues_reopened": numbers(self.reopened),
            "issues_closed": numbers(self.closed),
        }

    def summary(self) -> str:
        if not self.held_back:
            return ""
        shown = self.held_back[:50]
        lines = "".join(f"- {md(title)}\n" for title in shown)
        more, cap = len(self.held_back) - len(shown), self.max_new_issues
        return (
            f"\n### Not filed this run ({len(self.held_back)}, over --max-new-issues {cap})\n\n"
            f"{lines}{f'- …and {more} more' + chr(10) if more else ''}\nThey are filed by the next runs.\n"
        )

    def _bot_issues(self, optimizer: str) -> dict[str, Issue]:
        """The bot's issues about `optimizer` by fingerprint: written by the bot's identity and
        carrying its hidden markers, the oldest one per fingerprint; one whose scope marker names
        another optimizer is another workflow's (`scope_marker`), one without a scope marker was
        filed before there were any. Listed by author (a maintainer may drop or rename the label)
        and by label (in case `creator=` does not match an app's bot login)."""
        client = self.client
        if client.offline:
            return {}
        login = client.bot_login()

        def scan() -> dict[str, Issue]:
            # PyGithub takes a login for `creator` (it asserts str | NamedUser) but types NamedUser
            by_author = client.repo.get_issues(state="all", creator=login)  # type: ignore[arg-type]
            by_label = client.repo.get_issues(state="all", labels=[self.bot_label])
            mine = {
                issue.number: issue
                for issue in (*by_author, *by_label)
                if issue.pull_request is None and client.is_mine(issue)
            }
            found: dict[str, Issue] = {}
            for number in sorted(mine):
                fingerprint = fingerprint_in(mine[number].body)
                if fingerprint and scope_in(mine[number].body) in (optimizer, None):
                    found.setdefault(fingerprint, mine[number])
            return found

        return client.read("list the ditox-ci issues", scan)

    def _label_names(self) -> set[str]:
        client = self.client
        if client.offline:
            return set()
        return client.read("list labels", lambda: {label.name for label in client.repo.get_labels()})

    def _create_label(self, name: str) -> str:
        try:
            return self.client.repo.create_label(name, _LABEL_COLOUR, "filed by ditox-ci").name
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
                self.client.write(
                    f"create label {name}",
                    partial(self._create_label, name),
                    lookup=partial(self._label_if_exists, name),
                )

    def publish(self, report: Report, texts: Texts) -> None:
        open_by_fp = _group(f for f in report.findings if issue_worthy(f, report.gate_tiers))
        fixed_by_fp = _group(f for f in report.findings if f.status == FIXED)
        if not open_by_fp and not (self.close_fixed and fixed_by_fp):
            return
        optimizer = report.optimizer.name
        existing = self._bot_issues(optimizer)
        to_file = [fp for fp in open_by_fp if fp not in existing]
        labels = [self.bot_label] + [
            f"{self.bot_label}:{open_by_fp[fp][0].kind}" for fp in to_file[: self.max_new_issues]
        ]
        if to_file:
            self._ensure_labels(labels)
        opened = 0
        for fingerprint, group in open_by_fp.items():
            issue = existing.get(fingerprint)
            if issue is None:
                if opened >= self.max_new_issues:
                    self.held_back.append(issue_title(group[0]))
                    continue
                self._file_issue(group, texts, optimizer)
                opened += 1
            elif issue.state == "closed":
                self._reopen(issue, report, group, texts)
                self._bisected(issue, group[0], texts)
            else:
                self._seen_again(issue, report, group, texts)
                self._bisected(issue, group[0], texts)
        if self.held_back:
            self.client.log.warning(
                f"{len(self.held_back)} more issues were not opened this run "
                f"(--max-new-issues {self.max_new_issues}); they are listed in the step summary"
            )
        if not self.close_fixed:
            return
        for fingerprint, group in fixed_by_fp.items():
            issue = existing.get(fingerprint)
            if issue is not None and issue.state == "closed":  # closed before its fix was bisected
                self._bisected(issue, group[0], texts)
            if issue is None or issue.state == "closed":
                continue
            unproven = _not_shown_fixed(issue, report, optimizer)
            if unproven:
                self.client.log.info(f"   GitHub: #{issue.number} stays open: {unproven}")
                continue
            self._comment_once(issue, group[0], "fixed", texts, closing=True)
            self._bisected(issue, group[0], texts)
            self.client.write(
                f"close issue #{issue.number} as fixed",
                partial(issue.edit, state="closed", state_reason="completed"),
            )
            self.closed.append(issue.number)

    def _last_seen(self, group: list[Finding], families: set[str]) -> str:
        models = {f.model for f in group}
        return last_seen_block(self.context.sha, _today(), len(models), families)

    def _file_issue(self, group: list[Finding], texts: Texts, optimizer: str) -> None:
        finding = group[0]
        families = {model_family(f.model) for f in group}
        body = with_last_seen(
            texts.issue(finding, others=[f.model for f in group[1:]]), self._last_seen(group, families)
        )
        title = issue_title(finding)
        labels = [self.bot_label, f"{self.bot_label}:{finding.kind}"]

        def lookup() -> Issue | None:
            return self._bot_issues(optimizer).get(finding.fingerprint)

        issue = self.client.write(
            f"open issue {title!r}",
            lambda: self.client.repo.create_issue(title=title, body=body, labels=labels),
            lookup=lookup,
            body=body,
        )
        if issue is not None:
            self.opened.append(issue.number)

    def _reopen(self, issue: Issue, report: Report, group: list[Finding], texts: Texts) -> None:
        log = self.client.log
        if issue.state_reason == "not_planned":
            log.info(f"   GitHub: #{issue.number} was closed as not planned; left closed")
            return
        unproven = _not_run_to_completion(report, [(f.model, f.config) for f in group])
        if unproven:
            log.info(f"   GitHub: #{issue.number} stays closed: this report {unproven}")
            return
        self._comment_once(issue, group[0], "regressed", texts)
        self.client.write(f"reopen issue #{issue.number}", partial(issue.edit, state="open"))
        self.reopened.append(issue.number)
        self._note_last_seen(issue, report, group, families_in(issue.body) or set())

    def _seen_again(self, issue: Issue, report: Report, group: list[Finding], texts: Texts) -> None:
        """Quiet on repeat: the body's last-seen line is edited; a comment only when the bug
        shows on a model family the issue has not seen before."""
        families = {model_family(f.model) for f in group}
        seen = families_in(issue.body)
        fresh = sorted(families - seen) if seen is not None else []
        if fresh:
            finding = next(f for f in group if model_family(f.model) in fresh)
            self._comment_once(issue, finding, "new-family", texts)
        self._note_last_seen(issue, report, group, (seen or set()) | families)

    def _note_last_seen(self, issue: Issue, report: Report, group: list[Finding], families: set[str]) -> None:
        # an issue filed before subject and scope markers gets the model this run saw it on, and
        # this sweep's optimizer
        marked = with_subject(issue.body or "", group[0].model, group[0].config)
        marked = with_scope(marked, report.optimizer.name)
        body = with_last_seen(marked, self._last_seen(group, families))
        if body != issue.body:
            self.client.write(
                f"note the last sighting in issue #{issue.number}", partial(issue.edit, body=body)
            )

    def _bisected(self, issue: Issue, finding: Finding, texts: Texts) -> None:
        """Where `ditox-ci bisect` found the bug came from or left, said once on an issue filed
        before it was bisected (a new issue says it in its body)."""
        since = finding.since
        if since is None or since.change == NOT_REPRODUCED or since_marker(since) in (issue.body or ""):
            return
        self._comment_once(issue, finding, BISECTED, texts)

    def _comment_once(
        self, issue: Issue, finding: Finding, event: str, texts: Texts, closing: bool = False
    ) -> None:
        """One comment per (issue, event, commit), or per bisection result (`comment_marker`): a
        re-run of the same commit adds nothing."""
        client = self.client
        marker = comment_marker(event, finding, self.context.sha)

        def find() -> IssueComment | None:
            return next(
                (c for c in issue.get_comments() if marker in (c.body or "") and client.is_mine(c)), None
            )

        if client.read(f"read the comments of #{issue.number}", find) is not None:
            return
        body = texts.issue_comment(finding, event, closing=closing)
        client.write(
            f"comment '{event}' on issue #{issue.number}",
            lambda: issue.create_comment(body),
            lookup=find,
            body=body,
        )


def _today() -> str:
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def _not_shown_fixed(issue: Issue, report: Report, optimizer: str) -> str | None:
    """Why this run does not show `issue` fixed, or None when it does: it is this optimizer's issue
    (its scope marker) and this run ran the issue's own model and config (its subject marker, which
    the bot wrote) to completion without the bug. What a previous report says about the
    fingerprint is no evidence: it may name any model that ran clean."""
    if scope_in(issue.body) != optimizer:
        return (
            "the issue names no optimizer of its own (filed before ditox-ci recorded one); "
            "a sweep that sees the bug again records it, or close it by hand"
        )
    subject = subject_in(issue.body)
    if subject is None:
        return "the issue names no model of its own (filed before ditox-ci recorded one); close it by hand"
    fingerprint = fingerprint_in(issue.body)
    if any(f.fingerprint == fingerprint and f.status != FIXED for f in report.findings):
        return "this report still shows the bug"
    unproven = _not_run_to_completion(report, [subject])
    return f"this report {unproven}" if unproven else None


def _not_run_to_completion(report: Report, subjects: Iterable[tuple[str, str]]) -> str | None:
    """Why `report` proves nothing about these (model, config) pairs, or None if it does.

    Only a run that finished a model and config can say a bug is gone or back: an interrupted
    report, or one that never ran the model or config, says nothing either way."""
    if report.stats.interrupted:
        return "is from an interrupted sweep"
    models = {entry.id: entry for entry in report.models}
    swept = report.stats.configs
    for model, config in subjects:
        entry = models.get(model)
        if entry is None or entry.status != ModelStatus.OK:
            return f"did not run model {model!r} to completion"
        if config not in (entry.configs or swept):
            return f"did not run config {config!r} on model {model!r}"
    return None


def _group(findings: Iterable[Finding]) -> dict[str, list[Finding]]:
    groups: dict[str, list[Finding]] = {}
    for finding in findings:
        groups.setdefault(finding.fingerprint, []).append(finding)
    return groups
