"""What a worker's death says: the finding for the step it died in (crash, hang, memory). The
kernel's and /proc's word on why it died is `engine.memory`'s.
"""

from __future__ import annotations

import signal
from enum import Enum
from typing import Any

from ditox_ci.engine.evaluate import RUNNER_TITLES
from ditox_ci.engine.messages import DEFAULT_MEMORY_LIMIT_MB
from ditox_ci.engine.outcome import Outcome
from ditox_ci.report.kinds import OPTIMIZER_CRASH, OPTIMIZER_TIMEOUT, RUNTIME_ERROR, WARNING


class Death(str, Enum):
    """Why the pool replaced a worker; the value is how a finding's message says it."""

    CRASHED = "crashed"  # a signal or an exit of its own
    TIMED_OUT = "timed out"  # one phase took longer than --timeout
    OUT_OF_MEMORY = "ran out of memory"  # the OOM killer's SIGKILL, or Python's MemoryError
    OVER_LIMIT = "exceeded the memory limit"  # the pool saw its RSS over its allowance

    def __str__(self) -> str:
        return self.value

    @property
    def memory(self) -> bool:
        """The model's appetite for memory, not a crash."""
        return self in (Death.OUT_OF_MEMORY, Death.OVER_LIMIT)


def failure_outcome(
    phase: str,
    cause: Death,
    detail: str,
    stderr: str,
    runner_name: str = "onnxruntime",
    allowance_mb: int = DEFAULT_MEMORY_LIMIT_MB,
) -> Outcome:
    in_optimizer = phase == "optimize"
    if in_optimizer and cause.memory:
        return _resource_limit(detail, stderr, allowance_mb)
    if cause is Death.TIMED_OUT:
        kind = OPTIMIZER_TIMEOUT if in_optimizer else RUNTIME_ERROR
    else:
        kind = OPTIMIZER_CRASH if in_optimizer else RUNTIME_ERROR
    runner_title = RUNNER_TITLES.get(runner_name, runner_name)
    where = "optimizer" if in_optimizer else f"{runner_title} on the optimized model"
    if cause.memory:
        # one message whichever caught it (the poll or the kernel, a race the machine's load
        # decides; its words are in evidence.detail), so the same blow-up keeps one fingerprint
        message = f"{where} ran out of memory"
    else:
        message = f"{where} {cause} ({detail})" if detail else f"{where} {cause}"
    evidence: dict[str, Any] = {"message": message, "phase": phase}
    if cause.memory:
        evidence["memory"] = True
    if detail:
        evidence["signal" if cause is Death.CRASHED else "detail"] = detail
    if stderr:
        evidence["stderr"] = stderr
    return Outcome(kind, message, evidence)


def _resource_limit(detail: str, stderr: str, allowance_mb: int) -> Outcome:
    """The optimizer needed more memory than the worker's allowance: a limit of this run, reported
    (a warning, which does not gate) with the allowance it had and how to raise it, not a new bug.
    onnxslim sweeps light/vgg19 fine without the limit that was fitted to onnxoptimizer."""
    message = "optimizer ran out of memory"
    evidence: dict[str, Any] = {
        "message": message,
        "phase": "optimize",
        "memory": True,
        "resource_limit": {"allowance_mb": allowance_mb, "raise_with": "--memory-limit"},
        "detail": detail,
    }
    if stderr:
        evidence["stderr"] = stderr
    return Outcome(WARNING, message, evidence)


def signal_name(exitcode: int | None) -> str:
    if exitcode is None:
        return "killed"
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"
