"""The shrinking core that localization (pass lists) and reduction (node sets) share."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def split_evenly(items: tuple[T, ...], parts: int) -> list[tuple[T, ...]]:
    """`parts` contiguous chunks whose sizes differ by at most one (ddmin's partition)."""
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        chunks.append(items[start:end])
        start = end
    return [c for c in chunks if c]


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
