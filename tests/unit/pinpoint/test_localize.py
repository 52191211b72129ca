"""Localization over synthetic probes whose true culprit is known: single pass, ordered pair,
infrastructure, a culprit that fails on some calls only; every case asserts the run budget.

The search's probes go to `probe`, the repeats that confirm a culprit to `probe.again` (a run no
cache answers): the search never probes one list twice, the repeats do so on purpose."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import onnxoptimizer
import pytest

from ditox_ci.engine.outcome import Outcome
from ditox_ci.pinpoint.localize import NOP_PASSES, PART_RUNS, REPEATS, VERIFY_RUNS, localize

DEFAULT = tuple(onnxoptimizer.get_fuse_and_elimination_passes())
MISMATCH = Outcome(kind="output-mismatch", message="output 'y' differs: max_abs 2.0")
CRASH = Outcome(kind="optimizer-crash", message="signal 11 at 0x7f00deadbeef")
FINE = Outcome(kind=None)


class CountingProbe:
    """A probe whose failure rule is known; records every pass list it was asked about."""

    def __init__(self, rule: Callable[[tuple[str, ...]], Outcome]) -> None:
        self.rule = rule
        self.calls: list[tuple[str, ...]] = []
        self.again_calls: list[tuple[str, ...]] = []

    def __call__(self, passes: Sequence[str]) -> Outcome:
        self.calls.append(tuple(passes))
        return self.rule(tuple(passes))

    def again(self, passes: Sequence[str]) -> Outcome:
        self.again_calls.append(tuple(passes))
        return self.rule(tuple(passes))

    @property
    def runs(self) -> int:
        return len(self.calls) + len(self.again_calls)


def located(passes: Sequence[str], failure: Outcome, probe: CountingProbe, **options):
    return localize(passes, failure, probe, rerun=probe.again, **options)


def single_pass_fault(culprit: str, outcome: Outcome = MISMATCH) -> CountingProbe:
    return CountingProbe(lambda passes: outcome if culprit in passes else FINE)


def ordered_pair_fault(first: str, second: str) -> CountingProbe:
    def rule(passes: tuple[str, ...]) -> Outcome:
        if first in passes and second in passes and passes.index(first) < passes.index(second):
            return MISMATCH
        return FINE

    return CountingProbe(rule)


@pytest.mark.parametrize("culprit", DEFAULT[1:])
def test_single_pass_culprit_at_every_position_within_twelve_runs(culprit: str) -> None:
    probe = single_pass_fault(culprit)
    found = located(DEFAULT, MISMATCH, probe)
    assert found.scope == "pass"
    assert found.passes == (culprit,)
    assert found.optimizer_runs == probe.runs and len(probe.calls) <= 12
    assert len(set(probe.calls)) == len(probe.calls), "a pass list was probed twice"
    assert probe.again_calls == [(culprit,)] * VERIFY_RUNS


def test_ordered_pair_is_an_interaction_named_in_order() -> None:
    probe = ordered_pair_fault("fuse_bn_into_conv", "eliminate_deadend")
    found = located(DEFAULT, MISMATCH, probe)
    assert found.scope == "interaction"
    assert found.passes == ("fuse_bn_into_conv", "eliminate_deadend")
    assert found.optimizer_runs == probe.runs and len(probe.calls) <= 24
    assert len(set(probe.calls)) == len(probe.calls)
    # confirmed: the pair in every repeat, each of its passes alone in none
    assert len(probe.again_calls) == VERIFY_RUNS + 2 * PART_RUNS


def test_pair_in_reverse_order_does_not_fail_so_reordering_is_never_reported() -> None:
    passes = ("eliminate_deadend", "eliminate_identity", "fuse_bn_into_conv")
    probe = ordered_pair_fault("fuse_bn_into_conv", "eliminate_deadend")
    found = localize(passes, MISMATCH, probe)
    assert found.scope == "unknown"
    assert "does not reproduce" in found.method


def test_fault_in_every_run_is_infrastructure_after_one_run() -> None:
    probe = CountingProbe(lambda passes: CRASH)
    found = localize(DEFAULT, CRASH, probe)
    assert found.scope == "infrastructure"
    assert found.passes == ()
    assert probe.calls == [NOP_PASSES]
    assert found.optimizer_runs == 1


def test_free_single_pass_results_cost_no_runs() -> None:
    probe = single_pass_fault("fuse_pad_into_conv")
    single = {name: probe.rule((name,)) for name in DEFAULT}
    found = localize(DEFAULT, MISMATCH, probe, single=single)
    assert (found.scope, found.passes, found.optimizer_runs) == ("pass", ("fuse_pad_into_conv",), 0)
    assert probe.calls == []


def test_free_single_results_without_a_lone_culprit_skip_singles_in_search() -> None:
    probe = ordered_pair_fault("eliminate_nop_cast", "eliminate_identity")
    single = {name: FINE for name in DEFAULT}
    found = located(DEFAULT, MISMATCH, probe, single=single)
    assert found.passes == ("eliminate_nop_cast", "eliminate_identity")
    assert not [call for call in probe.calls if len(call) == 1]


def test_nop_outcome_given_as_infrastructure_costs_nothing() -> None:
    probe = single_pass_fault("fuse_qkv", CRASH)
    found = localize(DEFAULT, CRASH, probe, nop=CRASH)
    assert (found.scope, found.optimizer_runs) == ("infrastructure", 0)


def test_different_failure_does_not_count_as_reproduction() -> None:
    other = Outcome(kind="optimizer-error", message="unrelated: shape inference failed")
    probe = CountingProbe(lambda passes: other if "fuse_qkv" in passes else FINE)
    found = localize(DEFAULT, CRASH, probe)
    assert found.scope == "unknown"


def test_run_budget_stops_the_search() -> None:
    probe = ordered_pair_fault("eliminate_nop_cast", "eliminate_identity")
    found = localize(DEFAULT, MISMATCH, probe, max_runs=3)
    assert found.optimizer_runs == 3 == len(probe.calls)
    assert "budget" in found.method


def test_ddmin_alone_makes_the_result_one_minimal() -> None:
    probe = ordered_pair_fault("eliminate_nop_pad", "fuse_qkv")
    found = located(DEFAULT, MISMATCH, probe, strategies=("ddmin",))
    assert found.passes == ("eliminate_nop_pad", "fuse_qkv")
    assert len(set(probe.calls)) == len(probe.calls)


def test_linear_baseline_costs_one_run_per_pass_up_to_the_culprit() -> None:
    culprit = DEFAULT[20]
    probe = single_pass_fault(culprit)
    found = located(DEFAULT, MISMATCH, probe, strategies=("linear",))
    assert found.passes == (culprit,)
    # the nop control is the first pass of the list, so it is probed once for both; then the repeats
    assert len(probe.calls) == 21 and found.optimizer_runs == 21 + VERIFY_RUNS


def sometimes(culprit: str, shows: Callable[[], bool]) -> CountingProbe:
    """A culprit whose miscompilation applies on some of its calls only (`shows()` says which)."""
    return CountingProbe(lambda passes: MISMATCH if culprit in passes and shows() else FINE)


def test_a_culprit_failing_on_every_other_call_is_called_nondeterministic_never_a_bystander() -> None:
    """The search's misses would leave bystanders in; the repeats disagree, the failure is searched
    again with each verdict from several runs, and it is blamed on no pass: nondeterministic, with
    the smallest list that showed it and how often."""
    calls = iter(range(10**6))
    probe = sometimes("fuse_bn_into_conv", lambda: next(calls) % 2 == 0)
    found = located(DEFAULT, MISMATCH, probe)
    assert found.scope == "nondeterministic" and found.passes == ("fuse_bn_into_conv",)
    assert "comes and goes" in found.method and "of" in found.method
    assert found.optimizer_runs == probe.runs <= 2 * 64


@pytest.mark.parametrize("seed", range(200))
def test_a_culprit_failing_on_half_of_its_calls_is_never_blamed_on_bystanders(seed: int) -> None:
    rng = random.Random(seed)
    probe = sometimes("fuse_bn_into_conv", lambda: rng.random() < 0.5)
    found = located(DEFAULT, MISMATCH, probe)
    named = found.scope in ("pass", "interaction")
    assert (
        (named and found.passes == ("fuse_bn_into_conv",))
        or (found.scope == "nondeterministic" and "fuse_bn_into_conv" in found.passes)
        or (found.scope == "unknown" and found.passes == () and "not confirmed" in found.method)
    ), found
    assert found.optimizer_runs <= 2 * 64  # the repeated search has a budget of its own


def test_a_failure_known_to_come_and_go_is_searched_with_repeats_from_the_start() -> None:
    """`flaky`: a re-run already missed it; no single-run search is tried, and a pass the sweep ran
    alone without the failure is no proof (it is probed again)."""
    rng = random.Random(0)
    probe = sometimes("eliminate_identity", lambda: rng.random() < 0.5)
    single = {name: FINE for name in DEFAULT}
    found = located(DEFAULT, MISMATCH, probe, single=single, flaky=True)
    assert found.scope == "nondeterministic" and "eliminate_identity" in found.passes
    assert REPEATS > 1 and found.optimizer_runs == probe.runs
