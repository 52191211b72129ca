"""The localize stage: pin a failure of a multi-pass config on the pass (or passes) that cause it.

Everything here is pure logic over a `Probe`, so the engine plugs in its isolated workers and the
tests plug in synthetic probes with a known culprit. The order of work keeps runs low:

1. free evidence first: the single-pass and nop outcomes the sweep already has;
2. the nop control (optimizer round-trip without any rewrite): reproducing there means the fault
   is in the optimizer's infrastructure (parsing, serialization), not in a pass;
3. strategy objects shrink the failing pass list through `PassShrinker`, the pass-list kind of
   the shared core in `shrink`: a candidate is accepted only if it is smaller than the current
   one, never tried before, and still shows the same failure (Hypothesis/Polygraphy style).
   `PrefixBisect` finds a single culprit in ~log2(n) runs and peels interaction partners one by
   one; `DDMin` then makes the result 1-minimal; `Linear` (every pass alone) is the old,
   expensive baseline kept for comparison;
4. a culprit the search found is named only once repeats agree (`_agrees`): it shows the failure
   in VERIFY_RUNS more runs, and, for an interaction, no part of it does. A search that ran on a
   failure that comes and goes (an optimizer that miscompiles on some calls only) would blame
   whatever passes its misses left in; such a failure (`flaky`, or repeats that disagree) is
   searched again with every verdict taken from up to REPEATS runs, and blamed on no pass: the
   culprit says `nondeterministic`, with the smallest pass list that showed it and how often.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ditox_ci.control import NOP
from ditox_ci.engine.outcome import Outcome
from ditox_ci.pinpoint.shrink import BudgetSpent, Shrinker, delta_debug
from ditox_ci.report.model import Culprit

Probe = Callable[[Sequence[str]], Outcome]

NOP_PASSES: tuple[str, ...] = (NOP,)
DEFAULT_MAX_RUNS = 64
# runs of a found culprit that must all show the failure before it is named; and, for an
# interaction, runs of each list with one of its passes left out that must all not show it. A
# culprit that fails on half of its calls passes for a pair with a bystander once in 8 × 2**6
VERIFY_RUNS = 3
PART_RUNS = 6
# runs one verdict may take on a failure that comes and goes: it fails when any of them shows it
REPEATS = 4
NONDETERMINISTIC = "nondeterministic"


class PassShrinker(Shrinker[str]):
    """The shrinker over ordered pass lists: a judgement is one optimizer run of exactly that list
    (free single-pass and nop results come in as verdicts), at most `max_runs` of them; with
    `repeats` > 1 a list that does not show the failure is run again (`rerun`: not answered from a
    cache) until it does or `repeats` runs are spent. `tally` counts, per list, runs and shows."""

    def __init__(
        self,
        passes: Sequence[str],
        failure: Outcome,
        probe: Probe,
        *,
        known: Mapping[tuple[str, ...], bool] | None = None,
        max_runs: int = DEFAULT_MAX_RUNS,
        rerun: Probe | None = None,
        repeats: int = 1,
    ) -> None:
        super().__init__(passes, verdicts=known)
        self.failure = failure
        self.probe = probe
        self.rerun = rerun or probe
        self.repeats = repeats
        self.max_runs = max_runs
        self.runs = 0
        self.tally: dict[tuple[str, ...], tuple[int, int]] = {}

    def spend(self) -> None:
        if self.runs >= self.max_runs:
            raise BudgetSpent
        self.runs += 1

    def still_failing(self, key: tuple[str, ...]) -> bool:
        shown = self._shows(self.probe, key)
        for _ in range(self.repeats - 1):
            if shown:
                break
            self.spend()
            shown = self._shows(self.rerun, key)
        return shown

    def again(self, key: tuple[str, ...], runs: int) -> int:
        """Run `key` `runs` more times (never from a cache); how many showed the failure."""
        shows = 0
        for _ in range(runs):
            self.spend()
            shows += self._shows(self.rerun, key)
        return shows

    def _shows(self, probe: Probe, key: tuple[str, ...]) -> bool:
        shown = probe(key).same_failure(self.failure)
        runs, shows = self.tally.get(key, (0, 0))
        self.tally[key] = (runs + 1, shows + shown)
        return shown


class Strategy(Protocol):
    name: str

    def shrink(self, search: PassShrinker) -> None: ...


class PrefixBisect:
    """Binary search for the shortest failing prefix; its last pass is necessary. Repeat on what
    precedes it, keeping the necessary passes found so far, until they fail on their own.

    A single culprit costs ceil(log2(n)) runs plus one to confirm it alone."""

    name = "bisect"

    def shrink(self, search: PassShrinker) -> None:
        required: tuple[str, ...] = ()
        prefix = search.current
        while prefix:
            passing, failing = 0, len(prefix)
            while failing - passing > 1:
                middle = (passing + failing) // 2
                if search.fails(prefix[:middle] + required):
                    search.offer(prefix[:middle] + required)
                    failing = middle
                else:
                    passing = middle
            # Only a list seen failing proves its last pass necessary (free unless nothing failed).
            if not search.fails(prefix[:failing] + required):
                return
            required = (prefix[failing - 1], *required)
            prefix = prefix[: failing - 1]
            if search.fails(required):
                search.offer(required)
                return


class DDMin:
    """Zeller's delta debugging over the ordered list: drop chunks (then keep chunks) while the
    failure persists, refining the granularity down to single passes: the result is 1-minimal."""

    name = "ddmin"

    def shrink(self, search: PassShrinker) -> None:
        delta_debug(lambda: search.current, search.offer)


class Linear:
    """Every pass alone, in order: the research prototype's method (n runs), kept as a baseline."""

    name = "linear"

    def shrink(self, search: PassShrinker) -> None:
        for name in search.current:
            if search.offer((name,)):
                return


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (PrefixBisect(), DDMin(), Linear())}
DEFAULT_STRATEGIES: tuple[str, ...] = ("bisect", "ddmin")


