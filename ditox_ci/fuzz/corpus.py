"""The fuzz corpus: round-robin generation within a time budget, written in ONNX backend-test
layout (`<id>/model.onnx`, `<id>/test_data_set_<k>/input_<i>.pb`) so any path source reads it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from ditox_ci.corpus.inputs import write_recorded_inputs
from ditox_ci.fuzz.base import GENERATORS, GeneratedModel, generate


def generate_within(budget_s: float, seed: int, passes: Sequence[str] | None = None,
                    limit: int | None = None) -> list[GeneratedModel]:
    """Round `r` gives every selected pass the model for seed `seed + r`, until the budget (or
    `limit` models) is used; so round 0 of `--seed S` replays any model `<pass>-S`."""
    selected = list(passes) if passes else sorted(GENERATORS)
    deadline = time.monotonic() + budget_s
    generated: list[GeneratedModel] = []
    round_index = 0
    while True:
        for target_pass in selected:
            if generated and time.monotonic() >= deadline:
                return generated
            if limit is not None and len(generated) >= limit:
                return generated
            generated.append(generate(target_pass, seed + round_index))
        round_index += 1


def write_corpus(out_dir: Path, generated: Sequence[GeneratedModel]) -> list[Path]:
    """Write each model and its feeds; returns the model folders in order."""
    folders = []
    for item in generated:
        folder = Path(out_dir) / item.id
        write_recorded_inputs(folder, item.model, item.feeds)
        folders.append(folder)
    return folders
