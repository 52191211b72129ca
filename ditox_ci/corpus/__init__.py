"""The corpus stage: model sources and the inputs each model runs on.

A source spec is a path (a `.onnx` file, or a directory searched recursively) or a named source
(`onnx-node[:glob]`, `onnx-data`, …) from SOURCES. Every source yields ModelRefs: a stable id, the
file on disk, and where its recorded inputs live (ONNX backend-test layout), if anywhere.

A named source that makes its files (UNPACKERS) lists its models from an index first, with their
sizes, and writes only the files asked for: the sweep resolves globs and its shard's share before
it unpacks, so a shard job pays for the models it sweeps, not for the whole source.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ditox_ci.errors import InputError
from ditox_ci.log import Log
from ditox_ci.registry import Registry

DEFAULT_SOURCES = ("onnx-node", "onnx-data", "exported")


@dataclass(frozen=True)
class ModelSize:
    """What the shard planner estimates a model's cost from, known before its file is written."""

    bytes: int
    nodes: int


@dataclass(frozen=True)
class ModelRef:
    id: str
    source: str
    path: str
    inputs_dir: str | None = None
    family: str = ""
    comparator: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # from the source's index when the file may not be unpacked yet; else the planner reads the file
    size: ModelSize | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CorpusContext:
    """What a source may need: a cache folder for materialized models, and a seed."""

    cache_dir: Path
    seed: int = 0


SourceFunc = Callable[[str | None, CorpusContext], list[ModelRef]]
SOURCES: Registry[SourceFunc] = Registry(
    "model source", otherwise="name:glob, or a path to a .onnx file or a folder"
)


# the names a source's pattern is matched against, listed without materializing any model: what an
# error shows when a pattern selects nothing
SOURCE_NAMES: dict[str, Callable[[CorpusContext], list[str]]] = {}


def register_source(name: str) -> Callable[[SourceFunc], SourceFunc]:
    return SOURCES.register(name)


# a named source whose models' files are made on this machine: writes the files of the refs given
# (its own), each once per machine, and leaves the others alone
UNPACKERS: dict[str, Callable[[Sequence[ModelRef], CorpusContext], None]] = {}


def unpack(refs: Sequence[ModelRef], ctx: CorpusContext) -> None:
    """Make sure every one of `refs` has its files (idempotent; the files are cached per machine)."""
    by_source: dict[str, list[ModelRef]] = {}
    for ref in refs:
        if ref.source in UNPACKERS:
            by_source.setdefault(ref.source, []).append(ref)
    for source, own in by_source.items():
        UNPACKERS[source](own, ctx)


def nothing_selected(spec: str, ctx: CorpusContext) -> InputError:
    """The error for a named source whose pattern selects no model, naming what exists: a folder
    name (`onnx-data:simple`) is not a glob of its models (`onnx-data:simple/*`)."""
    name, _, pattern = spec.partition(":")
    names = SOURCE_NAMES[name](ctx) if name in SOURCE_NAMES else []
    hints = []
    inside = [n for n in names if n.startswith(pattern.rstrip("/") + "/")]
    if inside:
        hints.append(f"'{name}:{pattern.rstrip('/')}/*' ({len(inside)} models)")
    hints += [f"'{name}:{close}'" for close in difflib.get_close_matches(pattern, names, n=3, cutoff=0.6)]
    said = f"; did you mean {' or '.join(hints)}?" if hints else ""
    shown = ", ".join(names[:3]) + (f", … ({len(names)} in all)" if len(names) > 3 else "")
    listing = f" (a glob over names such as {shown}; `ditox-ci corpus list --models {name}` lists them)"
    return InputError(f"model source {spec!r} selects no model{said}{listing if names else ''}")


def default_cache_dir(env: Mapping[str, str]) -> Path:
    """`$DITOX_CACHE`, else `~/.cache/ditox-ci`: where named sources materialize their models."""
    configured = env.get("DITOX_CACHE", "")
    return Path(configured).expanduser() if configured else Path("~/.cache/ditox-ci").expanduser()


def _models_for_spec(spec: str, ctx: CorpusContext) -> list[ModelRef]:
    name, _, arg = spec.partition(":")
    if name in SOURCES:
        return SOURCES[name](arg or None, ctx)
    path = Path(spec).expanduser()
    try:
        exists = path.exists()
    except OSError as exc:  # a folder on the way the user may not enter
        raise InputError(f"model source {spec!r}: cannot look there ({exc.strerror or exc})") from None
    if exists:
        return models_from_path(spec)
    if arg and "/" not in name and os.sep not in name:  # `onnx-dat:light/*`: a source's name mistyped
        raise SOURCES.unknown(name)
    raise InputError(
        f"model source {spec!r} does not exist; pass an existing file or folder, or a source "
        f"({', '.join(sorted(SOURCES))})"
    )


def resolve_sources(
    specs: Sequence[str], ctx: CorpusContext, log: Log | None = None, unpacked: bool = True
) -> list[ModelRef]:
    """Every model the specs select, in spec order; an id seen twice keeps its first model.

    No specs means DEFAULT_SOURCES. Unknown names raise UsageError; missing paths, and a named
    source that selects no model, InputError. `unpacked=False` leaves the files of named sources
    unwritten (`unpack` writes those of the refs a caller keeps).
    """
    refs: list[ModelRef] = []
    seen: set[str] = set()
    for spec in specs or DEFAULT_SOURCES:
        repeated = []
        found = _models_for_spec(spec, ctx)
        if not found and spec.partition(":")[0] in SOURCES:
            raise nothing_selected(spec, ctx)
        for ref in found:
            if ref.id in seen:
                repeated.append(ref.id)
                continue
            seen.add(ref.id)
            refs.append(ref)
        if repeated and log is not None:
            examples = ", ".join(repeated[:3]) + (", …" if len(repeated) > 3 else "")
            log.warning(
                f"{len(repeated)} model id(s) from {spec!r} were already selected by an earlier "
                f"source ({examples}); keeping the first of each"
            )
    if unpacked:
        unpack(refs, ctx)
    return refs


# The built-in sources and input generators register themselves on import and need the names
# defined above; importing them here makes every source and generator known wherever the corpus
# package is imported, worker processes included.
from ditox_ci.corpus import exported, hub, node_cases, packaged, task_inputs  # noqa: E402, F401
from ditox_ci.corpus.sources import models_from_path  # noqa: E402
