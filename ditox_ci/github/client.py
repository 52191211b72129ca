"""A PyGithub connection that survives a flaky GitHub: retries, backoff and rate-limit waits.

One layer: `Retrier.call` retries every call (5xx, dropped connections, rate limits) and PyGithub
itself retries nothing, so a wait is never multiplied by a second loop around it. A POST whose
response was lost may have been applied, and blindly sending it again is how bots file
duplicates: for creates, `Retrier.call` looks the object up again before each retry.

`GitHubClient` is what every publishing surface writes through: retried reads, writes counted
against --max-writes (or printed, with --dry-run), and the bot's own identity.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

import requests
from github import Auth, Github, GithubException, RateLimitExceededException
from github.Issue import Issue
from github.IssueComment import IssueComment
from github.Repository import Repository

from ditox_ci.errors import GitHubError, GitHubUnavailable
from ditox_ci.github.context import GitHubContext
from ditox_ci.log import Log, inert, printable

T = TypeVar("T")

_TRANSPORT_ERRORS = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.RetryError,
)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    backoff_s: float = 2.0
    max_wait_s: float = 300.0
    timeout_s: int = 30
    write_interval_s: float = 1.0


class WriteDenied(Exception):
    """The token may read but not write here (fork pull requests get such tokens)."""


def _header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name.lower():
            return str(value)
    return None


def rate_limit_wait(headers: Mapping[str, Any] | None, now: float) -> float | None:
    """Seconds GitHub asks us to wait (Retry-After, else X-RateLimit-Reset); None if unsaid."""
    retry_after = _header(headers, "Retry-After")
    if retry_after and retry_after.strip().isdigit():
        return float(retry_after)
    reset = _header(headers, "X-RateLimit-Reset")
    if reset and reset.strip().isdigit() and _header(headers, "X-RateLimit-Remaining") == "0":
        return max(0.0, float(reset) - now) + 1.0
    return None


# GitHub's documentation on secondary rate limits: without a retry-after header, "wait for at
# least one minute before retrying".
SECONDARY_LIMIT_WAIT_S = 60.0


def _is_secondary_limit(exc: GithubException) -> bool:
    return exc.status in (403, 429) and "secondary rate limit" in error_message(exc).lower()


def _is_rate_limited(exc: GithubException) -> bool:
    if isinstance(exc, RateLimitExceededException) or exc.status == 429 or _is_secondary_limit(exc):
        return True
    return exc.status == 403 and rate_limit_wait(exc.headers, time.time()) is not None


def _rate_limit_wait_s(exc: GithubException, backoff_s: float) -> float:
    """What GitHub asked for; else a minute on a secondary limit or a 429; else the backoff."""
    asked = rate_limit_wait(exc.headers, time.time())
    if asked is not None:
        return asked
    if _is_secondary_limit(exc) or exc.status == 429:
        return max(SECONDARY_LIMIT_WAIT_S, backoff_s)
    return backoff_s


class Retrier:
    """Runs one GitHub call with backoff; turns what cannot be retried into clear outcomes."""

    def __init__(self, policy: RetryPolicy, log: Log, sleep: Callable[[float], None] = time.sleep) -> None:
        self.policy = policy
        self.log = log
        self.sleep = sleep

    def call(
        self,
        what: str,
        action: Callable[[], T],
        *,
        write: bool = False,
        lookup: Callable[[], T | None] | None = None,
    ) -> T:
        """`action()` with retries. For a create, `lookup()` runs before each retry and its
        result is returned when the earlier attempt turns out to have been applied."""
        for attempt in range(1, self.policy.attempts + 1):
            try:
                return action()
            except GithubException as exc:
                if exc.status == 401:
                    raise GitHubError(
                        f"GitHub rejected the token while trying to {what} (401); pass a valid github_token"
                    ) from None
                if write and exc.status == 403 and not _is_rate_limited(exc):
                    raise WriteDenied(f"{what}: {exc.status} {error_message(exc)}") from None
                if _is_rate_limited(exc):
                    wait = _rate_limit_wait_s(exc, self._backoff(attempt))
                    if wait > self.policy.max_wait_s:
                        raise self._rate_limit_error(what, exc.headers, wait) from None
                elif exc.status >= 500:
                    wait = self._backoff(attempt)
                else:
                    raise
                reason = f"{exc.status} {error_message(exc)}"
            except _TRANSPORT_ERRORS as exc:
                wait = self._backoff(attempt)
                reason = type(exc).__name__
            if attempt == self.policy.attempts:
                raise GitHubUnavailable(
                    f"GitHub kept failing while trying to {what} ({reason}) after "
                    f"{attempt} attempts; re-run the job, publishing is idempotent"
                )
            self.log.info(f"   GitHub: {what} failed ({reason}); retrying in {wait:.1f}s")
            self.sleep(wait)
            if lookup is not None:
                found = self.call(f"look up {what}", lookup)
                if found is not None:
                    return found
        raise AssertionError("unreachable: the loop returns or raises")

    def _backoff(self, attempt: int) -> float:
        return self.policy.backoff_s * 2 ** (attempt - 1)

    def _rate_limit_error(self, what: str, headers: Mapping[str, Any] | None, wait: float) -> GitHubError:
        reset = _header(headers, "X-RateLimit-Reset")
        when = (
            f"it resets at {dt.datetime.fromtimestamp(int(reset), dt.timezone.utc).strftime('%H:%M UTC')}"
            if reset and reset.isdigit()
            else f"GitHub asks to wait {wait:.0f}s"
        )
        return GitHubUnavailable(
            f"GitHub rate limit exhausted while trying to {what}; {when}, more than the "
            f"{self.policy.max_wait_s:.0f}s ditox-ci waits: re-run later, or raise the wait "
            "(publish's --max-wait, DITOX_MAX_WAIT_S for any command)"
        )


def error_message(exc: GithubException) -> str:
    """The first line of GitHub's message about a failed request, for a log line."""
    data = exc.data if isinstance(exc.data, dict) else {}
    text = str(data.get("message") or exc.message or "")
    return text.splitlines()[0][:200] if text else ""


