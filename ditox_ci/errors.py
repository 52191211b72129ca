"""One error tree. Each FatalError subclass owns an exit code and a message that says cause and fix.

Exit codes: 0 no new findings, 1 new findings (the gate), >= 2 the run itself could not be done.
Bugs in ditox-ci itself are InternalError, kept apart so they are never mistaken for bad input.
Both derive from BaseException, as cibuildwheel's FatalError does: a broad `except Exception` kept
so that one model's trouble cannot end a sweep never turns a fatal error or a bug of ours into a
warning. Code that means to catch them names them.
"""

from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_NEW_FINDINGS = 1
# 128 + the signal, as a shell reports a process a signal ended: SIGINT, SIGTERM
EXIT_INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM)


class FatalError(BaseException):
    """The run cannot go on; `main()` prints the message as one line and exits with `exit_code`."""

    exit_code = 2


class UsageError(FatalError):
    """Unknown flag, pass, option or malformed value."""

    exit_code = 2


class ConfigError(FatalError):
    """The config file or an environment/INPUT_* value is wrong."""

    exit_code = 3


class InputError(FatalError):
    """A model source, report or baseline file is missing or unreadable."""

    exit_code = 4


class OptimizerLoadError(FatalError):
    """The optimizer under test cannot be imported or does not have the expected shape."""

    exit_code = 5


class MergeError(FatalError):
    """Shard reports do not fit together (missing, duplicated or from different sweeps)."""

    exit_code = 6


class GitHubError(FatalError):
    """GitHub refused or kept failing after retries."""

    exit_code = 7


class GitHubUnavailable(GitHubError):
    """GitHub kept failing (5xx, the network, a rate limit past --max-wait): an outage, not a
    refusal. What only reads from GitHub for extra context may go on without it."""


class InternalError(BaseException):
    """A bug in ditox-ci itself; reported with a request to file an issue. A sweep records one
    raised on a model against that model and goes on; the run then exits with this code."""

    exit_code = 70


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived: the run stops, keeps what finished, and exits 128 + the signal.

    A BaseException, like KeyboardInterrupt, so that no `except Exception` on the way swallows it.
    """

    def __init__(self, signum: int):
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.signal_name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum
