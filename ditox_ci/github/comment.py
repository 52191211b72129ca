"""The sticky pull-request comment: one per PR and --comment-key, edited in place."""

from __future__ import annotations

from dataclasses import dataclass

from github import GithubException
from github.IssueComment import IssueComment

from ditox_ci.github.client import GitHubClient, error_message
from ditox_ci.github.context import GitHubContext
from ditox_ci.github.surface import SURFACES, Surface, SurfaceOptions
from ditox_ci.github.text import Texts
from ditox_ci.log import Log
from ditox_ci.options import option
from ditox_ci.report.model import Report


def pull_of_run(client: GitHubClient, context: GitHubContext) -> int | None:
    """The open PR whose head is the workflow_run's commit, from the run's head repository and
    branch (the event names no PR when it comes from a fork). A push since the run moved the
    head: no PR matches, and the stale report is commented nowhere."""
    owner = context.head_repository.split("/")[0]
    wanted = f"{owner}:{context.head_branch}"
    try:
        pulls = client.read(
            f"find the pull request of {wanted}",
            lambda: list(client.repo.get_pulls(state="open", head=wanted)),
        )
    except GithubException as exc:  # the other surfaces do not need the PR
        client.log.warning(
            f"cannot find the pull request of {wanted} ({exc.status} {error_message(exc)}): no "
            "comment. Grant the workflow `pull-requests: read` (write, to comment)."
        )
        return None
    return next(
        (
            pull.number
            for pull in pulls
            if pull.head.sha == context.sha
            and pull.head.repo is not None
            and pull.head.repo.full_name == context.head_repository
        ),
        None,
    )


@dataclass(frozen=True)
class CommentOptions(SurfaceOptions):
    comment: bool = option(True, help="sticky pull-request comment")
    comment_key: str = option("default", help="tells apart several jobs' comments on one PR")


@SURFACES.register("comment")
class StickyComment(Surface):
    """Writes the report's comment on `context.pr_number`; `url` is the comment's once known."""

    step = "update the pull request comment"
    switch = "comment"
    permission = "pull-requests: write"
    url_output = "comment_url"
    options = CommentOptions

    def __init__(
        self, client: GitHubClient, context: GitHubContext, options: CommentOptions, failed: list[str]
    ) -> None:
        super().__init__(client, context, options, failed)
        self.comment_key = options.comment_key

    def wanted(self, options: CommentOptions, log: Log) -> bool:
        return options.comment and bool(self.context.pr_number)

    def _pr_matches(self, number: int) -> bool:
        """Whether PR `number` is at the report's commit. A number from outside the event (a fork's
        artifact) is the fork's word; checking it keeps a report off another PR's thread."""
        client = self.client
        if not self.context.pr_unverified or client.offline:
            return True
        head = client.read(f"read the head of #{number}", lambda: client.repo.get_pull(number).head.sha)
        if head == self.context.sha:
            return True
        reason = f"#{number} is at {head[:12]}, the report is for {self.context.sha[:12]}"
        self.failed.append(f"{self.step}: {reason}")
        client.log.error(f"not commenting: {reason}; --pr must name the PR the swept commit belongs to")
        return False

    def publish(self, report: Report, texts: Texts) -> None:
        client = self.client
        body = texts.comment(self.comment_key)
        marker = body.splitlines()[0]
        number = self.context.pr_number
        assert number is not None
        if not self._pr_matches(number):
            return

        def find() -> IssueComment | None:
            if client.offline:
                return None
            issue = client.repo.get_issue(number)
            return next(
                (c for c in issue.get_comments() if marker in (c.body or "") and client.is_mine(c)), None
            )

        client.bot_login()
        existing = client.read(f"find the ditox-ci comment on #{number}", find)
        if existing is None:
            created = client.write(
                f"create the ditox-ci comment on #{number}",
                lambda: client.repo.get_issue(number).create_comment(body),
                lookup=find,
                body=body,
            )
            self.url = created.html_url if created is not None else ""
            return
        self.url = existing.html_url
        if existing.body != body:
            client.write(
                f"update the ditox-ci comment on #{number} in place",
                lambda: existing.edit(body),
                body=body,
            )
        else:
            client.log.info(f"   GitHub: the comment on #{number} is up to date")
