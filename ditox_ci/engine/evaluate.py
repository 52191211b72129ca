"""Original vs optimized for one model: the oracles that turn an optimizer call into an Outcome.

Runs inside a worker process (see `worker.py`): the optimizer and ONNX Runtime are native code that
can crash, and this module assumes nothing survives that. The original model is prepared once
(parsed, run on every sample) and its outputs are reused by every step; an optimized model whose
bytes were already judged is not run again.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import onnx

from ditox_ci.compare import COMPARATORS, Comparison
from ditox_ci.compare.tasks import CompareContext, needs_context
from ditox_ci.compare.tensor import float64_array
from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import (
    Feed,
    InputSpecError,
    feedable_inputs,
    has_recorded_inputs,
    inputs_kind,
    make_feeds,
    signed_feed,
    wide_feed,
    wide_inputs,
)
from ditox_ci.corpus.loading import ModelLoadError, load_model
from ditox_ci.engine import runner
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.saturation import finite_version, precision_warning, saturated_tensors
from ditox_ci.optimizers import NOISE_FLOORS, LoadedOptimizer, optimizer_error

MAX_REDRAWS = 3
PhaseCallback = Callable[[str], None]


@dataclass(frozen=True)
class EvalSettings:
    samples: int = 1
    seed: int = 0
    dynamic_dim: int = 2
    # None: each output's dtype decides (compare.tensor.DTYPE_TOLERANCES)
    rtol: float | dict[str, float] | None = None
    atol: float | dict[str, float] | None = None
    threads: int = 1
    # auto: ONNX Runtime, or the reference implementation for an original ONNX Runtime cannot run
    runner: str = "auto"
    # judge float outputs against the model's own noise floor too (see measure_noise)
    calibrate: bool = True
    # what that floor is measured against (ditox_ci.optimizers.NOISE_FLOORS)
    noise_floor: str = NOISE_FLOORS[0]


@dataclass
class ModelContext:
    """Everything about the original that every step reuses."""

    ref: ModelRef
    model: onnx.ModelProto
    data: bytes
    digest: str
    feeds: list[dict[str, Any]]
    outputs: list[list[np.ndarray]]
    output_names: list[str]
    checker_error: str | None
    info: dict[str, Any] = field(default_factory=dict)
    judged: dict[str, Outcome] = field(default_factory=dict)
    cache_hits: int = 0
    # made on first use only: comparators that re-run the models (text generation) need it
    session: Any = None
    # the runner that judges this model: the one that could run the original
    runner: str = "onnxruntime"
    # per sample, per output: the original's numerical noise (measure_noise); [] when not measured
    noise: list[list[float | None]] = field(default_factory=list)
    # per sample: the original's intermediates that are NaN/Inf on it, found once a mismatch needs it
    saturated: dict[int, list[str]] = field(default_factory=dict)


class SkipModel(Exception):
    """The original itself cannot be tested (unreadable, or ONNX Runtime cannot run it)."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check(model: onnx.ModelProto) -> str | None:
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    return None


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
# the largest serialized protobuf message
PROTOBUF_LIMIT = 2**31 - 1


class _RunnerFailed(Exception):
    """This runner cannot load or run the original; another one may."""


