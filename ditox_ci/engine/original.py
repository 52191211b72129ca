"""The original model, prepared once: loaded, fed and run on every sample by the first runner that
can, with its noise floor measured. Every step of the model's job then judges its optimized model
against this ModelContext (`evaluate.py`), so the original is parsed and run once per model. A job
that may reuse verdicts judged before (`engine.reuse`) loads it only (`load_original`): it runs
(`run_original`) when a result needs judging, never when every result was judged before.

Runs inside a worker process (`worker.py`). A model that cannot be tested at all (unreadable,
over protobuf's limit, no runner can run it) raises SkipModel with the reason the report shows.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import EncodeError

from ditox_ci.compare.tensor import Tolerances
from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import (
    InputSpecError,
    has_recorded_inputs,
    inputs_kind,
    make_feeds,
    signed_feed,
    wide_feed,
    wide_inputs,
)
from ditox_ci.corpus.loading import ModelLoadError, load_model_and_bytes
from ditox_ci.engine import runner
from ditox_ci.engine.fp64 import Reference
from ditox_ci.engine.noise import (
    PlainRun,
    measure_noise,
    quantization_steps,
    random_output_positions,
    random_outputs,
)
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.reuse import OriginalInfo, Reuse, judged_as
from ditox_ci.engine.structure import checker_error, model_size
from ditox_ci.engine.values import Feeds
from ditox_ci.report.effect import Size
from ditox_ci.report.header import NOISE_FLOORS

MAX_REDRAWS = 3


@dataclass(frozen=True)
class EvalSettings:
    samples: int = 1
    seed: int = 0
    dynamic_dim: int = 2
    tolerances: Tolerances = field(default_factory=Tolerances)
    threads: int = 1
    # auto: ONNX Runtime, or the reference implementation for an original ONNX Runtime cannot run
    runner: str = "auto"
    # judge float outputs against the model's own noise floor too (see measure_noise)
    calibrate: bool = True
    # what that floor is measured against (ditox_ci.optimizers.NOISE_FLOORS)
    noise_floor: str = NOISE_FLOORS[0]
    # the optimizer under test loads its input in ONNX Runtime (its own optimizer's adapters): an
    # original ORT cannot load or run is a skip, never a finding of the optimizer's
    runtime_loads_input: bool = False


@dataclass(frozen=True)
class Draw:
    """How the original's feeds were made, enough to make them again without running it (what
    pinpointing does, in the parent): `samples` asked for, the `attempt` of the random draw the runner
    judged (re-drawn after NaN/Inf), then the wide-range sample at `wide_scales` (an input not named
    at full scale; None: left out), then the sign-structured one when `signed`. A Draw travels in
    the job result instead of the feeds themselves: those would cross the pipe for every model,
    megabytes for an image model, and stay in the parent for the whole sweep."""

    samples: int
    attempt: int = 0
    wide_scales: Mapping[str, float] | None = None
    signed: bool = False

    def feeds(self, model: onnx.ModelProto, ref: ModelRef, settings: EvalSettings) -> Feeds:
        """The feeds the worker judged `model` on."""
        feeds = make_feeds(model, ref, self.samples, settings.seed, settings.dynamic_dim, self.attempt)
        if self.wide_scales is not None and feeds:
            wide = wide_feed(model, feeds[0], settings.seed, ref.id, self.wide_scales)
            feeds = [*feeds, wide] if wide is not None else feeds
        if self.signed and feeds:
            signed = signed_feed(model, feeds[0], settings.seed, ref.id)
            feeds = [*feeds, signed] if signed is not None else feeds
        return feeds

    def to_json(self) -> dict[str, Any]:
        wide = dict(self.wide_scales) if self.wide_scales is not None else None
        return {"samples": self.samples, "attempt": self.attempt, "wide_scales": wide, "signed": self.signed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Draw:
        wide = data.get("wide_scales")
        return cls(
            int(data["samples"]),
            int(data.get("attempt", 0)),
            {str(name): float(scale) for name, scale in wide.items()} if wide is not None else None,
            bool(data.get("signed", False)),
        )


@dataclass
class ModelContext:
    """Everything about the original that every step reuses."""

    ref: ModelRef
    model: onnx.ModelProto
    data: bytes
    digest: str
    # the original as judged: its bytes and first-drawn inputs (reuse.judged_as)
    judged_as: str = ""
    # its size (report/effect.py), which the results' sizes are told against
    size: Size | None = None
    # False until the original ran (`run_original`): a job whose every result was judged before
    # (`reuse`) never runs it
    ran: bool = False
    # until it ran, the inputs first drawn (what `judged_as` hashes); then every sample judged on
    feeds: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[list[np.ndarray]] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    checker_error: str | None = None
    info: OriginalInfo = field(default_factory=OriginalInfo)
    # results judged in an earlier run or on another build, by digest (engine/reuse.py)
    reuse: Reuse | None = None
    judged: dict[str, Outcome] = field(default_factory=dict)
    # the bytes of judged optimized models small enough to keep, by length: a step whose result is
    # one of them is found by comparing bytes, not by hashing its result (see evaluate.judge_bytes)
    judged_bytes: dict[int, list[tuple[bytes, str]]] = field(default_factory=dict)
    # the length of every result judged, by digest (kept or not): a screen's result of another
    # length than the control's is not the control's (engine/screen.py)
    result_sizes: dict[str, int] = field(default_factory=dict)
    kept_bytes: int = 0
    cache_hits: int = 0
    # seconds in the optimizer's calls (evaluate.optimizer_call)
    optimizer_s: float = 0.0
    # made on first use only: comparators that re-run the models (text generation) need it
    session: Any = None
    # the runner that judges this model: the one that could run the original
    runner: str = "onnxruntime"
    # per sample, per output: the original's numerical noise (measure_noise); [] when not measured
    noise: list[list[float | None]] = field(default_factory=list)
    # per sample: the original's intermediates that are NaN/Inf on it, found once a mismatch needs it
    saturated: dict[int, list[str]] = field(default_factory=dict)
    # how `feeds` were made
    draw: Draw | None = None
    # the original in float64 on `feeds` (fp64.py), computed once a difference needs it
    fp64: Reference | None = None
    # per output: the step of its quantized values where the graph says (noise.quantization_steps)
    quanta: list[float | None] = field(default_factory=list)


class SkipModel(Exception):
    """The original itself cannot be tested (unreadable, or ONNX Runtime cannot run it)."""


def _finite(outputs: Sequence[Sequence[Any]]) -> bool:
    for sample in outputs:
        for value in sample:
            if isinstance(value, list):
                continue
            array = np.asarray(value)
            if "float" in array.dtype.name and array.dtype.kind not in "fc":  # bfloat16, float8…
                array = array.astype(np.float32)
            if array.dtype.kind in "fc" and not np.isfinite(array).all():
                return False
    return True


# what each runner is called in a skip reason
RUNNER_TITLES = {"onnxruntime": "ONNX Runtime", "reference": "the reference runner"}


class _RunnerFailed(Exception):
    """This runner cannot load or run the original; another one may."""


def _run_original(
    model: onnx.ModelProto,
    data: bytes,
    ref: ModelRef,
    settings: EvalSettings,
    runner_name: str,
    inputs: str,
    first: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[list[Any]], Draw]:
    """The original's feeds and outputs on one runner, re-drawing random inputs after NaN/Inf, and
    how they were drawn. `first` are the feeds of the first draw (`load_original` made them)."""
    title = RUNNER_TITLES[runner_name]
    try:
        session = runner.load_session(data, settings.threads, runner_name)
    except runner.RuntimeLoadError as exc:
        raise _RunnerFailed(f"{title} cannot load the original: {exc}") from None
    # recorded inputs are what the model's authors meant: they are never re-drawn
    recorded = inputs == "recorded"
    for attempt in range(MAX_REDRAWS + 1):
        feeds = first if attempt == 0 else _drawn(model, ref, settings, attempt)
        try:
            outputs = runner.run_all(session, feeds)
        except runner.RuntimeRunError as exc:
            raise _RunnerFailed(f"{title} cannot run the original: {exc}") from None
        if recorded or _finite(outputs):
            break
    draw = Draw(_samples(ref, settings), attempt)
    if ref.comparator or inputs not in ("random", "recorded") or ref.meta.get(EXACT_SAMPLES):
        return feeds, outputs, draw  # a task's inputs (images, text) mean something at their own scale
    wide = _wide_sample(session, model, feeds, ref, settings)
    if wide is not None:
        feeds, outputs = [*feeds, wide[0]], [*outputs, wide[1]]
        draw = replace(draw, wide_scales=wide[2])
    signed = signed_feed(model, feeds[0], settings.seed, ref.id)
    if signed is None:
        return feeds, outputs, draw
    try:
        signed_outputs = runner.run(session, signed)
    except runner.RuntimeRunError:  # left out: the original fails on it
        return feeds, outputs, draw
    if not _finite([signed_outputs]):  # left out: the original gives NaN/Inf on it
        return feeds, outputs, draw
    return [*feeds, signed], [*outputs, signed_outputs], replace(draw, signed=True)


# A model's meta flag: its recorded inputs are every sample to judge it on (ditox-ci wrote them,
# the wide-range sample included, for a reduction candidate); none is left out or added.
EXACT_SAMPLES = "exact_samples"
# how far an input of the wide sample is scaled back, step by step, while the original gives
# NaN/Inf on it; and how many inputs are tried one by one before all are scaled back together
WIDE_SCALES = (1.0, 0.1, 0.01)
WIDE_INPUTS_TRIED = 8


def _wide_sample(
    session: Any,
    model: onnx.ModelProto,
    feeds: Sequence[dict[str, Any]],
    ref: ModelRef,
    settings: EvalSettings,
) -> tuple[dict[str, Any], list[Any], dict[str, float]] | None:
    """One more sample after `feeds`: the first of them with its float inputs at wide magnitudes.
    Where the original gives NaN/Inf on it, inputs are scaled back in the spirit of NNSmith's search
    for valid inputs: each input alone, step by step through WIDE_SCALES while the others stay wide
    (one input driving an Exp or a Pow is the usual cause), then all of them together. Nothing when
    it has no float input, the original fails on it, or it stays NaN/Inf at the smallest scale.
    Returns the feed, the original's outputs on it and the scales of the inputs scaled back."""
    first = feeds[0]
    names = wide_inputs(model, first)
    if not names:
        return None
    wide = dict.fromkeys(names, WIDE_SCALES[0])
    alone = [{**wide, name: step} for name in names[:WIDE_INPUTS_TRIED] for step in WIDE_SCALES[1:]]
    together = [dict.fromkeys(names, step) for step in WIDE_SCALES[1:]]
    for scales in [wide, *(alone if len(names) > 1 else []), *together]:
        feed = wide_feed(model, first, settings.seed, ref.id, scales)
        assert feed is not None
        try:
            outputs = runner.run(session, feed)
        except runner.RuntimeRunError:
            return None
        if _finite([outputs]):
            return feed, outputs, {name: scale for name, scale in scales.items() if scale != WIDE_SCALES[0]}
    return None


