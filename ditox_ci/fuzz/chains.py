"""Chains of the same op folded into one: Concat, Squeeze, Unsqueeze, Transpose, Slice, and a
reduction followed by the Unsqueeze that undoes its keepdims=0."""

from __future__ import annotations

import numpy as np

from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder


def _axes_op(b: GraphBuilder, op: str, value: str, axes: list[int]) -> str:
    """Squeeze/Unsqueeze take axes as an attribute before opset 13 and as an input after."""
    if b.opset >= 13:
        return b.op(op, [value, b.const(np.array(axes, np.int64), "axes")])
    return b.op(op, [value], axes=axes)


@register("fuse_consecutive_concats")
def concats(b: GraphBuilder, near: bool) -> None:
    """Concat whose inputs include another single-use Concat with the same axis attribute;
    near-miss: the inner Concat joins along another axis, spells the same axis negatively (the
    pass compares attributes literally), or is also used elsewhere."""
    rank = int(b.rng.integers(2, 4))
    shape = b.dims(rank, 2, 4)
    axis = int(b.rng.integers(rank))
    dtype = b.float_dtype()
    x = b.wrap(b.input(shape, dtype))
    y = b.wrap(b.input(shape, dtype))
    variant = b.choice(["other-axis", "negative", "shared"]) if near else "fuse"
    if variant == "other-axis":
        inner_axis = (axis + 1) % rank
        other = list(shape)
        other[inner_axis] *= 2
        inner = b.op("Concat", [x, y], axis=inner_axis)
        z = b.wrap(b.input(other, dtype))
        b.output(b.wrap(b.op("Concat", [z, inner], axis=axis)))
        return
    inner = b.op("Concat", [x, y], axis=axis - rank if variant == "negative" else axis)
    parts = [inner, b.wrap(x)] if b.chance() else [y, inner]
    b.output(b.wrap(b.op("Concat", parts, axis=axis)))
    if variant == "shared":
        b.output(b.wrap(inner))


@register("fuse_consecutive_squeezes", opsets=(11, 21))
def squeezes(b: GraphBuilder, near: bool) -> None:
    """Squeeze(Squeeze(x, a1), a2), axes positive or negative; near-miss: one Squeeze whose result
    passes through a context op before the second."""
    ones = int(b.rng.integers(2, 4))
    rest = b.dims(int(b.rng.integers(1, 3)), 2, 4)
    shape = [1] * ones + rest
    order = [int(i) for i in b.rng.permutation(len(shape))]
    shape = [shape[i] for i in order]
    one_axes = [i for i, d in enumerate(shape) if d == 1]
    first = one_axes[: int(b.rng.integers(1, ones))]
    remaining = [d for i, d in enumerate(shape) if i not in first]
    second_candidates = [i for i, d in enumerate(remaining) if d == 1]
    second = [second_candidates[0] - (len(remaining) if b.chance() else 0)]
    x = b.wrap(b.input(shape, b.float_dtype()))
    mid = _axes_op(b, "Squeeze", x, first)
    if near:
        mid = b.op("Tanh", [mid])
    b.output(b.wrap(_axes_op(b, "Squeeze", mid, second)))


@register("fuse_consecutive_unsqueezes", opsets=(11, 21))
def unsqueezes(b: GraphBuilder, near: bool) -> None:
    """Unsqueeze(Unsqueeze(x, a1), a2), axes positive or negative; near-miss: a context op in
    between."""
    rank = int(b.rng.integers(1, 4))
    x = b.wrap(b.input(b.dims(rank, 2, 4), b.float_dtype()))
    first = sorted(int(a) for a in b.rng.choice(rank + 2, size=2, replace=False))
    mid = _axes_op(b, "Unsqueeze", x, first)
    if near:
        mid = b.op("Sigmoid", [mid])
    out_rank = rank + 3
    axis = int(b.rng.integers(out_rank))
    second = [axis - out_rank if b.chance() else axis]
    b.output(b.wrap(_axes_op(b, "Unsqueeze", mid, second)))


