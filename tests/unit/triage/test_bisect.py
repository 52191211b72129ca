"""The bisection's search (`locate`), its runs for a flaky bug and its confidence, without builds:
a verdict per point is given, and every point the search asks for is counted."""

from __future__ import annotations

import math

import pytest

from ditox_ci.report.since import (
    ABSENT,
    BAD,
    FIXED,
    GOOD,
    INTRODUCED,
    PRESENT_SINCE_OLDEST,
    RELEASES,
    SKIP,
    Point,
    Since,
    Tried,
)
from ditox_ci.triage.bisect import MISS_CHANCE, confidence, locate, runs_for

POINTS = [Point(f"v{i}", f"0.{i}") for i in range(14)]


def _search(states: dict[int, str], points: list[Point] = POINTS) -> tuple[object, list[int]]:
    asked: list[int] = []

    def verdict(point: Point) -> Tried:
        index = points.index(point)
        asked.append(index)
        return Tried(point.ref, states[index], 3, 3 if states[index] == BAD else 0)

    return locate(points, verdict), asked


@pytest.mark.parametrize("first_bad", range(1, 14))
def test_every_change_point_is_found_within_log2_plus_two_builds(first_bad: int) -> None:
    located, asked = _search({i: BAD if i >= first_bad else GOOD for i in range(14)})
    assert (located.change, located.before, located.after) == (
        INTRODUCED,
        POINTS[first_bad - 1],
        POINTS[first_bad],
    )
    assert len(set(asked)) <= math.ceil(math.log2(14)) + 2


def test_a_fix_is_found_the_same_way() -> None:
    located, _ = _search({i: GOOD if i >= 9 else BAD for i in range(14)})
    assert (located.change, located.before, located.after) == (FIXED, POINTS[8], POINTS[9])


def test_untestable_points_are_stepped_round_and_left_as_candidates_only_next_to_the_change() -> None:
    states = {i: BAD if i >= 6 else GOOD for i in range(14)} | {5: SKIP, 10: SKIP}
    located, _ = _search(states)
    assert (located.change, located.before, located.after) == (INTRODUCED, POINTS[4], POINTS[6])
    assert located.candidates == (POINTS[5],)  # 10 was skipped too, but is not between the two


def test_the_ends_decide_when_nothing_changes() -> None:
    located, _ = _search({i: BAD for i in range(14)} | {0: SKIP, 1: SKIP})
    assert (located.change, located.after) == (PRESENT_SINCE_OLDEST, POINTS[2])
    located, _ = _search({i: GOOD for i in range(14)})
    assert (located.change, located.before) == (ABSENT, POINTS[13])
    located, _ = _search({i: SKIP for i in range(14)})
    assert located.change == "inconclusive" and located.note == "no build could be tested"


def test_a_flaky_bug_gets_enough_runs_that_a_miss_is_unlikely() -> None:
    assert runs_for(1.0, 3) == 3
    assert runs_for(0.5, 3) == 6 and MISS_CHANCE >= 0.5**6
    assert runs_for(0.01, 3) == 12  # at most four times --runs


def test_confidence_is_the_chance_no_good_build_missed_the_bug() -> None:
    sure = [Tried("a", BAD, 3, 3), Tried("b", GOOD, 3, 0)]
    assert confidence(sure) == 1.0
    flaky = [Tried("a", BAD, 4, 2), Tried("b", GOOD, 6, 0), Tried("c", GOOD, 6, 0), Tried("d", SKIP)]
    assert confidence(flaky) == pytest.approx((1 - 0.5**6) ** 2)


def test_the_headline_says_what_a_maintainer_reads_first() -> None:
    since = Since(RELEASES, INTRODUCED, before=Point("0.3.8", "0.3.8"), after=Point("0.3.9", "0.3.9"))
    assert since.headline == "introduced in 0.3.9 (0.3.8 is fine)"
    tried = (Tried("0.3.10", GOOD, reason="it has no pass rewrite_input_dtype"), Tried("0.3.11", BAD, 3, 3))
    with_the_pass = Since(
        RELEASES, INTRODUCED, Point("0.3.10", "0.3.10"), Point("0.3.11", "0.3.11"), tried=tried
    )
    assert with_the_pass.headline == "introduced in 0.3.11 (0.3.10 has no pass rewrite_input_dtype)"
    oldest = Since(RELEASES, PRESENT_SINCE_OLDEST, after=Point("0.3.8", "0.3.8"))
    assert oldest.headline == "present since 0.3.8, the oldest release that runs here"
    unsure = Since(
        "commits", FIXED, Point("a" * 40, "aaaaaaa x"), Point("b" * 40, "bbbbbbb Fix (#7)"), confidence=0.9
    )
    assert unsure.headline == "fixed by bbbbbbb Fix (#7) (aaaaaaa x still has it, confidence 90%)"
    assert Since.from_json(unsure.to_json()) == unsure