def localize(
    passes: Sequence[str],
    failure: Outcome,
    probe: Probe,
    *,
    single: Mapping[str, Outcome] | None = None,
    nop: Outcome | None = None,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    max_runs: int = DEFAULT_MAX_RUNS,
    rerun: Probe | None = None,
    flaky: bool = False,
) -> Culprit:
    """The culprit of `failure`, seen when the optimizer ran `passes` (in this order).

    `probe(pass_list)` optimizes with exactly that ordered list (not fixed-point), runs and
    compares; `rerun` does the same without any cache (default `probe`); `single` holds per-pass
    outcomes the sweep already has, `nop` its nop-control outcome: both are free. `flaky`: the
    failure is known to come and go (a re-run missed it). `optimizer_runs` in the result counts
    only the probes this call made.
    """
    single = dict(single or {})
    nop = nop if nop is not None else single.get(NOP_PASSES[0])
    if not failure.failed:
        return Culprit("unknown", (), "nothing to localize: the outcome is not a failure", 0)
    runs = 0
    if not flaky:
        found = _search(passes, failure, probe, rerun, single, nop, strategies, max_runs, 1)
        if found.culprit is not None:
            return found.culprit
        runs = found.search.runs
    # a search of its own, within a budget of its own: the first may have spent most of its budget
    again = _search(passes, failure, probe, rerun, single, nop, strategies, max_runs, REPEATS)
    spent = runs + again.search.runs
    comes_and_goes = f"the failure comes and goes; each verdict from up to {REPEATS} runs"
    if again.culprit is not None and again.culprit.scope == "infrastructure":
        return replace(
            again.culprit, method=f"{again.culprit.method} ({comes_and_goes})", optimizer_runs=spent
        )
    if again.culprit is not None:  # a pass the sweep ran alone showed it
        shown = again.culprit.passes
        method = f"{comes_and_goes}: it showed when {shown[0]} ran alone in the sweep"
        return Culprit(NONDETERMINISTIC, shown, method, spent)
    search = again.search
    runs_of, shows = search.tally.get(search.current, (0, 0))
    method = (
        f"{'+'.join(strategies)}, {comes_and_goes}: it showed in {shows} of {runs_of} runs of "
        f"{','.join(search.current)}"
    )
    return Culprit(NONDETERMINISTIC, search.current, method, spent)


