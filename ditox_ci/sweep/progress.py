"""Progress on long work: a tqdm bar on a terminal, a periodic one-line status in CI logs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from ditox_ci.log import Log

CI_STATUS_EVERY_S = 30.0
# In a log the first status comes as soon as something finished, and the gaps then double from a
# second up to CI_STATUS_EVERY_S: a status every 30 s said nothing during the first 30 s, and a
# reader of a short run took it for hung.
FIRST_GAP_S = 1.0


class Progress:
    """Counts finished units (models) and, for work split into parts, the finished parts too."""

    def __init__(
        self,
        log: Log,
        total: int,
        unit: str,
        parts_total: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.log, self.total, self.unit, self.parts_total = log, total, unit, parts_total
        self.clock = clock
        self.done = self.parts_done = 0
        self.started = clock()
        self.last_status: float | None = None
        interactive = not log.in_ci and not log.quiet and log.stream.isatty()
        self.bar: Any = (
            tqdm(total=total, unit=unit, file=log.stream, dynamic_ncols=True)
            if interactive
            else None
        )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.total:
            self._status()

    def _parts(self) -> dict[str, str]:
        return {"parts": f"{self.parts_done}/{self.parts_total}"} if self.parts_total else {}

    def _status(self, **postfix: Any) -> None:
        now = self.clock()
        extra = "".join(f", {key} {value}" for key, value in {**self._parts(), **postfix}.items())
        # total 0: a stream of unknown length (fuzzing makes models until its budget is spent)
        done = f"{self.done}/{self.total}" if self.total else str(self.done)
        self.log.info(f"   {done} {self.unit} in {now - self.started:.0f}s{extra}")
        self.last_status = now

    def _status_due(self) -> bool:
        if self.last_status is None:
            return True
        gap = min(CI_STATUS_EVERY_S, max(FIRST_GAP_S, self.last_status - self.started))
        return self.clock() - self.last_status >= gap

    def _moved(self, step: int, postfix: dict[str, Any]) -> None:
        if self.bar is not None:
            # a part alone moves no unit: the postfix is redrawn so the bar still shows it
            self.bar.set_postfix({**self._parts(), **postfix}, refresh=not step)
            self.bar.update(step)
        elif self._status_due():
            self._status(**postfix)

    def advance(self, last_part: bool = False, **postfix: Any) -> None:
        """One unit finished; `last_part`: it was split, and this was its last part."""
        self.done += 1
        self.parts_done += last_part
        self._moved(1, postfix)

    def part_done(self, **postfix: Any) -> None:
        """A part of a split unit finished; the unit itself is not done yet."""
        self.parts_done += 1
        self._moved(0, postfix)