def connect(context: GitHubContext, policy: RetryPolicy) -> Github:
    """A PyGithub client against `context.api_url` (any GitHub, GHES or a local test server)."""
    return Github(
        auth=Auth.Token(context.token) if context.token else None,
        base_url=context.api_url,
        timeout=policy.timeout_s,
        retry=None,
        seconds_between_requests=None,
        seconds_between_writes=policy.write_interval_s or None,
        user_agent="ditox-ci",
    )


# The identity of the Actions GITHUB_TOKEN: an app installation, which GitHub does not let read
# GET /user; any other token's own login is read from there.
ACTIONS_BOT_LOGIN = "github-actions[bot]"


class WriteBudgetSpent(Exception):
    """Raised by a write beyond --max-writes; the surface stops, the rest is in the artifact."""


class GitHubClient:
    """The one connection the surfaces publish through, and the count of what they wrote."""

    def __init__(
        self,
        context: GitHubContext,
        policy: RetryPolicy,
        log: Log,
        *,
        dry_run: bool,
        max_writes: int,
        bot_login: str = "",
        out: TextIO | None = None,
    ) -> None:
        self.context = context
        self.log = log
        self.out = out if out is not None else sys.stdout
        self.dry_run = dry_run
        self.max_writes = max_writes
        self.retrier = Retrier(policy, log)
        # A dry run without a token or repository plans against an empty repository.
        self.offline = dry_run and not (context.token and context.repository)
        self.github = None if self.offline else connect(context, policy)
        self.done: list[str] = []
        self.writes = 0
        self.writes_held_back = False
        self._bot_login_option = bot_login
        self._login: str | None = None

    @property
    def repo(self) -> Repository:
        assert self.github is not None
        return self.github.get_repo(self.context.repository, lazy=True)

    def read(self, what: str, action: Callable[[], T]) -> T:
        return self.retrier.call(what, action)

    def write(
        self,
        what: str,
        action: Callable[[], T],
        lookup: Callable[[], T | None] | None = None,
        body: str | None = None,
    ) -> T | None:
        if self.writes >= self.max_writes:
            self.writes_held_back = True
            raise WriteBudgetSpent
        self.writes += 1
        if self.dry_run:
            # `what` and `body` carry names and messages from the report: inert in the job's log
            print(f"[dry-run] would {inert(printable(what))}", file=self.out)
            if body is not None:
                print("".join(f"    {inert(line)}\n" for line in body.splitlines()), file=self.out)
            self.done.append(what)
            return None
        result = self.retrier.call(what, action, write=True, lookup=lookup)
        self.done.append(what)
        self.log.info(f"   GitHub: {what}")
        return result

    def bot_login(self) -> str:
        """Whose comments and issues are the bot's own: --bot-login, else the token's identity."""
        if self._login is None:
            if self._bot_login_option or self.offline:
                self._login = self._bot_login_option or ACTIONS_BOT_LOGIN
            else:
                try:
                    self._login = self.read("read the token's identity", self._token_login)
                except GithubException as exc:
                    if exc.status not in (403, 404):
                        raise
                    self._login = ACTIONS_BOT_LOGIN
        return self._login

    def _token_login(self) -> str:
        assert self.github is not None
        return str(self.github.get_user().login)

    def is_mine(self, written: Issue | IssueComment) -> bool:
        user = written.user
        return user is not None and str(user.login).lower() == self.bot_login().lower()