def _run_original(
    model: onnx.ModelProto,
    data: bytes,
    ref: ModelRef,
    settings: EvalSettings,
    runner_name: str,
    info: dict[str, Any],
) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """The original's feeds and outputs on one runner, re-drawing random inputs after NaN/Inf."""
    # the re-draws of a runner that then failed are not this one's: pinpointing re-makes the feeds
    # from info["redraws"]
    info.pop("redraws", None)
    info.pop("original_nonfinite", None)
    title = RUNNER_TITLES[runner_name]
    try:
        session = runner.load_session(data, settings.threads, runner_name)
    except runner.RuntimeLoadError as exc:
        raise _RunnerFailed(f"{title} cannot load the original: {exc}") from None
    # recorded inputs are what the model's authors meant: they are never re-drawn
    recorded = info["inputs"] == "recorded"
    for attempt in range(MAX_REDRAWS + 1):
        try:
            # every recorded data set; a candidate without inputs has none to read, and drawing
            # sys.maxsize random samples for it would never end
            exact = ref.meta.get(EXACT_SAMPLES) and has_recorded_inputs(ref)
            samples = sys.maxsize if exact else settings.samples
            feeds = make_feeds(model, ref, samples, settings.seed, settings.dynamic_dim, attempt)
        except InputSpecError as exc:
            raise SkipModel(f"cannot make inputs: {exc}") from None
        except MemoryError as exc:  # declared shapes beyond this machine: the model's, not a bug of ours
            raise SkipModel(f"cannot make inputs: {exc}") from None
        try:
            outputs = runner.run_all(session, feeds)
        except runner.RuntimeRunError as exc:
            raise _RunnerFailed(f"{title} cannot run the original: {exc}") from None
        if recorded or _finite(outputs):
            break
        info["redraws"] = attempt + 1
    else:
        info["original_nonfinite"] = True
    if ref.comparator or info["inputs"] not in ("random", "recorded") or ref.meta.get(EXACT_SAMPLES):
        return feeds, outputs  # a task's inputs (images, text) mean something at their own scale
    wide_feeds, wide_outputs = _wide_sample(session, model, feeds, ref, settings, info)
    feeds, outputs = feeds + wide_feeds, outputs + wide_outputs
    signed = signed_feed(model, feeds[0], settings.seed, ref.id)
    if signed is None:
        return feeds, outputs
    try:
        signed_outputs = runner.run(session, signed)
    except runner.RuntimeRunError as exc:
        info["signed_sample"] = f"left out: the original fails on it ({str(exc)[:200]})"
        return feeds, outputs
    if not _finite([signed_outputs]):
        info["signed_sample"] = "left out: the original gives NaN/Inf on it"
        return feeds, outputs
    info["signed_sample"] = {"sample": len(feeds)}  # after the wide one, as pinpointing re-makes them
    return [*feeds, signed], [*outputs, signed_outputs]


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
    info: dict[str, Any],
) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """One more sample after `feeds`: the first of them with its float inputs at wide magnitudes.
    Where the original gives NaN/Inf on it, inputs are scaled back in the spirit of NNSmith's search
    for valid inputs: each input alone, step by step through WIDE_SCALES while the others stay wide
    (one input driving an Exp or a Pow is the usual cause), then all of them together. Nothing when
    it has no float input, the original fails on it, or it stays NaN/Inf at the smallest scale."""
    first = feeds[0]
    names = wide_inputs(model, first)
    if not names:
        return [], []
    wide = dict.fromkeys(names, WIDE_SCALES[0])
    alone = [{**wide, name: step} for name in names[:WIDE_INPUTS_TRIED] for step in WIDE_SCALES[1:]]
    together = [dict.fromkeys(names, step) for step in WIDE_SCALES[1:]]
    for scales in [wide, *(alone if len(names) > 1 else []), *together]:
        feed = wide_feed(model, first, settings.seed, ref.id, scales)
        assert feed is not None
        try:
            outputs = runner.run(session, feed)
        except runner.RuntimeRunError as exc:
            info["wide_sample"] = f"left out: the original fails on it ({str(exc)[:200]})"
            return [], []
        if _finite([outputs]):
            scaled = {name: scale for name, scale in scales.items() if scale != WIDE_SCALES[0]}
            # its index: recorded inputs may have fewer data sets than --samples
            info["wide_sample"] = {"sample": len(feeds), "scales": scaled}
            return [feed], [outputs]
    info["wide_sample"] = "left out: the original gives NaN/Inf on it even scaled back"
    return [], []


