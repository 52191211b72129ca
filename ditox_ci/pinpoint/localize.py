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
   expensive baseline kept for comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ditox_ci.control import NOP
from ditox_ci.engine.outcome import Outcome
from ditox_ci.pinpoint.shrink import BudgetSpent, Shrinker, delta_debug
from ditox_ci.report.model import Culprit

Probe = Callable[[Sequence[str]], Outcome]

NOP_PASSES: tuple[str, ...] = (NOP,)
DEFAULT_MAX_RUNS = 64


class PassShrinker(Shrinker[str]):
    """The shrinker over ordered pass lists: a judgement is one optimizer run of exactly that list
    (free single-pass and nop results come in as verdicts), at most `max_runs` of them."""

    def __init__(
        self,
        passes: Sequence[str],
        failure: Outcome,
        probe: Probe,
        *,
        known: Mapping[tuple[str, ...], bool] | None = None,
        max_runs: int = DEFAULT_MAX_RUNS,
    ) -> None:
        super().__init__(passes, verdicts=known)
        self.failure = failure
        self.probe = probe
        self.max_runs = max_runs
        self.runs = 0

    def spend(self) -> None:
        if self.runs >= self.max_runs:
            raise BudgetSpent
        self.runs += 1

    def still_failing(self, key: tuple[str, ...]) -> bool:
        return self.probe(key).same_failure(self.failure)


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
) -> Culprit:
    """The culprit of `failure`, seen when the optimizer ran `passes` (in this order).

    `probe(pass_list)` optimizes with exactly that ordered list (not fixed-point), runs and
    compares; `single` holds per-pass outcomes the sweep already has, `nop` its nop-control
    outcome: both are free. `optimizer_runs` in the result counts only the probes this call made.
    """
    single = dict(single or {})
    nop = nop if nop is not None else single.get(NOP_PASSES[0])
    known: dict[tuple[str, ...], bool] = {
        (name,): outcome.same_failure(failure) for name, outcome in single.items()
    }
    search = PassShrinker(passes, failure, probe, known=known, max_runs=max_runs)
    if nop is not None:
        search.verdicts[NOP_PASSES] = nop.same_failure(failure)

    def culprit(scope: str, found: Sequence[str], method: str) -> Culprit:
        return Culprit(scope=scope, passes=tuple(found), method=method, optimizer_runs=search.runs)

    if not failure.failed:
        return culprit("unknown", (), "nothing to localize: the outcome is not a failure")

    # A nop-control failure can only be ruled out for free when some pass alone runs clean.
    infrastructure_ruled_out = any(not verdict for verdict in known.values())
    if not infrastructure_ruled_out and search.fails(NOP_PASSES):
        return culprit("infrastructure", (), "nop control reproduces it")

    lone = [name for name in passes if known.get((name,))]
    if lone:
        return culprit("pass", lone[:1], "single-pass results")

    method = "+".join(strategies)
    try:
        for name in strategies:
            STRATEGIES[name].shrink(search)
    except BudgetSpent:
        method += f" (run budget of {max_runs} spent)"

    if len(search.current) == len(passes) and not _reproduces(search, passes):
        return culprit(
            "unknown",
            passes,
            f"{method}: the pass list alone does not reproduce it "
            "(it needs fixed-point iteration or is not deterministic)",
        )
    if search.current == NOP_PASSES:
        return culprit("infrastructure", (), f"{method}: only the nop pass is left")
    scope = "pass" if len(search.current) == 1 else "interaction"
    return culprit(scope, search.current, method)


def _reproduces(search: PassShrinker, passes: Sequence[str]) -> bool:
    """Whether the full list fails; unproven (False) when the budget ran out before checking."""
    try:
        return search.fails(passes)
    except BudgetSpent:
        return False
