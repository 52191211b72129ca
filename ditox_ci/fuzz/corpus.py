"""The fuzz corpus: round-robin generation, written in ONNX backend-test layout (`<id>/model.onnx`,
`<id>/test_data_set_<k>/input_<i>.pb`) so any path source reads it.

`ditox-ci fuzz` streams it: each model is made when a worker is free to judge it, and a model
without a finding worth keeping is deleted once judged, since its seed regenerates it byte for byte.
"""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import write_recorded_inputs
from ditox_ci.corpus.loading import model_sha256
from ditox_ci.corpus.sources import recorded_inputs_dir
from ditox_ci.fuzz.base import GENERATORS, GeneratedModel, GenerationFailed, generate


@dataclass(frozen=True)
class NotGenerated:
    """A (pass, seed) whose generator made no model: why, in one line."""

    target_pass: str
    seed: int
    reason: str
    # an error of the generator's own code (ditox-ci's bug: the run ends in exit 70), not a seed
    # whose draws all failed
    bug: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.target_pass, "seed": self.seed, "reason": self.reason[:500], "bug": self.bug}


def generate_stream(seed: int, passes: Sequence[str] | None = None, limit: int | None = None,
                    deadline: float | None = None,
                    failed: list[NotGenerated] | None = None) -> Iterator[GeneratedModel]:
    """Round `r` gives every selected pass the model for seed `seed + r`, until `deadline`
    (time.monotonic) or `limit` models; so round 0 of `--seed S` replays any model `<pass>-S`.
    The deadline is checked as each model is asked for: a consumer that asks late stops early.

    A generator that fails on a seed (no valid, finite model in its draws, or an error of its own
    code) does not end the run: the seed is noted in `failed` and counts towards `limit`, and the
    stream goes on; the caller ends a run with a bug of ours in exit 70, its report written. Without
    `failed` the error is raised."""
    selected = list(passes) if passes else sorted(GENERATORS)
    made = 0
    for round_index in itertools.count():
        for target_pass in selected:
            if limit is not None and made >= limit:
                return
            if made and deadline is not None and time.monotonic() >= deadline:
                return
            made += 1
            try:
                item = generate(target_pass, seed + round_index)
            except Exception as exc:  # a bug of the generator's own code too: the run goes on to its report
                if failed is None:  # nobody to tell: not a seed to leave out in silence
                    raise
                bug = not isinstance(exc, GenerationFailed)
                reason = f"{type(exc).__name__}: {exc}" if bug else str(exc)
                failed.append(NotGenerated(target_pass, seed + round_index, reason, bug))
                continue
            yield item


def generate_within(budget_s: float, seed: int, passes: Sequence[str] | None = None,
                    limit: int | None = None,
                    failed: list[NotGenerated] | None = None) -> list[GeneratedModel]:
    """Every model `generate_stream` makes within `budget_s` seconds (or `limit` models)."""
    return list(generate_stream(seed, passes, limit, time.monotonic() + budget_s, failed))


def write_corpus(out_dir: Path, generated: Sequence[GeneratedModel]) -> list[Path]:
    """Write each model and its feeds; returns the model folders in order."""
    folders = []
    for item in generated:
        folder = Path(out_dir) / item.id
        write_recorded_inputs(folder, item.model, item.feeds)
        folders.append(folder)
    return folders


def seed_ranges(made: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    """[(pass, seed)] → [{"seeds": [first, last], "passes": [...]}]: the passes that ran the same
    seeds share an entry (all of them, but for the last round's partial share)."""
    by_pass: dict[str, list[int]] = {}
    for target_pass, seed in made:
        by_pass.setdefault(target_pass, []).append(seed)
    groups: dict[tuple[int, int], list[str]] = {}
    for target_pass, seeds in by_pass.items():
        groups.setdefault((min(seeds), max(seeds)), []).append(target_pass)
    return [
        {"seeds": [first, last], "passes": sorted(names)}
        for (first, last), names in sorted(groups.items(), key=lambda item: (-item[0][1], item[0][0]))
    ]


NOT_GENERATED_LISTED = 10


class StreamedCorpus:
    """The models of one fuzz run as ModelRefs, each generated and written when it is asked for.

    Models are identified as `models_from_path(out_dir)` would (`<pass>-<seed>[-near]/model.onnx`),
    so a kept model can be swept again as a path source."""

    def __init__(self, out_dir: Path, seed: int, passes: Sequence[str], limit: int | None,
                 deadline: float) -> None:
        self.out_dir = out_dir
        self.seed = seed
        self.passes = passes
        self.limit = limit
        self.deadline = deadline
        self.made: list[tuple[str, int]] = []
        self.near_misses = 0
        self.discarded = 0
        self.generate_s = 0.0
        self.failed: list[NotGenerated] = []

    def __iter__(self) -> Iterator[ModelRef]:
        stream = generate_stream(self.seed, self.passes, self.limit, self.deadline, self.failed)
        while True:
            started = time.monotonic()
            item = next(stream, None)
            if item is None:
                return
            folder = self.out_dir / item.id
            write_recorded_inputs(folder, item.model, item.feeds)
            self.generate_s += time.monotonic() - started
            self.made.append((item.target_pass, item.seed))
            self.near_misses += item.near_miss
            path = folder / "model.onnx"
            yield ModelRef(
                id=f"{item.id}/model.onnx",
                source=str(self.out_dir),
                path=str(path),
                inputs_dir=recorded_inputs_dir(folder),
                family=item.family,
                # the file may be gone by the time the report hashes it
                meta={"sha256": model_sha256(path)},
            )

    def discard(self, ref: ModelRef) -> None:
        """Delete a judged model's folder: its seed regenerates it."""
        shutil.rmtree(Path(ref.path).parent, ignore_errors=True)
        self.discarded += 1

    def stats(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "models": len(self.made),
            "near_misses": self.near_misses,
            "models_kept": len(self.made) - self.discarded,
            "seed_ranges": seed_ranges(self.made),
            # seeds of those ranges whose generator made no model (the first few, with why)
            "not_generated": len(self.failed),
            "not_generated_first": [item.to_json() for item in self.failed[:NOT_GENERATED_LISTED]],
            "generate_s": round(self.generate_s, 3),
            "models_per_s": round(len(self.made) / self.generate_s, 2) if self.generate_s else None,
        }