def prepare(ref: ModelRef, settings: EvalSettings) -> ModelContext:
    """Load the original, make its inputs and run it once per sample (re-drawing NaN/Inf), on the
    first runner that can: with `--runner auto`, ONNX Runtime, else ONNX's reference implementation."""
    if ref.meta.get("unavailable"):
        raise SkipModel(str(ref.meta["unavailable"]))
    try:
        model = load_model(ref)
    except ModelLoadError as exc:
        raise SkipModel(f"unreadable model: {exc}") from None
    if not model.graph.output:
        raise SkipModel(f"no outputs to compare: {model.graph.name or 'its graph'} declares none")
    size = model.ByteSize()
    if size > PROTOBUF_LIMIT:
        raise SkipModel(
            f"the model is {size / 2**30:.1f} GiB with its external data, over protobuf's 2 GiB limit "
            "for one serialized model, which the optimizer's and the runners' Python APIs need"
        )
    data = model.SerializeToString()
    info: dict[str, Any] = {"inputs": inputs_kind(ref)}
    failures: list[str] = []
    for runner_name in runner.RUNNERS if settings.runner == "auto" else (settings.runner,):
        try:
            feeds, outputs = _run_original(model, data, ref, settings, runner_name, info)
        except _RunnerFailed as exc:
            failures.append(str(exc))
            continue
        info["runner"] = runner_name
        if failures:
            info["runner_fallback"] = failures[0][:500]
        break
    else:
        raise SkipModel("; ".join(failures))
    noise: list[list[float | None]] = []
    plain = PlainRun(data, feeds, outputs, settings.threads, info["runner"])
    if settings.calibrate and plain.runner_name == "onnxruntime":
        noise = measure_noise(plain, settings.noise_floor)
        reference = settings.noise_floor != NOISE_FLOORS[0]
        against = f" against the {settings.noise_floor} runner" if reference else ""
        info["noise_floor"] = f"measured{against}" if noise else "not measurable"
    elif settings.calibrate:
        noise = random_outputs(plain)
    drawn = random_output_positions(model)
    if drawn:  # whatever a run shows, these outputs are drawn anew every time
        noise = noise or [[None] * len(row) for row in outputs]
        for row in noise:
            for position in drawn & set(range(len(row))):
                row[position] = math.inf
    return ModelContext(
        ref=ref,
        model=model,
        data=data,
        digest=_sha256(data),
        feeds=feeds,
        outputs=outputs,
        output_names=[o.name for o in model.graph.output],
        checker_error=_check(model),
        info=info,
        runner=info["runner"],
        noise=noise,
    )


@dataclass(frozen=True)
class PlainRun:
    """The original model's serialized bytes, the feeds it ran on and what it gave, run plainly
    (the runtime's own optimizations off) by `runner_name` with `threads` threads."""

    data: bytes
    feeds: Sequence[Mapping[str, Any]]
    outputs: Sequence[Sequence[Any]]
    threads: int
    runner_name: str


def measure_noise(plain: PlainRun, against: str = NOISE_FLOORS[0]) -> list[list[float | None]]:
    """How far each float output of the original moves when ONNX Runtime runs it with all of its
    own graph optimizations on (fusions, layout changes, reordered arithmetic: the same meaning),
    or, `against` "reference", when ONNX's reference implementation runs it (where ORT's own
    optimizations are under test): the largest absolute difference per sample and output, the
    model's own numerical noise floor. [] when that session cannot load or run; None for an output
    that is not a float tensor.

    An output that moves a lot (0.1 % of its magnitude, or at all when it is not a float tensor)
    may come from a random op: when a second plain run moves it too, its noise is infinite, and the
    tensor oracle checks only its shape and dtype (random_output_positions finds the outputs a
    seedless random op reaches without running anything)."""
    if against == "reference" and len(plain.data) > REFERENCE_NOISE_MAX_BYTES:
        return []
    try:
        session = (
            runner.load_session(plain.data, plain.threads, "reference")
            if against == "reference"
            else runner.load_noise_session(plain.data, plain.threads)
        )
        rerun = runner.run_all(session, plain.feeds)
    except (runner.RuntimeLoadError, runner.RuntimeRunError):
        return []
    noise: list[list[float | None]] = []
    suspects: list[tuple[int, int]] = []
    for sample, (plain_sample, rerun_sample) in enumerate(zip(plain.outputs, rerun)):
        row: list[float | None] = []
        for position, (before, again) in enumerate(zip(plain_sample, rerun_sample)):
            a, b = float64_array(before), float64_array(again)
            if a is None or b is None or a.shape != b.shape:
                row.append(None)
                if not _identical(before, again):
                    suspects.append((sample, position))
                continue
            both = np.isfinite(a) & np.isfinite(b)
            moved = float(np.abs(a[both] - b[both]).max()) if both.any() else 0.0
            row.append(moved)
            if moved > NONDETERMINISM_SUSPECT * (float(np.abs(a[both]).max()) if both.any() else 0.0):
                suspects.append((sample, position))
        noise.append(row)
    if suspects:
        changing = _changing(plain, suspects)
        for sample, position in changing or ():
            noise[sample][position] = math.inf
    return noise


