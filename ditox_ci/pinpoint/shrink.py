"""The shrinking core that localization (pass lists) and reduction (node sets) share.

A `Shrinker` holds the current best candidate, the verdict of every candidate already judged, and
a budget; `offer` accepts a candidate only if it is strictly smaller than the current one and still
failing, and no candidate is judged twice (Hypothesis's Shrinker: one core, one subclass per kind
of value). A subclass says how a candidate is keyed, what one judgement costs and how it is judged;
strategy objects (and `delta_debug`, which both kinds use) only propose candidates.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

from ditox_ci.engine.plan import split_evenly

T = TypeVar("T")


class BudgetSpent(Exception):
    """The budget of one shrink (runs or time) is spent; the search stops with what it has."""


class Shrinker(ABC, Generic[T]):
    """The current failing candidate, every verdict so far, and the rules for accepting a smaller one.

    Subclasses implement `spend` (raise BudgetSpent when no judgement is left, else pay for one)
    and `still_failing` (the verdict on a candidate never judged before); `key` says which
    candidates are the same one."""

    def __init__(
        self, initial: Sequence[T], *, verdicts: Mapping[tuple[T, ...], bool] | None = None
    ) -> None:
        self.current: tuple[T, ...] = tuple(initial)
        self.verdicts: dict[tuple[T, ...], bool] = dict(verdicts or {})

    def key(self, candidate: Sequence[T]) -> tuple[T, ...]:
        """The candidate as it is remembered; by default its items in order."""
        return tuple(candidate)

    @abstractmethod
    def spend(self) -> None: ...

    @abstractmethod
    def still_failing(self, key: tuple[T, ...]) -> bool: ...

    def fails(self, candidate: Sequence[T]) -> bool:
        """Whether `candidate` still fails; each one is judged once, paid from the budget."""
        key = self.key(candidate)
        if key not in self.verdicts:
            self.spend()
            self.verdicts[key] = self.still_failing(key)
        return self.verdicts[key]

    def offer(self, candidate: Sequence[T]) -> bool:
        """Accept `candidate` as the new current one only if it is non-empty, strictly smaller and
        still failing (a candidate judged before is not judged again)."""
        key = self.key(candidate)
        if not key or len(key) >= len(self.current) or not self.fails(key):
            return False
        self.current = key
        return True


def delta_debug(current: Callable[[], tuple[T, ...]], offer: Callable[[tuple[T, ...]], bool]) -> bool:
    """Zeller's ddmin over `current()`: offer each chunk, then each complement, refining the
    granularity until no single item can go; `offer` accepts a candidate (and makes it the new
    `current()`) or refuses it. Used on pass lists and on node sets. True when it shrank."""
    granularity = 2
    shrank = False
    while len(current()) >= 2:
        items = current()
        chunks = split_evenly(items, min(granularity, len(items)))
        progress = False
        for index, chunk in enumerate(chunks):
            complement = tuple(item for i, other in enumerate(chunks) if i != index for item in other)
            if offer(chunk):
                granularity, progress = 2, True
                break
            if offer(complement):
                granularity, progress = max(granularity - 1, 2), True
                break
        shrank |= progress
        if progress:
            continue
        if granularity >= len(items):
            break
        granularity = min(granularity * 2, len(items))
    return shrank
