"""Progress in a log: the first status as soon as something finished, then gaps that grow to 30 s,
and the parts of split models counted as they come back."""

from __future__ import annotations

import io
import itertools

from ditox_ci.log import Log
from ditox_ci.sweep.progress import CI_STATUS_EVERY_S, Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _progress(total: int = 1000, parts_total: int = 0) -> tuple[Progress, Clock, io.StringIO]:
    stream, clock = io.StringIO(), Clock()
    return Progress(Log({"CI": "true"}, stream), total, "models", parts_total, clock), clock, stream


def _status_times(progress: Progress, clock: Clock, stream: io.StringIO, until_s: float) -> list[float]:
    """Seconds after the start at which a status was written, one model finishing every 0.5 s."""
    times = []
    while clock.now - 100.0 < until_s:
        clock.now += 0.5
        before = stream.tell()
        progress.advance()
        if stream.tell() != before:
            times.append(clock.now - 100.0)
    return times


def test_the_first_status_comes_within_seconds_and_the_gaps_grow_to_the_ci_interval() -> None:
    progress, clock, stream = _progress()
    times = _status_times(progress, clock, stream, 200)
    assert times[0] == 0.5
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert gaps == sorted(gaps)
    assert max(gaps) == CI_STATUS_EVERY_S
    assert len([t for t in times if t <= 30]) >= 4


def test_a_part_of_a_split_model_moves_the_status_before_the_model_is_done() -> None:
    progress, clock, stream = _progress(total=3, parts_total=4)
    clock.now += 2
    progress.part_done()
    assert stream.getvalue().strip() == "0/3 models in 2s, parts 1/4"
    clock.now += 2
    progress.advance(last_part=True, findings=5)
    assert stream.getvalue().splitlines()[-1].strip() == "1/3 models in 4s, parts 2/4, findings 5"