# The reference runner is numpy, op by op: on a model with megabytes of weights (onnx-data's
# light/* networks) one run takes minutes, so such a model's noise is not measured against it
REFERENCE_NOISE_MAX_BYTES = 2 * 2**20
# an output the runtime's own optimizations move by this share of its magnitude is run again
NONDETERMINISM_SUSPECT = 1e-3


def random_outputs(plain: PlainRun) -> list[list[float | None]]:
    """For a runner without a noise measurement (the reference implementation): the original run
    once more the same way; an output that changes is nondeterministic (infinite noise), the others
    are not calibrated (None). [] when the rerun fails."""
    suspects = [
        (sample, position) for sample, row in enumerate(plain.outputs) for position in range(len(row))
    ]
    changing = _changing(plain, suspects)
    if changing is None:
        return []
    return [
        [math.inf if (sample, position) in changing else None for position in range(len(row))]
        for sample, row in enumerate(plain.outputs)
    ]


RANDOM_OPS = frozenset(
    ("Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike")
)


def _draws(node: onnx.NodeProto, functions: Mapping[tuple[str, str], onnx.FunctionProto]) -> bool:
    """Whether a node draws without a seed: a random op, or one whose subgraphs or function do."""
    if node.op_type in RANDOM_OPS and all(a.name != "seed" for a in node.attribute):
        return True
    inner: list[Any] = []
    for attribute in node.attribute:
        inner.extend([attribute.g] if attribute.HasField("g") else attribute.graphs)
    function = functions.get((node.domain, node.op_type))
    if function is not None:
        inner.append(function)
    return any(_draws(sub, functions) for graph in inner for sub in graph.node)


def random_output_positions(model: onnx.ModelProto) -> set[int]:
    """The positions of the graph outputs that a random op without a seed reaches: a second run
    may repeat the first draw by chance (ten Bernoulli draws of p = 0.9), so this is read off the
    graph, not off runs."""
    functions = {(f.domain, f.name): f for f in model.functions}
    drawn: set[str] = set()
    for node in model.graph.node:
        if _draws(node, functions) or any(name in drawn for name in node.input):
            drawn.update(name for name in node.output if name)
    return {position for position, value in enumerate(model.graph.output) if value.name in drawn}


def _changing(plain: PlainRun, suspects: Sequence[tuple[int, int]]) -> set[tuple[int, int]] | None:
    """Which of the `suspects` (sample, output position) change when the original runs again
    plainly; None when that run fails."""
    try:
        again = runner.run_all(runner.load_session(plain.data, plain.threads, plain.runner_name), plain.feeds)
    except (runner.RuntimeLoadError, runner.RuntimeRunError):
        return None
    return {
        (sample, position)
        for sample, position in suspects
        if not _identical(plain.outputs[sample][position], again[sample][position])
    }


def _identical(a: Any, b: Any) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_identical(x, y) for x, y in zip(a, b))
        )
    if a is None or b is None:
        return a is b
    x, y = np.asarray(a), np.asarray(b)
    # NaN is NaN again in ml_dtypes' floats too (bfloat16, float8: numpy kind "V"); else a NaN in
    # one would make the output look nondeterministic, compared for its shape and dtype only
    return bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc" or "float" in x.dtype.name))


def _signature(value: onnx.ValueInfoProto) -> tuple[int, tuple[int | None, ...] | None]:
    tensor = value.type.tensor_type
    if not value.type.HasField("tensor_type"):
        return (-1, None)
    shape = (
        # a negative dim_value is as unknown as a symbolic one
        tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None for d in tensor.shape.dim)
        if tensor.HasField("shape")
        else None
    )
    return (tensor.elem_type, shape)


def _shapes_conflict(a: tuple[int | None, ...] | None, b: tuple[int | None, ...] | None) -> bool:
    if a is None or b is None:
        return False
    return len(a) != len(b) or any(x is not None and y is not None and x != y for x, y in zip(a, b))


def interface_change(original: onnx.ModelProto, optimized: onnx.ModelProto) -> str | None:
    """Compare inputs and outputs by position: count, element type, static dims (names may change)."""
    for what, before, after in (
        ("input", feedable_inputs(original), feedable_inputs(optimized)),
        ("output", list(original.graph.output), list(optimized.graph.output)),
    ):
        if len(before) != len(after):
            return f"graph {what} count changed from {len(before)} to {len(after)}"
        for position, (a, b) in enumerate(zip(before, after)):
            (type_a, shape_a), (type_b, shape_b) = _signature(a), _signature(b)
            if type_a != type_b:
                names = (
                    onnx.TensorProto.DataType.Name(t) if t > 0 else "non-tensor" for t in (type_a, type_b)
                )
                return f"graph {what} #{position} ('{a.name}') element type changed: {' -> '.join(names)}"
            if _shapes_conflict(shape_a, shape_b):
                return f"graph {what} #{position} ('{a.name}') shape changed: {shape_a} -> {shape_b}"
    return None