def original_noise(
    model: onnx.ModelProto, plain: PlainRun, settings: EvalSettings
) -> tuple[list[list[float | None]], bool | None]:
    """Per sample, per output: the noise the tensor oracle judges `model`'s float outputs against
    ([] when not calibrated; inf for an output a random op draws anew), and whether it could be
    measured against ONNX Runtime's own optimizations (None: not tried). `prepare` and a repro
    bundle (for the reduced model) both take it from here."""
    noise: list[list[float | None]] = []
    measured = None
    if settings.calibrate and plain.runner_name == "onnxruntime":
        noise = measure_noise(plain, settings.noise_floor)
        measured = bool(noise)
    elif settings.calibrate:
        noise = random_outputs(plain)
    drawn = random_output_positions(model)
    if drawn:  # whatever a run shows, these outputs are drawn anew every time
        noise = noise or [[None] * len(row) for row in plain.outputs]
        for row in noise:
            for position in drawn & set(range(len(row))):
                row[position] = math.inf
    return noise, measured


def _samples(ref: ModelRef, settings: EvalSettings) -> int:
    """How many samples to draw: every recorded data set of a model whose recorded inputs are its
    samples (a candidate without inputs has none to read, and drawing sys.maxsize random samples for
    it would never end), else the sweep's number."""
    exact = ref.meta.get(EXACT_SAMPLES) and has_recorded_inputs(ref)
    return sys.maxsize if exact else settings.samples


