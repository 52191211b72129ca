"""Shape arithmetic folded to constants: Shape, Shape→Gather, Shape→Slice, Concat→Reshape."""

from __future__ import annotations

import numpy as np

from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder


def _shaped_input(b: GraphBuilder, rank: int, dynamic_axis: int | None) -> tuple[str, list[int]]:
    shape = b.dims(rank, 2, 5)
    symbolic = {dynamic_axis: "N"} if dynamic_axis is not None else None
    return b.wrap(b.input(shape, b.float_dtype(), symbolic=symbolic)), shape


def _use_shape(b: GraphBuilder, x: str, dims: str) -> None:
    """Consume an int64 shape fragment: scale x by the sum of its entries, as a float."""
    total = b.op("ReduceSum", [dims], keepdims=1)
    scale = b.op("Cast", [total], to=1)
    flat = b.op("Cast", [x], to=1)
    b.output(b.wrap(b.op("Mul", [flat, b.op("Reciprocal", [scale])])))


@register("eliminate_shape_op", opsets=(13, 21))
def shape_op(b: GraphBuilder, near: bool) -> None:
    """Shape of a statically shaped value (opset ≥ 15 with random start/end); near-miss: the
    selected range holds a dynamic dimension."""
    rank = int(b.rng.integers(1, 4))
    x, _ = _shaped_input(b, rank, int(b.rng.integers(rank)) if near else None)
    attrs = {}
    if b.opset >= 15 and b.chance() and not near:
        start = int(b.rng.integers(-rank, rank))
        attrs = {"start": start}
    _use_shape(b, x, b.op("Shape", [x], **attrs))


@register("eliminate_shape_gather", opsets=(13, 21))
def shape_gather(b: GraphBuilder, near: bool) -> None:
    """Gather of one constant index (scalar or [1], negative too) from Shape of a statically shaped
    axis; near-miss: the gathered axis is dynamic."""
    rank = int(b.rng.integers(2, 4))
    axis = int(b.rng.integers(rank))
    x, _ = _shaped_input(b, rank, axis if near else None)
    index = axis - rank if b.chance() else axis
    indices = np.array(index, np.int64) if b.chance() else np.array([index], np.int64)
    dims = b.op("Gather", [b.op("Shape", [x]), b.const(indices, "index")], axis=0)
    if indices.ndim == 0:
        dims = b.op("Unsqueeze", [dims, b.const(np.array([0], np.int64), "axes")])
    _use_shape(b, x, dims)


@register("eliminate_slice_after_shape", opsets=(13, 21))
def slice_after_shape(b: GraphBuilder, near: bool) -> None:
    """Slice with constant start/end (and step) of Shape of a static value; near-miss: a dynamic
    dimension inside the sliced range."""
    rank = int(b.rng.integers(2, 5))
    start = int(b.rng.integers(0, rank - 1))
    end = int(b.rng.integers(start + 1, rank + 1))
    x, _ = _shaped_input(b, rank, start if near else None)
    bounds = [b.const(np.array([start - rank if b.chance() else start], np.int64), "start"),
              b.const(np.array([end], np.int64), "end")]
    if b.chance():
        bounds += [b.const(np.array([0], np.int64), "axes"),
                   b.const(np.array([int(b.choice([1, 2]))], np.int64), "step")]
    _use_shape(b, x, b.op("Slice", [b.op("Shape", [x]), *bounds]))


@register("fuse_concat_into_reshape", opsets=(13, 21))
def concat_into_reshape(b: GraphBuilder, near: bool) -> None:
    """Reshape whose shape is a Concat of constant pieces (int64, or int32 through a Cast) and at
    most one unknown one-element piece; near-miss: an unknown two-element piece."""
    shape = b.dims(int(b.rng.integers(2, 4)), 2, 4)
    x = b.wrap(b.input(shape, b.float_dtype()))
    total = int(np.prod(shape))
    target = [total // shape[-1], shape[-1]] if b.chance() else [shape[0], total // shape[0]]
    cast = b.chance(0.3)
    dtype = np.int32 if cast else np.int64
    pieces = [b.const(np.array([d], dtype), "dim") for d in target]
    if near:
        # a two-element piece that is only known at run time: the pass needs constants
        pieces = [b.op("Shape", [b.input(target, np.float32)])]
        cast = False
    elif not cast and b.chance():
        # ONNX shape inference cannot see through a Cast of shape data, so the output's shape
        # (required by the checker) is only known on the int64 path
        unknown = b.op("Gather", [b.op("Shape", [x]), b.const(np.array([0], np.int64), "i")],
                       axis=0)
        target = [shape[0], total // shape[0]]
        pieces = [unknown, b.const(np.array(target[1:], dtype), "dim")]
    joined = b.op("Concat", pieces, axis=0)
    if cast:
        joined = b.op("Cast", [joined], to=7)
    reshaped = b.op("Reshape", [x, joined])
    if cast:
        b.annotate(reshaped, b.inputs[0].dtype, target)
    b.output(b.wrap(reshaped))