def _used_names(graph: onnx.GraphProto) -> set[str]:
    used = {o.name for o in graph.output}
    for node in graph.node:
        used.update(node.input)
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                used |= _used_names(sub)
    return used


def unused_initializers(graph: onnx.GraphProto) -> set[str]:
    used = _used_names(graph)
    return {init.name for init in graph.initializer if init.name not in used}


CONTRIB_DOMAIN = "com.microsoft"


def contrib_ops(model: onnx.ModelProto) -> list[str]:
    """The ONNX Runtime contrib op types of the main graph, sorted."""
    return sorted({node.op_type for node in model.graph.node if node.domain == CONTRIB_DOMAIN})


def op_changes(original: onnx.GraphProto, optimized: onnx.GraphProto) -> dict[str, list[str]]:
    """Op types whose count went down / up: what the optimizer rewrote, independent of node names."""
    before = Counter(node.op_type for node in original.node)
    after = Counter(node.op_type for node in optimized.node)
    return {
        "ops_removed": sorted(op for op in before if before[op] > after[op]),
        "ops_added": sorted(op for op in after if after[op] > before[op]),
    }


def _notes(original: onnx.ModelProto, optimized: onnx.ModelProto) -> list[str]:
    """Differences that are not failures, recorded as information."""
    notes = []
    if original.ir_version != optimized.ir_version:
        notes.append(f"ir_version {original.ir_version} -> {optimized.ir_version}")
    if len(original.metadata_props) != len(optimized.metadata_props):
        notes.append("metadata_props changed")
    # the old names only: a pass that makes up new ones (split_init) numbers them with a counter
    # that lives as long as the process, so they differ with the models a worker ran before
    renamed = [a.name for a, b in zip(original.graph.output, optimized.graph.output) if a.name != b.name]
    if renamed:
        notes.append("outputs renamed: " + ", ".join(renamed))
    return notes


def _rebind(
    feeds: Sequence[Mapping[str, Any]], original: onnx.ModelProto, optimized: onnx.ModelProto
) -> list[dict[str, Any]]:
    """Feed the optimized graph by input position, since a pass may rename inputs by design."""
    mapping = {a.name: b.name for a, b in zip(feedable_inputs(original), feedable_inputs(optimized))}
    return [{mapping.get(name, name): value for name, value in feed.items()} for feed in feeds]


def judge(
    context: ModelContext,
    optimized: onnx.ModelProto,
    comparators: Sequence[str] = ("tensor",),
    settings: EvalSettings | None = None,
    on_phase: PhaseCallback | None = None,
) -> Outcome:
    """Run the oracles on an optimized model the optimizer already produced."""
    return judge_bytes(context, optimized.SerializeToString(), comparators, settings, on_phase, optimized)


def judge_bytes(
    context: ModelContext,
    data: bytes,
    comparators: Sequence[str] = ("tensor",),
    settings: EvalSettings | None = None,
    on_phase: PhaseCallback | None = None,
    optimized: onnx.ModelProto | None = None,
) -> Outcome:
    """`judge` for a serialized model: unchanged or already judged bytes are never parsed."""
    settings = settings or EvalSettings()
    digest = _sha256(data)
    if data == context.data:
        return Outcome(kind=None, digest=digest, changed=False)
    if digest in context.judged:
        context.cache_hits += 1
        return context.judged[digest]
    if optimized is None:
        optimized = onnx.ModelProto()
        optimized.ParseFromString(data)
    outcome = _judge_changed(context, optimized, data, comparators, settings, on_phase)
    outcome = Outcome(outcome.kind, outcome.message, outcome.evidence, digest, True)
    context.judged[digest] = outcome
    return outcome


