"""What each model is put through: configs (`default`, `fixed-point`, `nop`, `single`, explicit
pass lists) expanded into Steps, each one optimizer call with an explicit ordered pass list.

The engine always hands the optimizer an explicit list, so localization can split it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ditox_ci.control import NOP, PASSES_PREFIX, SINGLE_PREFIX, list_label, single_pass_label
from ditox_ci.errors import UsageError
from ditox_ci.registry import Registry
from ditox_ci.report.header import OptimizerInfo

T = TypeVar("T")


@dataclass(frozen=True)
class Step:
    """One optimizer call: `label` is the report's `config` value."""

    label: str
    passes: tuple[str, ...]
    fixed_point: bool = False

    @property
    def single_pass(self) -> str | None:
        return self.passes[0] if self.label.startswith(SINGLE_PREFIX) else None


def split_evenly(items: tuple[T, ...], parts: int) -> list[tuple[T, ...]]:
    """`parts` contiguous chunks whose sizes differ by at most one: ddmin's partition in
    localization and reduction (`pinpoint.shrink`)."""
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        chunks.append(items[start:end])
        start = end
    return [c for c in chunks if c]


def nop_step(info: OptimizerInfo) -> Step:
    """The nop control: the optimizer's own round trip of a model, with no pass that rewrites."""
    return Step(NOP, (NOP,) if NOP in info.passes else ())


def _nop(info: OptimizerInfo) -> list[Step]:
    return [nop_step(info)]


def _default(info: OptimizerInfo) -> list[Step]:
    return [Step("default", info.default_passes)]


def _fixed_point(info: OptimizerInfo) -> list[Step]:
    # an opaque optimizer runs its default and the control only
    return [] if info.opaque else [Step("fixed-point", info.default_passes, fixed_point=True)]


def _single(info: OptimizerInfo) -> list[Step]:
    return [Step(single_pass_label(name), (name,)) for name in info.passes if name != NOP]


CONFIGS: Registry[Callable[[OptimizerInfo], list[Step]]] = Registry(
    "config", otherwise=single_pass_label("<name>")
)
CONFIGS.update({NOP: _nop, "default": _default, "fixed-point": _fixed_point, "single": _single})
DEFAULT_CONFIGS = ("default", "fixed-point", NOP, "single")


# configs named by their role: on another build of the optimizer they mean that build's own lists
_BY_ROLE: dict[str, Callable[[OptimizerInfo], list[Step]]] = {
    NOP: _nop,
    "default": _default,
    "fixed-point": _fixed_point,
}


def step_on_build(step: Step, info: OptimizerInfo) -> Step | None:
    """`step` as another build runs it: `default` is its default list (a PR that puts a buggy pass
    into the default list introduces the default config's failure); an explicit pass list stays
    as it is, or None when that build lacks one of its passes."""
    if step.label in _BY_ROLE:
        return next(iter(_BY_ROLE[step.label](info)), None)
    return step if all(name in info.passes for name in step.passes) else None


def check_passes(passes: Sequence[str], info: OptimizerInfo) -> None:
    """Every pass must be one of `info`'s own; the error lists that optimizer's passes."""
    unknown = [name for name in passes if name not in info.passes]
    if unknown:
        raise UsageError(f"unknown pass(es) {', '.join(unknown)} for {info.name}; {info.describe_passes()}")


def build_steps(
    configs: Sequence[str], passes: Sequence[str], info: OptimizerInfo
) -> tuple[Step, ...]:
    """Expand configs (and an explicit pass list) into steps; `nop` always runs first as control."""
    for name in configs:
        if not name.startswith(SINGLE_PREFIX):
            CONFIGS.lookup(name)
    steps: list[Step] = _nop(info)
    for name in configs:
        if name.startswith(SINGLE_PREFIX):
            single = name.removeprefix(SINGLE_PREFIX)
            check_passes([single], info)
            steps.append(Step(name, (single,)))
        elif name != NOP:
            steps.extend(CONFIGS[name](info))
    if passes:
        check_passes(passes, info)
        steps.append(Step(list_label(PASSES_PREFIX, passes), tuple(passes)))
    asked = [name for name in configs if name != NOP]
    if asked and len(steps) == 1:
        # `--configs single` on an opaque optimizer would run the control alone and say nothing
        raise UsageError(
            f"--configs {','.join(asked)} has nothing to run for {info.name} but the nop control: "
            f"{info.describe_passes()}; use --configs default"
        )
    unique = {step.label: step for step in steps}
    return tuple(unique.values())
