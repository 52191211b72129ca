"""The compare stage: oracles that decide whether optimized outputs still match the original.

A comparator factory takes its options (thresholds) and returns a compare function; the function
takes the original and optimized outputs of every sample (positional lists of arrays) and returns a
Comparison that carries its numbers and knows whether it passed (Polygraphy's compare-func style).
The tensor oracle (`tensor`) is the default and always runs; task comparators (classification,
detection, embedding, …) register themselves in COMPARATORS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ditox_ci.registry import Registry

Outputs = Sequence[np.ndarray]
CompareFunc = Callable[[Sequence[Outputs], Sequence[Outputs], Sequence[str]], "Comparison"]
ComparatorFactory = Callable[[Mapping[str, Any]], CompareFunc]


@dataclass(frozen=True)
class Comparison:
    """The verdict of one comparator over all samples, with the numbers behind it."""

    passed: bool
    comparator: str
    message: str = ""
    output: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


COMPARATORS: Registry[ComparatorFactory] = Registry("comparator")


def register(name: str) -> Callable[[ComparatorFactory], ComparatorFactory]:
    return COMPARATORS.register(name)


# The registry is complete once this package is imported: a worker process that imports only the
# engine must find every comparator, not only those some other import happened to load.
from ditox_ci.compare import tasks, tensor  # noqa: E402, F401