@register("fuse_consecutive_transposes")
def transposes(b: GraphBuilder, near: bool) -> None:
    """Transpose(Transpose(x)) with random or inverse perms, the inner one sometimes also used
    elsewhere; near-miss: a context op between the two."""
    rank = int(b.rng.integers(2, 5))
    x = b.wrap(b.input(b.dims(rank, 2, 4), b.float_dtype()))
    perm1 = [int(p) for p in b.rng.permutation(rank)]
    perm2 = [int(p) for p in np.argsort(perm1)] if b.chance(0.3) else \
        [int(p) for p in b.rng.permutation(rank)]
    inner = b.op("Transpose", [x], perm=perm1)
    if b.chance(0.3):
        b.output(b.wrap(inner))
    if near:
        inner = b.op("Sin", [inner])
    b.output(b.wrap(b.op("Transpose", [inner], perm=perm2)))


@register("fuse_consecutive_slices")
def slices(b: GraphBuilder, near: bool) -> None:
    """Slice(Slice(x)) with all five inputs constant and disjoint axes; near-miss: both slice the
    same axis."""
    rank = int(b.rng.integers(2, 4))
    shape = b.dims(rank, 3, 6)
    x = b.wrap(b.input(shape, b.float_dtype()))
    axes = [int(a) for a in b.rng.permutation(rank)[:2]]
    if near:
        axes[1] = axes[0]
    value = x
    for axis in axes:
        start = int(b.rng.integers(0, min(2, shape[axis])))
        end = int(b.rng.integers(start + 1, shape[axis] + 1))
        spelled = axis - rank if b.chance() else axis
        ints = [np.array([v], np.int64) for v in (start, end, spelled, 1)]
        value = b.op("Slice", [value, *(b.const(t, "s") for t in ints)])
        shape = list(shape)
        shape[axis] = end - start
    b.output(b.wrap(value))


_REDUCTIONS = ("ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
               "ReduceProd", "ReduceSum", "ReduceSumSquare", "ReduceLogSum")


@register("fuse_consecutive_reduce_unsqueeze", opsets=(11, 21))
def reduce_unsqueeze(b: GraphBuilder, near: bool) -> None:
    """Reduce*(keepdims=0, axes) → Unsqueeze(same axes); near-miss: other axes."""
    rank = int(b.rng.integers(2, 4))
    op = b.choice(_REDUCTIONS)
    low = 0.5 if op == "ReduceLogSum" else -1.0
    x = b.input(b.dims(rank, 2, 4), b.float_dtype(), low, 1.5)
    x = b.op("Abs", [x]) if op == "ReduceLogSum" else b.wrap(x)
    axes = sorted(int(a) for a in b.rng.choice(rank, size=int(b.rng.integers(1, rank)),
                                                replace=False))
    unsqueeze_axes = [(axes[0] + 1) % rank] if near and len(axes) == 1 else axes
    if near and len(axes) > 1:
        unsqueeze_axes = axes[:-1]
    reduced = _reduce(b, op, x, axes)
    b.output(b.wrap(_axes_op(b, "Unsqueeze", reduced, unsqueeze_axes)))


def _reduce(b: GraphBuilder, op: str, x: str, axes: list[int]) -> str:
    """ReduceSum takes axes as an input from opset 13, the other reductions from opset 18."""
    input_from = 13 if op == "ReduceSum" else 18
    if b.opset >= input_from:
        return b.op(op, [x, b.const(np.array(axes, np.int64), "axes")], keepdims=0)
    return b.op(op, [x], axes=axes, keepdims=0)


@register("fuse_consecutive_squeeze_unsqueeze", opsets=(11, 21), optimizers=("onnxsim",))
def squeeze_unsqueeze(b: GraphBuilder, near: bool) -> None:
    """Unsqueeze(Squeeze(x, axes), axes): x itself (the size-1 axes put back where they were);
    near-miss: the Unsqueeze puts them elsewhere."""
    shape = b.dims(3, 2, 4)
    axis = int(b.rng.integers(3))
    shape[axis] = 1
    x = b.wrap(b.input(shape, b.float_dtype()))
    squeezed = _axes_op(b, "Squeeze", x, [axis])
    b.output(b.wrap(_axes_op(b, "Unsqueeze", squeezed, [(axis + 1) % 3 if near else axis])))
