"""Progress on long work: a tqdm bar on a terminal, a periodic one-line status in CI logs."""

from __future__ import annotations

import time
from typing import Any

from tqdm import tqdm

from ditox_ci.log import Log

CI_STATUS_EVERY_S = 30.0


class Progress:
    def __init__(self, log: Log, total: int, unit: str):
        self.log, self.total, self.unit = log, total, unit
        self.done = 0
        self.started = self.last_status = time.monotonic()
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

    def _status(self, **postfix: Any) -> None:
        elapsed = time.monotonic() - self.started
        extra = "".join(f", {key} {value}" for key, value in postfix.items())
        # total 0: a stream of unknown length (fuzzing makes models until its budget is spent)
        done = f"{self.done}/{self.total}" if self.total else str(self.done)
        self.log.info(f"   {done} {self.unit} in {elapsed:.0f}s{extra}")
        self.last_status = time.monotonic()

    def advance(self, **postfix: Any) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix(postfix, refresh=False)
            self.bar.update(1)
        elif time.monotonic() - self.last_status >= CI_STATUS_EVERY_S:
            self._status(**postfix)