def _judge_changed(
    context: ModelContext,
    optimized: onnx.ModelProto,
    data: bytes,
    comparators: Sequence[str],
    settings: EvalSettings,
    on_phase: PhaseCallback | None,
) -> Outcome:
    evidence: dict[str, Any] = op_changes(context.model.graph, optimized.graph)
    notes = _notes(context.model, optimized)
    if notes:
        evidence["info"] = notes
    # A model the checker rejects is still run whenever ONNX Runtime loads it: when the nop control
    # fails the checker (onnxoptimizer 0.4.2 drops the types of sequence outputs), a pass that also
    # miscompiles must show its mismatch, not fold into the nop control's invalid-model.
    invalid: Outcome | None = None
    if context.checker_error is None:
        error = _check(optimized)
        if error is not None:
            evidence["checker"] = error
            invalid = Outcome("invalid-model", error, {**evidence, "message": error})
    # An interface change is the finding whether or not the result also fails the checker (its
    # verdict stays in evidence.checker): the kind follows from this result alone, never from
    # whether the nop control failed, or one output would be two bugs across two builds whose
    # round trips differ (split_init on 0.4.2 and on a head that fixed the round trip)
    change = interface_change(context.model, optimized)
    if change is not None:
        return Outcome("interface-change", change, {**evidence, "message": change})
    if on_phase:
        on_phase("run")
    runner_name = context.runner
    contrib = contrib_ops(optimized)
    if contrib:
        # ONNX Runtime's own fusions (FusedConv, Gelu…): the reference runner has none of them
        runner_name = "onnxruntime"
        evidence.setdefault("info", []).append(
            f"holds {CONTRIB_DOMAIN} ops ({', '.join(contrib[:5])}): run in ONNX Runtime only"
        )
    try:
        session = runner.load_session(data, settings.threads, runner_name)
    except runner.RuntimeLoadError as exc:
        return invalid or Outcome("runtime-load-error", str(exc), {**evidence, "message": str(exc)})
    feeds = _rebind(context.feeds, context.model, optimized)
    try:
        outputs = runner.run_all(session, feeds)
    except runner.RuntimeRunError as exc:
        return Outcome("runtime-error", str(exc), {**evidence, "message": str(exc)})
    mismatch = _comparisons(context, session, outputs, comparators, settings, evidence)
    if mismatch is not None:
        return _unless_saturated(context, optimized, session, outputs, mismatch, settings)
    if invalid is not None:
        return invalid
    introduced = unused_initializers(optimized.graph) - unused_initializers(context.model.graph)
    if introduced:
        message = f"optimizer introduced {len(introduced)} unused initializer(s)"
        return Outcome(
            "warning",
            message,
            {**evidence, "message": message, "initializers": sorted(introduced)[:20]},
        )
    return Outcome(None, "", evidence)


def _saturated(context: ModelContext, sample: int) -> list[str]:
    if sample not in context.saturated:
        context.saturated[sample] = saturated_tensors(context.model, context.feeds[sample], context.runner)
    return context.saturated[sample]


def _unless_saturated(
    context: ModelContext,
    optimized: onnx.ModelProto,
    session: Any,
    outputs: list[list[Any]],
    mismatch: Outcome,
    settings: EvalSettings,
) -> Outcome:
    """A tensor-oracle mismatch on a sample that drives the original's intermediates to NaN/Inf is
    a precision warning (`saturation.precision_warning`) unless a sample that keeps them finite
    shows a difference too: one of the other samples, or that sample scaled back."""
    sample = mismatch.evidence.get("sample")
    if mismatch.evidence.get("comparator") != "tensor" or not isinstance(sample, int):
        return mismatch
    saturated = _saturated(context, sample)
    if not saturated:
        return mismatch

    def agrees(
        samples: Sequence[int], feeds: Sequence[Feed], expected: list[list[Any]], actual: list[list[Any]]
    ) -> bool:
        noise = [context.noise[i] for i in samples] if context.noise else []
        subset = replace(context, feeds=list(feeds), outputs=expected, noise=noise)
        return _compare("tensor", subset, session, actual, settings).passed

    clean = [i for i in range(len(context.feeds)) if i != sample and not _saturated(context, i)]
    picked = [context.outputs[i] for i in clean]
    if clean and not agrees(clean, [context.feeds[i] for i in clean], picked, [outputs[i] for i in clean]):
        return mismatch
    found = finite_version(context.model, context.feeds[sample], context.runner)
    if found is None:
        return precision_warning(mismatch, sample, saturated, None)
    scale, feed = found
    if context.session is None:
        context.session = runner.load_session(context.data, settings.threads, context.runner)
    try:
        expected = runner.run(context.session, feed)
        actual = runner.run(session, _rebind([feed], context.model, optimized)[0])
    except runner.RuntimeRunError:
        return mismatch
    if not agrees([sample], [feed], [expected], [actual]):
        return mismatch
    return precision_warning(mismatch, sample, saturated, scale)


