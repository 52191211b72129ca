"""Since when, and by which change: bisecting findings over ordered builds of the optimizer.

git bisect's search, with syzbot's care. Each finding's repro bundle (its reduced model, inputs and
the optimizer call that shows it) is judged on a build with the sweep's own worker pool and its own
"same failure" rule (`Outcome.same_failure` against what the build the bug was found with shows),
never "any failure":

- a build shows the bug when any of its runs shows the same failure (`bad`), and does not when none
  does (`good`); one that cannot be installed, cannot load the model or fails it in another way
  cannot say (`skip`), and the search tries a neighbour instead; a build without the culprit pass
  cannot have the bug (`good`, said so);
- a bug that shows in only some runs (flaky) gets more runs on each build that does not show it,
  enough that a miss is unlikely, and the result's confidence is the chance that no `good` was a
  miss; below `MIN_CONFIDENCE` it says inconclusive rather than guess;
- the bugs of one report are bisected together: a build made for one bug judges every bug, so the
  next bug's search finds its verdicts there without building again.

Builds are made by a `Builds` (`triage/bisect_builds.py`: releases from a package index, or the
commits of a checkout); the result per finding is a `report.since.Since`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path

import onnx

from ditox_ci.control import PASSES_PREFIX, list_label
from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import write_recorded_inputs
from ditox_ci.engine.original import EXACT_SAMPLES
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import Job, WorkerPool
from ditox_ci.engine.repro_runtime import read_samples
from ditox_ci.errors import InputError, InternalError, OptimizerLoadError
from ditox_ci.log import Log
from ditox_ci.optimizers.install import Installation
from ditox_ci.pinpoint.repro import BUNDLE_RECORD
from ditox_ci.report.model import INTERNAL_ERROR, Finding
from ditox_ci.report.since import (
    ABSENT,
    BAD,
    FIXED,
    GOOD,
    INCONCLUSIVE,
    INTRODUCED,
    NOT_REPRODUCED,
    PASS_ABSENT,
    PRESENT_SINCE_OLDEST,
    RELEASES,
    SKIP,
    Point,
    Since,
    Tried,
)

# below this chance that every `good` verdict is right, a bisection says inconclusive
MIN_CONFIDENCE = 0.8
# a flaky bug's runs per build that does not show it: enough that a miss has at most this chance
MISS_CHANCE = 0.02
# the runs a build gets at most, as a multiple of --runs
MAX_RUNS_FACTOR = 4


@dataclass(frozen=True)
class Bug:
    """A finding to bisect: its repro bundle written as a model the workers read (`ref`), the
    optimizer call that shows it (`step`), and what the build it was found with showed
    (`reference`: the failure the others must show alike; `rate`: in how many of its runs)."""

    finding: Finding
    bundle: Path
    ref: ModelRef
    step: Step
    reference: Outcome | None = None
    rate: float = 0.0

    @property
    def fingerprint(self) -> str:
        return self.finding.fingerprint


def load_bug(bundle: Path, scratch: Path) -> Bug:
    """The bug of repro bundle `bundle` (as `ditox-ci sweep` or `reduce` write them), its model
    and inputs written under `scratch` in the layout the workers read."""
    try:
        record = json.loads((bundle / BUNDLE_RECORD).read_text(encoding="utf-8"))
        finding = Finding.from_json(record["finding"])
        step = Step(
            list_label(PASSES_PREFIX, record["passes"]), tuple(record["passes"]), bool(record["fixed_point"])
        )
        model_path, inputs = bundle / "model.onnx", read_samples(bundle / "inputs.npz")
    except FileNotFoundError as exc:
        raise InputError(
            f"repro bundle {bundle}: no {Path(str(exc.filename)).name}; bisect needs a bundle written by "
            "this ditox-ci (`ditox-ci reduce`, or a sweep's repro/ folder)"
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"repro bundle {bundle}: {BUNDLE_RECORD} is not readable ({exc!r})") from None
    folder = scratch / finding.fingerprint
    write_recorded_inputs(folder, onnx.load(str(model_path)), inputs)
    ref = ModelRef(
        id=finding.fingerprint,
        source="bisect",
        path=str(folder / "model.onnx"),
        inputs_dir=str(folder),
        meta={EXACT_SAMPLES: True},
    )
    return Bug(finding, bundle, ref, step)


def runs_for(rate: float, runs: int) -> int:
    """How many runs a build that does not show a bug of show `rate` needs before it is called
    good: `runs` for one that shows every time, more for a flaky one (at most MAX_RUNS_FACTOR ×)."""
    if rate >= 1.0 or rate <= 0.0:
        return runs
    needed = math.ceil(math.log(MISS_CHANCE) / math.log(1.0 - rate))
    return max(runs, min(needed, runs * MAX_RUNS_FACTOR))


def confidence(tried: Sequence[Tried]) -> float:
    """The chance that no `good` verdict in `tried` was a miss: the bug's show rate is measured on
    the builds that showed it, and a good build of n runs missed it with (1 - rate)^n."""
    ran = [t for t in tried if t.verdict == BAD and t.runs]
    rate = sum(t.shown for t in ran) / max(1, sum(t.runs for t in ran))
    if rate >= 1.0:
        return 1.0
    chance = 1.0
    for good in (t for t in tried if t.verdict == GOOD and t.runs):
        chance *= 1.0 - (1.0 - rate) ** good.runs
    return chance


def judge_at(pool: WorkerPool, bug: Bug, runs: int) -> tuple[list[Outcome], str]:
    """`runs` verdicts of `bug`'s repro on the pool's build, each judged anew; and why none came
    (a worker skipped the model: it cannot load it, or its original fails there)."""
    jobs = [Job(bug.ref, (bug.step,), fresh=True) for _ in range(runs)]
    outcomes: list[Outcome] = []
    reason = ""
    for result in pool.run(jobs):
        if result.status == INTERNAL_ERROR:
            raise InternalError(f"bisecting {bug.fingerprint}: {result.reason}")
        outcome = result.outcomes.get(bug.step.label)
        if outcome is None:
            reason = result.reason or "no verdict"
        else:
            outcomes.append(outcome)
    return outcomes, reason


def tried_at(point: Point, bug: Bug, outcomes: Sequence[Outcome], reason: str) -> Tried:
    """The verdict of one build from its runs' outcomes: bad when any shows the reference failure;
    skip when none ran, or when they fail otherwise (that failure may hide this one); else good."""
    assert bug.reference is not None
    if not outcomes:
        return Tried(point.ref, SKIP, 0, 0, f"the model was not judged there: {reason}")
    shown = sum(outcome.same_failure(bug.reference) for outcome in outcomes)
    if shown:
        return Tried(point.ref, BAD, len(outcomes), shown)
    other = next((o for o in outcomes if o.failed), None)
    if other is not None:
        return Tried(
            point.ref,
            SKIP,
            len(outcomes),
            0,
            f"it fails otherwise there ({other.kind}: {other.message[:200]})",
        )
    return Tried(point.ref, GOOD, len(outcomes), 0)


def reference(pool: WorkerPool, bug: Bug, runs: int, point: Point | None = None) -> tuple[Bug, Tried | None]:
    """`bug` with what the build it was found with shows (`pool`'s): its first failure of the
    finding's kind in `runs` runs, and its show rate; no reference when none showed. When that
    build is one of the bisection's `point`s (an end of a range of commits), the runs are its
    verdict there too, so the search does not run them again."""
    outcomes, reason = judge_at(pool, bug, runs)
    failures = [o for o in outcomes if o.failed]
    same_kind = [o for o in failures if o.kind == bug.finding.kind] or failures
    if not same_kind:
        return bug, None
    shown = sum(o.same_failure(same_kind[0]) for o in outcomes)
    # a bug that missed a run may show less often than it did here: the rate as if one more missed
    rate = 1.0 if shown == len(outcomes) else shown / (len(outcomes) + 1)
    found = replace(bug, reference=same_kind[0], rate=rate)
    return found, tried_at(point, found, outcomes, reason) if point is not None else None


# a build for a point: the installed optimizer, or OptimizerLoadError when it cannot be made
BuildAt = Callable[[Point], AbstractContextManager[Installation]]
PoolFor = Callable[[Installation], WorkerPool]


class Bisector:
    """Bisects bugs over `points` (oldest first), one build per point however many bugs ask for
    it: a point built for one bug judges every bug still without a verdict there."""

    def __init__(
        self,
        bugs: Sequence[Bug],
        build_at: BuildAt,
        pool_for: PoolFor,
        runs: int,
        log: Log,
        deadline: float | None = None,
        known: Sequence[tuple[Bug, Tried]] = (),
    ) -> None:
        """`known`: verdicts already judged on a build (the references' runs at a range's end)."""
        self.bugs = list(bugs)
        self.build_at = build_at
        self.pool_for = pool_for
        self.runs = runs
        self.log = log
        self.deadline = deadline
        self.verdicts: dict[tuple[str, str], Tried] = {(t.ref, bug.fingerprint): t for bug, t in known}
        self.built: set[str] = {t.ref for _, t in known}
        self.out_of_budget = False

    def verdict(self, bug: Bug, point: Point) -> Tried:
        key = (point.ref, bug.fingerprint)
        if key not in self.verdicts:
            self._visit(point)
        return self.verdicts[key]

    def _visit(self, point: Point) -> None:
        """Build `point` and judge there every bug without a verdict at it."""
        waiting = [bug for bug in self.bugs if (point.ref, bug.fingerprint) not in self.verdicts]
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.out_of_budget = True
            for bug in waiting:
                self.verdicts[(point.ref, bug.fingerprint)] = Tried(
                    point.ref, SKIP, reason="the budget ran out"
                )
            return
        try:
            with self.log.group(f"bisect: {point.label}"), self.build_at(point) as build:
                self.built.add(point.ref)
                missing = {
                    bug.fingerprint: [p for p in bug.step.passes if p not in build.info.passes]
                    for bug in waiting
                }
                with self.pool_for(build) as pool:
                    for bug in waiting:
                        self.verdicts[(point.ref, bug.fingerprint)] = self._judged(
                            pool, point, bug, missing[bug.fingerprint]
                        )
        except OptimizerLoadError as exc:
            self.log.info(f"{point.label}: skipped, {exc}")
            for bug in waiting:
                self.verdicts[(point.ref, bug.fingerprint)] = Tried(point.ref, SKIP, reason=str(exc))

    def _judged(self, pool: WorkerPool, point: Point, bug: Bug, missing: Sequence[str]) -> Tried:
        if missing:  # the pass is not in this build: its bug cannot be
            return Tried(point.ref, GOOD, reason=f"{PASS_ABSENT} {', '.join(missing)}")
        outcomes, reason = judge_at(pool, bug, self.runs)
        tried = tried_at(point, bug, outcomes, reason)
        wanted = runs_for(bug.rate, self.runs)
        if tried.verdict == GOOD and wanted > tried.runs:  # a flaky bug: more runs before "good"
            more, _ = judge_at(pool, bug, wanted - tried.runs)
            tried = tried_at(point, bug, [*outcomes, *more], reason)
        return tried

    def bisect(self, bug: Bug, points: Sequence[Point], over: str) -> Since:
        """Where between `points` (oldest first) `bug` entered or left."""
        asked: list[Tried] = []

        def verdict(point: Point) -> Tried:
            asked.append(self.verdict(bug, point))
            return asked[-1]

        located = locate(points, verdict)
        # what this bug's search asked, oldest build first (some built for an earlier bug)
        order = {p.ref: i for i, p in enumerate(points)}
        tried = tuple(sorted({t.ref: t for t in asked}.values(), key=lambda t: order[t.ref]))
        sure = confidence(tried)
        change, note = located.change, located.note
        if change in (INTRODUCED, FIXED) and sure < MIN_CONFIDENCE:
            change, note = (
                INCONCLUSIVE,
                f"a flaky bug, and the builds without it may have missed it (confidence {sure:.0%})",
            )
        if self.out_of_budget and located.candidates:
            change, note = INCONCLUSIVE, "the time budget ran out before the range was narrowed to one build"
        return Since(
            over=over,
            change=change,
            before=located.before,
            after=located.after,
            candidates=located.candidates,
            tried=tried,
            builds=len({t.ref for t in tried if t.ref in self.built}),
            confidence=sure,
            note=note,
        )


@dataclass(frozen=True)
class Located:
    change: str
    before: Point | None = None
    after: Point | None = None
    candidates: tuple[Point, ...] = ()
    note: str = ""


def _first_testable(
    points: Sequence[Point], order: Iterable[int], verdict: Callable[[Point], Tried]
) -> int | None:
    for index in order:
        if verdict(points[index]).verdict != SKIP:
            return index
    return None


def locate(points: Sequence[Point], verdict: Callable[[Point], Tried]) -> Located:
    """Where `verdict` changes between good and bad along `points` (oldest first): the newest
    testable point first, then the oldest, then halving the range between them; a point that
    cannot be tested is replaced by its nearest untried neighbour in the range (git bisect skip),
    and the untestable points left between the two ends are the result's candidates."""
    newest = _first_testable(points, range(len(points) - 1, -1, -1), verdict)
    if newest is None:
        return Located(INCONCLUSIVE, note="no build could be tested")
    oldest = _first_testable(points, range(newest), verdict)
    new_state = verdict(points[newest]).verdict
    if oldest is None or verdict(points[oldest]).verdict == new_state:
        first = points[oldest if oldest is not None else newest]
        if new_state == BAD:
            return Located(PRESENT_SINCE_OLDEST, after=first)
        return Located(ABSENT, before=points[newest])
    low, high = oldest, newest
    old_state = verdict(points[low]).verdict
    skipped: set[int] = set()
    while True:
        between = [i for i in range(low + 1, high) if i not in skipped]
        if not between:
            break
        middle = min(between, key=lambda i: (abs(2 * i - low - high), i))
        state = verdict(points[middle]).verdict
        if state == SKIP:
            skipped.add(middle)
        elif state == old_state:
            low = middle
        else:
            high = middle
    change = INTRODUCED if old_state == GOOD else FIXED
    candidates = tuple(points[i] for i in sorted(skipped) if low < i < high)
    return Located(change, before=points[low], after=points[high], candidates=candidates)


def not_reproduced(bug: Bug, over: str) -> Since:
    return Since(
        over=over,
        change=NOT_REPRODUCED,
        note=f"{bug.fingerprint} did not show on the build it was found with",
    )


def where_it_left(
    bugs: Sequence[Bug],
    points: Sequence[Point],
    build_at: BuildAt,
    pool_for: PoolFor,
    runs: int,
    built: Point,
) -> dict[str, Since]:
    """Over releases, the bugs the build under test (`built`) no longer shows: the releases tried
    from the newest back until one shows the bug, which is then where it was last seen, and the
    release after it (or `built`, when the newest release still has it) where it left. A release
    that cannot be made is skipped; a bug no release shows is not reproduced."""
    left: dict[str, Since] = {}
    tried: dict[str, list[Tried]] = {bug.fingerprint: [] for bug in bugs}
    after: dict[str, Point] = {bug.fingerprint: built for bug in bugs}
    waiting = list(bugs)
    for point in reversed(points):
        if not waiting:
            break
        try:
            with build_at(point) as build, pool_for(build) as pool:
                at = [reference(pool, bug, runs, point) for bug in waiting]
        except OptimizerLoadError as exc:
            for bug in waiting:
                tried[bug.fingerprint].append(Tried(point.ref, SKIP, reason=str(exc)))
            continue
        for bug, shown in at:
            fingerprint = bug.fingerprint
            if shown is None:
                tried[fingerprint].append(Tried(point.ref, GOOD, runs, 0))
                after[fingerprint] = point
                continue
            steps = (shown, *reversed(tried[fingerprint]))
            left[fingerprint] = Since(
                over=RELEASES,
                change=FIXED,
                before=point,
                after=after[fingerprint],
                tried=steps,
                builds=len([t for t in steps if t.verdict != SKIP]),
                confidence=confidence(steps),
                note="" if after[fingerprint] != built else "the newest release still has it",
            )
        waiting = [bug for bug, shown in at if shown is None]
    for bug in waiting:
        left[bug.fingerprint] = replace(
            not_reproduced(bug, RELEASES), tried=tuple(reversed(tried[bug.fingerprint]))
        )
    return left
