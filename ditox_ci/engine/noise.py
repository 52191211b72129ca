"""The original's own noise: how far its float outputs move without any optimizer's rewrite.

A difference an optimized model shows is a bug only beyond what the original itself does when run
another legitimate way (ONNX Runtime with its own graph optimizations on, or ONNX's reference
implementation where ORT's optimizations are under test), and never on an output a seedless random
op draws anew each run. `prepare` measures this once per model; the tensor oracle reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ditox_ci.compare.calibration import float64_array
from ditox_ci.engine import runner
from ditox_ci.report.header import NOISE_FLOORS


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


# unary ops under which |f(a) - f(b)| <= |a - b| (1-Lipschitz), or that only move values around
NARROWING_OPS = frozenset({
    "Identity", "Relu", "Neg", "Abs", "Tanh", "Sigmoid", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
    "Flatten", "Expand", "Slice", "MaxPool",
})


def quantization_steps(model: onnx.ModelProto) -> list[float | None]:
    """Per graph output, the step of its quantized values, where the graph says it: a
    DequantizeLinear's one-element constant scale, or 1 for QuantizeLinear's integers, seen through
    ops that bring no two values further apart (NARROWING_OPS); else None.
    Two computations of a quantized value that round apart differ by one step (a QLinear kernel
    against float arithmetic and a Q, two QDQ pairs folded into one), so the tensor oracle takes a
    difference within one step for rounding."""
    fed = {value.name for value in model.graph.input}  # an initializer a caller can override is no constant
    constants = {tensor.name: tensor for tensor in model.graph.initializer if tensor.name not in fed}
    producer = {name: node for node in model.graph.node for name in node.output}
    steps: list[float | None] = []
    for output in model.graph.output:
        node = producer.get(output.name)
        # back through ops that move no two values further apart than they were
        while node is not None and _onnx_op(node) in NARROWING_OPS and node.input:
            node = producer.get(node.input[0])
        step: float | None = None
        if node is not None and _onnx_op(node) == "QuantizeLinear":
            step = 1.0
        elif node is not None and _onnx_op(node) == "DequantizeLinear":
            scale = constants.get(node.input[1]) if len(node.input) > 1 else None
            values = numpy_helper.to_array(scale) if scale is not None else None
            if values is not None and values.size == 1 and np.isfinite(values).all():
                step = abs(float(values.reshape(-1)[0]))
        steps.append(step)
    return steps


def _onnx_op(node: onnx.NodeProto) -> str:
    """The op type of an ONNX-domain node; "" for another domain's."""
    return node.op_type if node.domain in ("", "ai.onnx") else ""


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