def _drawn(model: onnx.ModelProto, ref: ModelRef, settings: EvalSettings, attempt: int) -> Feeds:
    """The feeds of one draw, or SkipModel when the model's inputs cannot be made."""
    try:
        return make_feeds(model, ref, _samples(ref, settings), settings.seed, settings.dynamic_dim, attempt)
    except InputSpecError as exc:
        raise SkipModel(f"cannot make inputs: {exc}") from None
    except MemoryError as exc:  # declared shapes beyond this machine: the model's, not a bug of ours
        raise SkipModel(f"cannot make inputs: {exc}") from None


def prepare(ref: ModelRef, settings: EvalSettings, reuse: Reuse | None = None) -> ModelContext:
    """Load the original, make its inputs and run it once per sample (re-drawing NaN/Inf), on the
    first runner that can: with `--runner auto`, ONNX Runtime, else ONNX's reference implementation.

    With `reuse` for the original as judged now, it is loaded only (`load_original`): it runs when
    a result needs judging (`run_original`)."""
    context = load_original(ref, settings, reuse)
    if context.reuse is None:
        run_original(context, settings)
    return context


def serialized(model: onnx.ModelProto) -> bytes:
    """The model's bytes; SkipModel when protobuf refuses to serialize it: over its 2 GiB limit for one
    message (ONNX's messages have no required field, the other reason it refuses). Its size is not
    asked first: `ByteSize` walks the model as serializing does (2 s for light/vgg19), and refuses a
    model over the limit too."""
    try:
        return model.SerializeToString()
    except EncodeError as exc:
        raise SkipModel(
            f"protobuf cannot serialize the model ({exc}): with its external data it is over protobuf's "
            "2 GiB limit for one serialized model, which the optimizer's and the runners' Python APIs need"
        ) from None


