"""Whole-graph stages that every optimizer has under a name of its own: constant folding, shape
inference, common subexpressions, dead nodes, duplicate constants. One pattern serves each name
(`register` stacked), since the work is the same whoever does it."""

from __future__ import annotations

import numpy as np

from ditox_ci.fuzz import graphs
from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder

SCRIPT = ("onnxscript",)
IR = ("onnx-ir",)
IR_AND_SCRIPT = ("onnx-ir", "onnxscript")


@register("ConstantFolding", optimizers=("onnxruntime", "onnxruntime-extended"))
@register("constant_folding", optimizers=("onnxsim", "onnxslim"))
@register("fold_constants", optimizers=SCRIPT)
def constant_subgraph(b: GraphBuilder, near: bool) -> None:
    """Nodes computed from initializers alone (an Add, a Transpose, a Shape of a static shape):
    folded into an initializer; near-miss: the node also reads a graph input."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    dtype = b.float_dtype()
    x = b.wrap(b.input(shape, dtype))
    left = b.const(b.values(shape, dtype), "c")
    other = b.wrap(b.input(shape, dtype)) if near else b.const(b.values(shape, dtype), "c")
    folded = b.op(b.choice(["Add", "Mul", "Sub"]), [left, other])
    if not near and b.chance(0.3) and len(shape) > 1:
        folded = b.op("Transpose", [b.op("Transpose", [folded])])
    b.output(b.wrap(b.op("Mul", [x, folded])))


@register("shape_inference", near_misses=False, optimizers=("onnxsim", "onnxslim", "onnx-ir"))
def untyped_intermediates(b: GraphBuilder, near: bool) -> None:
    """A model that declares no intermediate shapes: the stage writes them (onnxslim's writes the
    outputs' on every model, so there is no near-miss)."""
    b.keep_value_info = False
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4)), 2, 4), b.float_dtype()))
    b.output(b.wrap(b.op(b.choice(["Relu", "Neg", "Abs"]), [x])))


register("CommonSubexpressionElimination", optimizers=("onnxruntime", "onnxruntime-extended"))(
    graphs.common_subexpression
)
register("common_subexpression_elimination", optimizers=IR_AND_SCRIPT)(graphs.common_subexpression)
register("subexpression_elimination", optimizers=("onnxslim",))(graphs.common_subexpression)
register("remove_unused_nodes", optimizers=IR_AND_SCRIPT)(graphs.deadend)
register("remove_unused_nodes_final", optimizers=SCRIPT)(graphs.deadend)


@register("deduplicate_initializers", optimizers=IR_AND_SCRIPT)
@register("deduplicate_hashed_initializers", optimizers=IR)
@register("weight_tying", optimizers=("onnxslim",))
def duplicate_constants(b: GraphBuilder, near: bool) -> None:
    """Two initializers of one dtype, shape and value, read by two nodes: one stays; near-miss: the
    same values in another dtype."""
    shape = b.dims(int(b.rng.integers(1, 3)), 2, 4)
    dtype = np.float32
    x = b.wrap(b.input(shape, dtype))
    data = b.values(shape, dtype)
    first = b.op("Add", [x, b.const(data, "w")])
    twin = b.const(data.astype(np.float64) if near else data.copy(), "w")
    second = (
        b.op("Cast", [b.op("Mul", [b.op("Cast", [x], to=11), twin])], to=1)
        if near
        else b.op("Mul", [x, twin])
    )
    b.output(b.wrap(first))
    b.output(b.wrap(second))


@register("ConstantSharing", optimizers=("onnxruntime", "onnxruntime-extended"))
def shared_scalars(b: GraphBuilder, near: bool) -> None:
    """One-element initializers of equal type and value ([] or [1]): ORT shares one; near-miss: the
    second has another value."""
    dtype = b.choice([np.float32, np.float64, np.int64])
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    x = b.input(shape, dtype, -3, 3)
    x = b.op("Abs", [x]) if dtype == np.int64 else b.wrap(x)
    rank = [] if b.chance() else [1]
    value = 2
    first = b.op("Mul", [x, b.const(np.full(rank, value, dtype), "k")])
    second = b.op("Add", [first, b.const(np.full(rank, value + (1 if near else 0), dtype), "k")])
    b.output(b.op("Neg", [second]))
