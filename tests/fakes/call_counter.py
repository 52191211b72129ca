"""A count of calls over every process of a run, kept in a locked file: what makes a planted fault
that comes and goes happen on the calls a test names, whichever worker makes them."""

from __future__ import annotations

import fcntl
import os


def next_call(variable: str) -> int:
    """This call's number (1-based) among the calls counted in the file `$variable` names."""
    with open(os.environ[variable], "a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        number = int(counter.read() or 0) + 1
        counter.seek(0)
        counter.truncate()
        counter.write(str(number))
    return number
