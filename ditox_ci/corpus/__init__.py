"""The corpus stage: model sources and the inputs each model runs on.

A source spec is a path (a `.onnx` file, or a directory searched recursively) or a named source
(`onnx-node[:glob]`, `onnx-data`, …) from SOURCES. Every source yields ModelRefs: a stable id, the
file on disk, and where its recorded inputs live (ONNX backend-test layout), if anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_SOURCES = ("onnx-node", "onnx-data")


@dataclass(frozen=True)
class ModelRef:
    id: str
    source: str
    path: str
    inputs_dir: str | None = None
    family: str = ""
    comparator: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class CorpusContext:
    """What a source may need: a cache folder for materialized models, and a seed."""

    cache_dir: Path
    seed: int = 0


SourceFunc = Callable[[str | None, CorpusContext], list[ModelRef]]
SOURCES: dict[str, SourceFunc] = {}


def register_source(name: str) -> Callable[[SourceFunc], SourceFunc]:
    def decorate(func: SourceFunc) -> SourceFunc:
        SOURCES[name] = func
        return func

    return decorate