def load_original(ref: ModelRef, settings: EvalSettings, reuse: Reuse | None = None) -> ModelContext:
    """The original loaded, with the inputs first drawn for it, not yet run; `reuse` kept when it
    was judged for this very original and inputs, else dropped."""
    if ref.meta.get("unavailable"):
        raise SkipModel(str(ref.meta["unavailable"]))
    try:
        model, data = load_model_and_bytes(ref)
    except ModelLoadError as exc:
        raise SkipModel(f"unreadable model: {exc}") from None
    if not model.graph.output:
        raise SkipModel(f"no outputs to compare: {model.graph.name or 'its graph'} declares none")
    data = data if data is not None else serialized(model)
    digest = hashlib.sha256(data).hexdigest()
    first = _drawn(model, ref, settings, 0)
    judged = judged_as(digest, first)
    kept = reuse if reuse is not None and reuse.judged_as == judged else None
    # what running the original told when it was judged, until it runs here
    info = replace(kept.info, inputs=inputs_kind(ref)) if kept is not None else OriginalInfo(inputs_kind(ref))
    return ModelContext(
        ref=ref,
        model=model,
        data=data,
        digest=digest,
        judged_as=judged,
        size=model_size(model, len(data)),
        feeds=first,
        output_names=[o.name for o in model.graph.output],
        info=info,
        runner=info.runner_or_default(),
        reuse=kept,
        draw=Draw.from_json(kept.draw) if kept is not None and kept.draw is not None else None,
    )


def run_original(context: ModelContext, settings: EvalSettings) -> None:
    """Run the loaded original on its samples (`prepare`), once: its outputs, noise floor and
    checker verdict fill in `context`. SkipModel when no runner can run it."""
    if context.ran:
        return
    model, data, ref = context.model, context.data, context.ref
    inputs = context.info.inputs
    failures: list[str] = []
    for runner_name in runner.RUNNERS if settings.runner == "auto" else (settings.runner,):
        try:
            ran = _run_original(model, data, ref, settings, runner_name, inputs, context.feeds)
        except _RunnerFailed as exc:
            failures.append(str(exc))
            continue
        feeds, outputs, draw = ran
        info = OriginalInfo(inputs, runner_name, failures[0][:500] if failures else None)
        break
    else:
        raise SkipModel("; ".join(failures))
    if failures and settings.runtime_loads_input:
        raise SkipModel(
            f"{failures[0][:300]}; the optimizer under test is ONNX Runtime's own, which cannot "
            "optimize what ONNX Runtime cannot load: nothing to judge (the original's limitation)"
        )
    plain = PlainRun(data, feeds, outputs, settings.threads, runner_name)
    noise, measured = original_noise(model, plain, settings)
    if measured is not None:
        reference = settings.noise_floor != NOISE_FLOORS[0]
        against = f" against the {settings.noise_floor} runner" if reference else ""
        info = replace(info, noise_floor=f"measured{against}" if measured else "not measurable")
    context.ran = True
    context.feeds, context.outputs, context.draw = feeds, outputs, draw
    context.checker_error = checker_error(data)
    context.info, context.runner = info, runner_name
    context.noise, context.quanta = noise, quantization_steps(model)
