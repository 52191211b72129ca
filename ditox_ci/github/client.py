"""A PyGithub connection that survives a flaky GitHub: retries, backoff and rate-limit waits.

Two layers. urllib3 (PyGithub's `GithubRetry`) retries idempotent requests on 5xx, dropped
connections and rate limits. POST is excluded there: a POST whose response was lost may have
been applied, and blindly sending it again is how bots file duplicates. `Retrier.call` is the
outer layer for everything, and for creates it looks the object up again before each retry.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from github import Auth, Github, GithubException, GithubRetry, RateLimitExceededException
from github.GithubException import RateLimitExceededExceedsMaxWait

from ditox_ci.errors import GitHubError
from ditox_ci.github.context import GitHubContext
from ditox_ci.log import Log

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


def _is_rate_limited(exc: GithubException) -> bool:
    if isinstance(exc, RateLimitExceededException) or exc.status == 429:
        return True
    return exc.status == 403 and rate_limit_wait(exc.headers, time.time()) is not None


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
            except RateLimitExceededExceedsMaxWait as exc:
                raise self._rate_limit_error(what, exc.headers) from None
            except GithubException as exc:
                if exc.status == 401:
                    raise GitHubError(
                        f"GitHub rejected the token while trying to {what} (401); pass a valid github_token"
                    ) from None
                if write and exc.status == 403 and not _is_rate_limited(exc):
                    raise WriteDenied(f"{what}: {exc.status} {error_message(exc)}") from None
                if _is_rate_limited(exc):
                    wait = rate_limit_wait(exc.headers, time.time())
                    wait = self._backoff(attempt) if wait is None else wait
                    if wait > self.policy.max_wait_s:
                        raise self._rate_limit_error(what, exc.headers) from None
                elif exc.status >= 500:
                    wait = self._backoff(attempt)
                else:
                    raise
                reason = f"{exc.status} {error_message(exc)}"
            except _TRANSPORT_ERRORS as exc:
                wait = self._backoff(attempt)
                reason = type(exc).__name__
            if attempt == self.policy.attempts:
                raise GitHubError(
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

    def _rate_limit_error(self, what: str, headers: Mapping[str, Any] | None) -> GitHubError:
        reset = _header(headers, "X-RateLimit-Reset")
        when = (
            dt.datetime.fromtimestamp(int(reset), dt.timezone.utc).strftime("%H:%M UTC")
            if reset and reset.isdigit()
            else "later"
        )
        return GitHubError(
            f"GitHub rate limit exhausted while trying to {what}; it resets at {when}: "
            "re-run then, or raise --max-wait"
        )


def error_message(exc: GithubException) -> str:
    """The first line of GitHub's message about a failed request, for a log line."""
    data = exc.data if isinstance(exc.data, dict) else {}
    text = str(data.get("message") or exc.message or "")
    return text.splitlines()[0][:200] if text else ""


def connect(context: GitHubContext, policy: RetryPolicy) -> Github:
    """A PyGithub client against `context.api_url` (any GitHub, GHES or a local test server)."""
    retry = GithubRetry(
        total=policy.attempts - 1,
        backoff_factor=policy.backoff_s / 2,
        max_rate_limit_wait=policy.max_wait_s,
        secondary_rate_wait=min(60.0, policy.max_wait_s),
        allowed_methods=frozenset({"GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"}),
    )
    return Github(
        auth=Auth.Token(context.token) if context.token else None,
        base_url=context.api_url,
        timeout=policy.timeout_s,
        retry=retry,
        seconds_between_requests=None,
        seconds_between_writes=policy.write_interval_s or None,
        user_agent="ditox-ci",
    )
