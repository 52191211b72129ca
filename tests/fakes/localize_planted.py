"""Planted faulty optimizers with known culprits, and generated models for them.

Each `optimize`-shaped function runs the real onnxoptimizer and then corrupts the result only under
a known condition, so localization and reduction tests know the true answer. The module is also
imported by the bundles' `repro.py` (via PYTHONPATH) as `localize_planted:<function>`.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxoptimizer
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.compare.tensor import Tolerances
from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import write_recorded_inputs
from ditox_ci.engine.evaluate import EvalSettings, prepare, run_step
from ditox_ci.engine.original import EXACT_SAMPLES
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.optimizers import load_optimizer

SINGLE_CULPRIT = "eliminate_identity"
PAIR_CULPRITS = ("eliminate_nop_transpose", "fuse_consecutive_transposes")
ABORT_CULPRIT = "fuse_bn_into_conv"

# they wrap onnxoptimizer, so they declare its pass lists (without them they would be opaque)
get_available_passes = onnxoptimizer.get_available_passes
get_fuse_and_elimination_passes = onnxoptimizer.get_fuse_and_elimination_passes


def _flip_add_after_mul(model: onnx.ModelProto) -> onnx.ModelProto:
    """The planted bug: an Add fed by a Mul (a fusion pattern) silently becomes a Sub."""
    producers = {name: node.op_type for node in model.graph.node for name in node.output}
    for node in model.graph.node:
        if node.op_type == "Add" and producers.get(node.input[0]) == "Mul":
            node.op_type = "Sub"
    return model


def single_pass_fault(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    optimized = onnxoptimizer.optimize(model, list(passes), fixed_point)
    return _flip_add_after_mul(optimized) if SINGLE_CULPRIT in passes else optimized


def pair_fault(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    optimized = onnxoptimizer.optimize(model, list(passes), fixed_point)
    first, second = PAIR_CULPRITS
    in_order = first in passes and second in passes and passes.index(first) < passes.index(second)
    return _flip_add_after_mul(optimized) if in_order else optimized


def infrastructure_fault(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    raise RuntimeError(f"serializer lost the graph at 0x{id(model):x} with {len(passes)} passes")


def aborting_fault(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    if ABORT_CULPRIT in passes:
        os.abort()
    return onnxoptimizer.optimize(model, list(passes), fixed_point)


def hanging_fault(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    if SINGLE_CULPRIT in passes:
        time.sleep(3600)
    return onnxoptimizer.optimize(model, list(passes), fixed_point)


UNARY_OPS = ("Neg", "Abs", "Neg", "Sin", "Abs")  # Sin is rare enough not to flatten differences


def chain_model(nodes: int = 200, fault_at: int = 100, width: int = 8) -> onnx.ModelProto:
    """A ~`nodes`-node chain with side branches and exactly one Mul -> Add pattern at `fault_at`.

    Every Add elsewhere follows a unary op, so only the planted pattern triggers the fault."""
    rng = np.random.default_rng(7)
    graph_nodes: list[onnx.NodeProto] = []
    initializers: list[TensorProto] = []
    current = "x"

    def constant(name: str) -> str:
        initializers.append(numpy_helper.from_array(rng.uniform(0.3, 0.7, [width]).astype(np.float32), name))
        return name

    index = 0
    while len(graph_nodes) < nodes:
        out = f"v{index}"
        if index == fault_at:
            graph_nodes.append(helper.make_node("Mul", [current, constant(f"m{index}")], [out]))
            added = f"{out}_add"
            graph_nodes.append(helper.make_node("Add", [out, constant(f"a{index}")], [added]))
            out = added
        elif index % 7 == 3:
            graph_nodes.append(helper.make_node("Add", [current, constant(f"c{index}")], [out]))
        elif index % 11 == 5:
            graph_nodes.append(helper.make_node("Relu", [current], [f"{out}_side"]))
            graph_nodes.append(helper.make_node("Sum", [current, f"{out}_side"], [out]))
        else:
            op = UNARY_OPS[index % len(UNARY_OPS)]
            graph_nodes.append(helper.make_node(op, [current], [out]))
        current = out
        index += 1
    graph = helper.make_graph(
        graph_nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, [1, width])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def feeds(samples: int = 2, width: int = 8) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(11)
    return [{"x": rng.standard_normal([1, width]).astype(np.float32)} for _ in range(samples)]


def engine_outcome(
    model: onnx.ModelProto,
    feeds: Sequence[dict[str, np.ndarray]],
    spec: str,
    passes: Sequence[str],
    rtol: float,
    atol: float,
) -> Outcome:
    """The sweep's own oracles, in this process (these planted faults never crash): the model is
    written with exactly these feeds, prepared and judged as a worker would."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "candidate"
        write_recorded_inputs(folder, model, list(feeds))
        path, exact = str(folder / "model.onnx"), {EXACT_SAMPLES: True}
        ref = ModelRef(id="candidate", source="test", path=path, inputs_dir=str(folder), meta=exact)
        settings = EvalSettings(samples=len(feeds), tolerances=Tolerances(rtol, atol))
        context = prepare(ref, settings)
        step = Step("passes:" + ",".join(passes), tuple(passes))
        return run_step(context, load_optimizer(spec), step, settings=settings)
