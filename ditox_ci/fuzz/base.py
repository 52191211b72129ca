"""The generator registry: one pattern generator per optimizer pass, keyed by pass name.

A generator draws a model that contains the pattern its pass rewrites (or, as a near-miss, a
look-alike the pass must leave alone) inside random context, checks it with the ONNX checker and
runs it in ONNX Runtime, re-drawing until every output is finite.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from ditox_ci.engine import runner
from ditox_ci.errors import UsageError
from ditox_ci.fuzz.builder import GraphBuilder
from ditox_ci.registry import Registry

DEFAULT_OPSETS = (13, 21)
FEEDS_PER_MODEL = 2
MAX_DRAWS = 20

BuildFunc = Callable[[GraphBuilder, bool], None]


@dataclass(frozen=True)
class GeneratedModel:
    model: onnx.ModelProto
    feeds: list[dict[str, np.ndarray]]
    target_pass: str
    near_miss: bool
    seed: int
    value_ranges: dict[str, Any] = field(default_factory=dict)
    family: str = ""

    @property
    def id(self) -> str:
        return f"{self.target_pass}-{self.seed}" + ("-near" if self.near_miss else "")


@dataclass(frozen=True)
class Generator:
    """`build(builder, near_miss)` fills a GraphBuilder; the rest is shared.

    `fires` is False for a pass that cannot change any model (`nop`); `near_misses` is False for a
    pass that fires on every model it is given, so no look-alike exists. `optimizers` are the
    built-in optimizers whose pass of this name the pattern follows (each of its models fires
    there); another optimizer with a pass of the name gets the models too, and may decline some
    (onnxsim's older copy of onnx-optimizer's passes reads no Squeeze axes input).
    """

    target_pass: str
    family: str
    build: BuildFunc
    opsets: tuple[int, int] = DEFAULT_OPSETS
    fires: bool = True
    near_misses: bool = True
    optimizers: tuple[str, ...] = ("onnxoptimizer",)

    def __call__(self, rng: np.random.Generator, near_miss: bool | None = None,
                 seed: int = 0) -> GeneratedModel:
        if near_miss is None:
            near_miss = self.near_misses and bool(rng.random() < 0.3)
        failures: list[str] = []
        for _ in range(MAX_DRAWS):
            opset = int(rng.integers(self.opsets[0], self.opsets[1] + 1))
            builder = GraphBuilder(rng, opset)
            self.build(builder, near_miss)
            try:
                model = builder.model(f"{self.target_pass}_{seed}")  # infers its shapes, strictly
            except onnx.shape_inference.InferenceError as exc:
                failures.append(f"shape inference: {exc}")
                continue
            feeds = builder.feeds(FEEDS_PER_MODEL)
            problem = _execution_problem(model, feeds)
            if problem is None:
                ranges = builder.value_ranges()
                _stamp(model, self.target_pass, seed, near_miss, ranges, self.family)
                return GeneratedModel(model, feeds, self.target_pass, near_miss, seed, ranges,
                                      self.family)
            failures.append(problem)
        raise GenerationFailed(
            f"generator for {self.target_pass} produced no finite model in {MAX_DRAWS} draws "
            f"(seed {seed}): {failures[-1]}"
        )


class GenerationFailed(Exception):
    """A generator made no valid, finite model for a seed: a weakness of ditox-ci's generator, which
    the run records and goes past (`fuzz.corpus.generate_stream`)."""


def _execution_problem(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> str | None:
    """None when the model is checker-valid and runs with all-finite outputs on every feed.

    A draw whose output shape ONNX inference cannot derive fails the full check: re-drawn too.
    """
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        return f"invalid model: {exc}"
    data = model.SerializeToString()
    try:
        try:
            session = runner.load_session(data)
        except runner.RuntimeLoadError:  # no ORT kernel (a boolean Where): the sweep's fallback too
            session = runner.load_session(data, runner="reference")
        results = runner.run_all(session, feeds)
    except (runner.RuntimeLoadError, runner.RuntimeRunError) as exc:
        return f"running it: {exc}"
    for outputs in results:
        for value in outputs:
            if value.dtype.kind in "fc" and not np.all(np.isfinite(value)):
                return "non-finite output"
    return None


def _stamp(model: onnx.ModelProto, target_pass: str, seed: int, near_miss: bool,
           ranges: dict[str, Any], family: str) -> None:
    """Record how to replay the model in its metadata, so a repro bundle carries it."""
    onnx.helper.set_model_props(model, {
        "ditox.generator": target_pass,
        "ditox.family": family,
        "ditox.seed": str(seed),
        "ditox.near_miss": "1" if near_miss else "0",
        "ditox.value_ranges": json.dumps(ranges, sort_keys=True),
    })


GENERATORS: Registry[Generator] = Registry("fuzz generator")


def register(target_pass: str, *, opsets: tuple[int, int] = DEFAULT_OPSETS, fires: bool = True,
             near_misses: bool = True,
             optimizers: tuple[str, ...] = ("onnxoptimizer",)) -> Callable[[BuildFunc], BuildFunc]:
    """Register `build` as the generator for `target_pass`; its module name is the family. One
    build may serve several passes (decorators stacked): the same pattern under two names."""

    def decorate(build: BuildFunc) -> BuildFunc:
        family = build.__module__.rsplit(".", 1)[-1]
        generator = Generator(target_pass, family, build, opsets, fires, near_misses, optimizers)
        GENERATORS[target_pass] = generator
        return build

    return decorate


def generate(target_pass: str, seed: int, near_miss: bool | None = None) -> GeneratedModel:
    """The model for (pass, seed): the same bytes every time, on every machine."""
    if target_pass not in GENERATORS:
        known = ", ".join(sorted(GENERATORS))
        raise UsageError(f"no fuzz generator for pass '{target_pass}'; choose from: {known}")
    return GENERATORS[target_pass](np.random.default_rng(seed), near_miss, seed)
