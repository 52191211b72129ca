"""What a stage leaves running when it exits: the entrypoint adopts it and kills it before the next
stage starts (a process the optimizer started may rewrite out/report.json after the sweep ended,
or run on into publish, the stage that holds the token)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

# prctl(PR_SET_CHILD_SUBREAPER): what a stage leaves running when it exits becomes this process's
# child, whatever process group or session it moved to (PID 1 in the container is one anyway)
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _children() -> list[int]:
    me, found = str(os.getpid()), []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError):
            # the fields after the command's closing parenthesis: state, ppid, ...
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if entry.name.isdigit() and fields[1] == me:
                found.append(int(entry.name))
    return found


# how long the entrypoint keeps killing what a stage left: a chain of processes hands each one's
# children to it in turn, one round each (a 130-deep chain outlived a limit of 100 rounds)
LEFTOVERS_S = 30.0


def end_leftovers(within_s: float = LEFTOVERS_S) -> int:
    """Kill what the finished stage left running (a process the optimizer started can rewrite
    out/report.json after the sweep, or run on into publish, which holds the token): stages run
    one at a time, so between them every child of this process is a leftover. Killing one hands
    its own children to this process, hence the rounds, until none is left or `within_s` is
    spent; each is reaped. Returns how many are still running then (0: none), which the caller
    must not ignore."""
    deadline = time.monotonic() + within_s
    while True:
        leftovers = _children()
        if not leftovers or time.monotonic() > deadline:
            return len(leftovers)
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in leftovers:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