def _comparisons(
    context: ModelContext,
    session: Any,
    outputs: list[list[Any]],
    comparators: Sequence[str],
    settings: EvalSettings,
    evidence: dict[str, Any],
) -> Outcome | None:
    """Every comparator runs, even after one failed: the evidence keeps each one's verdict and
    numbers under `comparators` (when there are several) and names the first failing one, which
    gates, as `comparator`. None when all pass."""
    results = [_compare(name, context, session, outputs, settings) for name in comparators]
    if len(results) > 1:
        evidence["comparators"] = {
            r.comparator: {"passed": r.passed, "message": r.message, **r.metrics} for r in results
        }
    gate = next((r for r in results if not r.passed), None)
    if gate is None:
        return None
    return Outcome(
        "output-mismatch",
        gate.message,
        {
            **evidence,
            **gate.metrics,
            "message": gate.message,
            "output": gate.output,
            "comparator": gate.comparator,
        },
    )


def _compare(
    name: str, context: ModelContext, session: Any, outputs: list[list[Any]], settings: EvalSettings
) -> Comparison:
    """The tensor oracle takes the sweep's tolerances; a task comparator its manifest options."""
    if name == "tensor":
        options: Mapping[str, Any] = {"rtol": settings.rtol, "atol": settings.atol, "noise": context.noise}
    else:
        options = context.ref.meta.get("comparator_options", {})
    compare = COMPARATORS[name](options)
    if not needs_context(compare):
        return compare(context.outputs, outputs, context.output_names)
    if context.session is None:
        context.session = runner.load_session(context.data, settings.threads, context.runner)
    original = context.session
    task_context = CompareContext(
        lambda feed: runner.run(original, feed), lambda feed: runner.run(session, feed), context.feeds
    )
    return compare(context.outputs, outputs, context.output_names, context=task_context)  # type: ignore[call-arg]


def optimizer_input(context: ModelContext, optimizer: LoadedOptimizer) -> onnx.ModelProto:
    """The original as `optimizer` may take it: a private copy when it may edit its input."""
    if not optimizer.mutates_input:
        return context.model
    model = onnx.ModelProto()
    model.ParseFromString(context.data)
    return model


def run_step(
    context: ModelContext,
    optimizer: LoadedOptimizer,
    step: Step,
    comparators: Sequence[str] = ("tensor",),
    settings: EvalSettings | None = None,
    on_phase: PhaseCallback | None = None,
) -> Outcome:
    """Optimize the original with the step's passes and judge the result."""
    return _optimized_outcome(context, optimizer, step, comparators, settings, on_phase)


def _optimized_outcome(
    context: ModelContext,
    optimizer: LoadedOptimizer,
    step: Step,
    comparators: Sequence[str],
    settings: EvalSettings | None,
    on_phase: PhaseCallback | None,
) -> Outcome:
    if on_phase:
        on_phase("optimize")
    if optimizer.optimize_bytes is not None:
        try:
            data = optimizer.optimize_bytes(context.data, step.passes, step.fixed_point)
        except ValueError:
            pass  # over protobuf's 2 GiB: the ModelProto path below goes through external data
        except Exception as exc:
            return Outcome("optimizer-error", *optimizer_error(exc))
        else:
            return judge_bytes(context, data, comparators, settings, on_phase)
    model = optimizer_input(context, optimizer)
    try:
        optimized = optimizer.optimize(model, list(step.passes), step.fixed_point)
        if isinstance(optimized, onnx.ModelProto) and optimizer.normalize is not None:
            optimized = optimizer.normalize(optimized)
    except Exception as exc:
        # keyed on the root cause: one bug, one message, whatever wrapped it on the way out
        return Outcome("optimizer-error", *optimizer_error(exc))
    if not isinstance(optimized, onnx.ModelProto):
        message = f"optimizer returned {type(optimized).__name__}, not ModelProto"
        return Outcome("optimizer-error", message, {"message": message})
    return judge(context, optimized, comparators, settings, on_phase)
