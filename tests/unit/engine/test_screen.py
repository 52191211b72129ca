"""The screen's search (engine/screen.py): which single-pass steps one call over many passes
clears, with a stand-in for the optimizer call that knows which passes change the model."""

from __future__ import annotations

from dataclasses import replace

from ditox_ci.engine.plan import Step
from ditox_ci.engine.screen import screen, screenable, screens
from ditox_ci.report.header import OptimizerInfo

PASSES = tuple(f"p{i:02d}" for i in range(47))
STEPS = (
    Step("nop", ("nop",)),
    Step("default", PASSES[:20]),
    Step("fixed-point", PASSES[:20], fixed_point=True),
    *(Step(f"pass:{name}", (name,)) for name in PASSES),
)


class Calls:
    """A call clears its passes when none of them is one that changes the model."""

    def __init__(self, changing: set[str]) -> None:
        self.changing = changing
        self.lists: list[tuple[str, ...]] = []

    def __call__(self, passes: tuple[str, ...]) -> bool:
        self.lists.append(passes)
        return not self.changing & set(passes)


def _passes(indexes: set[int]) -> set[str]:
    return {STEPS[i].passes[0] for i in indexes}


def test_only_single_pass_steps_are_screened() -> None:
    assert [STEPS[i].label for i in screenable(STEPS)] == [f"pass:{name}" for name in PASSES]


def test_every_pass_that_changes_nothing_is_cleared_in_fewer_calls_than_passes() -> None:
    changing = {"p01", "p30", "p31"}
    calls = Calls(changing)
    cleared = screen(STEPS, screenable(STEPS), calls)

    assert _passes(cleared) == set(PASSES) - changing - {"p00", "p02", "p32"}
    # p00, p02 and p32 shared their smallest failing list with a pass that changes: they run alone
    assert len(calls.lists) < 20
    # a list is one call over its passes in the steps' own order
    assert all(list(passes) == [name for name in PASSES if name in passes] for passes in calls.lists)
    # no single pass is screened alone: its own step is that call
    assert all(len(passes) >= 2 for passes in calls.lists)


def test_a_model_no_pass_changes_takes_one_call() -> None:
    calls = Calls(set())
    cleared = screen(STEPS, screenable(STEPS), calls)

    assert _passes(cleared) == set(PASSES)
    assert calls.lists == [PASSES]


def test_the_right_half_is_not_called_when_its_left_half_cleared() -> None:
    # the whole list differs and its left half does not: the right half alone made the difference
    calls = Calls({"p46"})
    screen(STEPS, screenable(STEPS), calls)

    assert PASSES[24:] not in calls.lists
    assert calls.lists[:2] == [PASSES, PASSES[:24]]


def test_suspects_run_alone_and_the_rest_clears_in_one_call() -> None:
    changing = {"p01", "p30", "p31"}
    calls = Calls(changing)
    cleared = screen(STEPS, screenable(STEPS), calls, suspects=changing)

    assert _passes(cleared) == set(PASSES) - changing
    assert calls.lists == [tuple(name for name in PASSES if name not in changing)]


def test_passes_that_clean_up_after_others_come_first_in_a_list() -> None:
    # run last, eliminate_unused_initializer would remove what a pass before it left behind, and
    # that pass's own step (a warning: it introduced an unused initializer) would be cleared
    steps = (
        Step("nop", ("nop",)),
        Step("pass:fuse_bn_into_conv", ("fuse_bn_into_conv",)),
        Step("pass:eliminate_unused_initializer", ("eliminate_unused_initializer",)),
        Step("pass:adjust_add", ("adjust_add",)),
    )
    calls = Calls({"fuse_bn_into_conv"})
    screen(steps, screenable(steps), calls)

    assert calls.lists[0] == ("eliminate_unused_initializer", "fuse_bn_into_conv", "adjust_add")


def test_only_an_optimizer_whose_lists_run_in_order_is_screened() -> None:
    info = OptimizerInfo("opt", "1", PASSES, PASSES[:20], sequential_passes=True)
    assert screens(info, STEPS)
    assert not screens(replace(info, sequential_passes=False), STEPS)
    # nothing to screen: the default configs alone
    assert not screens(info, STEPS[:3])
