"""SIGTERM and SIGINT during a sweep: stop, keep what finished, exit 128 + the signal.

`docker stop`, a cancelled CI job and Ctrl-C send these. The first one raises `Interrupted` in the
main thread wherever it is; the sweep catches it, stops its workers and returns a report of the
models that finished, marked `stats.interrupted`. Later signals, and any once the sweep's work is
done (its `settled` callback disarms the handler), are only noted, so that the report is still
assembled and written whole.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType

from ditox_ci.errors import Interrupted

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass
class SignalStop:
    """While `armed`, the first signal raises Interrupted; after `disarm()` signals are only noted."""

    armed: bool = True
    received: list[int] = field(default_factory=list)

    def disarm(self) -> None:
        self.armed = False

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if self.armed and len(self.received) == 1:
            raise Interrupted(signum)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[SignalStop]:
    """Within the block SIGTERM/SIGINT go to a SignalStop; the old handlers come back after it."""
    stop = SignalStop()
    previous = {signum: signal.signal(signum, stop.handle) for signum in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