@dataclass
class _Found:
    """One search: the culprit it names (None: its repeats disagreed) and the search itself."""

    culprit: Culprit | None
    search: PassShrinker


def _search(
    passes: Sequence[str],
    failure: Outcome,
    probe: Probe,
    rerun: Probe | None,
    single: Mapping[str, Outcome],
    nop: Outcome | None,
    strategies: Sequence[str],
    max_runs: int,
    repeats: int,
) -> _Found:
    """Shrink `passes` to the culprit. With `repeats` 1, a culprit the strategies found is named
    only when its repeats agree (`_agrees`), else None; with more, whatever the search ends on
    (the caller names it nondeterministic). The sweep's free single-pass verdicts count only when
    they showed the failure: one run that did not is no proof for a failure that comes and goes."""
    known: dict[tuple[str, ...], bool] = {
        (name,): outcome.same_failure(failure) for name, outcome in single.items()
    }
    if repeats > 1:
        known = {key: True for key, shown in known.items() if shown}
    search = PassShrinker(
        passes, failure, probe, known=known, max_runs=max_runs, rerun=rerun, repeats=repeats
    )
    if nop is not None and (repeats == 1 or nop.same_failure(failure)):
        search.verdicts[NOP_PASSES] = nop.same_failure(failure)

    def named(scope: str, found: Sequence[str], method: str) -> _Found:
        return _Found(
            Culprit(scope=scope, passes=tuple(found), method=method, optimizer_runs=search.runs), search
        )

    try:
        # A nop-control failure can only be ruled out for free when some pass alone runs clean.
        infrastructure_ruled_out = any(not verdict for verdict in known.values())
        if not infrastructure_ruled_out and search.fails(NOP_PASSES):
            return named("infrastructure", (), "nop control reproduces it")
    except BudgetSpent:
        return _Found(None, search)

    lone = [name for name in passes if known.get((name,))]
    if lone:
        return named("pass", lone[:1], "single-pass results")

    method = "+".join(strategies)
    try:
        for name in strategies:
            STRATEGIES[name].shrink(search)
    except BudgetSpent:
        method += f" (run budget of {max_runs} spent)"

    if repeats > 1:
        return _Found(None, search)
    if len(search.current) == len(passes) and not _reproduces(search, passes):
        try:
            if search.again(tuple(passes), VERIFY_RUNS - 1):  # it does, on another run
                return _Found(None, search)
        except BudgetSpent:
            pass
        return named(
            "unknown",
            passes,
            f"{method}: the pass list alone does not reproduce it (it needs fixed-point iteration)",
        )
    if search.current == NOP_PASSES:
        return named("infrastructure", (), f"{method}: only the nop pass is left")
    agreed = _agrees(search)
    if agreed is False:
        return _Found(None, search)
    scope = "pass" if len(search.current) == 1 else "interaction"
    if agreed is None:  # a pass that showed the failure can cause it; a pair may hold a bystander
        unconfirmed = f"{method}, not confirmed: the run budget was spent before the repeats"
        if scope == "pass":
            return named(scope, search.current, unconfirmed)
        return named("unknown", (), f"{unconfirmed} ({', '.join(search.current)})")
    return named(scope, search.current, f"{method}, confirmed in {VERIFY_RUNS} more runs")


def _agrees(search: PassShrinker) -> bool | None:
    """Whether repeats confirm the culprit the search ended on: it shows the failure in each of
    VERIFY_RUNS more runs and, for an interaction, no list with one of its passes left out shows
    it in PART_RUNS more (a failure that comes and goes would have left bystanders in). None: the
    run budget was spent before they could tell."""
    culprit = search.current
    try:
        if search.again(culprit, VERIFY_RUNS) < VERIFY_RUNS:
            return False
        if len(culprit) > 1:
            for left_out in range(len(culprit)):
                part = culprit[:left_out] + culprit[left_out + 1 :]
                if any(search.again(part, 1) for _ in range(PART_RUNS)):
                    return False
    except BudgetSpent:
        return None
    return True


def _reproduces(search: PassShrinker, passes: Sequence[str]) -> bool:
    """Whether the full list fails; unproven (False) when the budget ran out before checking."""
    try:
        return search.fails(passes)
    except BudgetSpent:
        return False
