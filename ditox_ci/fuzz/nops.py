"""No-op eliminations: ops that, with these inputs or attributes, return their input unchanged."""

from __future__ import annotations

import numpy as np

from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder, tensor_type


@register("eliminate_nop_cast")
def nop_cast(b: GraphBuilder, near: bool) -> None:
    """Cast to the type the value already has; near-miss: a real float/double conversion."""
    dtype = b.float_dtype()
    x = b.around(b.wrap(b.input(b.dims(int(b.rng.integers(1, 4))), dtype)))
    target = (np.float64 if dtype == np.float32 else np.float32) if near else dtype
    b.output(b.wrap(b.op("Cast", [x], to=tensor_type(target))))


@register("eliminate_nop_dropout", opsets=(10, 11))
def nop_dropout(b: GraphBuilder, near: bool) -> None:
    """Dropout with ratio attribute 0 (opset < 12); near-miss: a non-zero ratio."""
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4))), b.float_dtype()))
    ratio = float(b.choice([0.1, 0.25, 0.5])) if near else 0.0
    b.output(b.wrap(b.op("Dropout", [x], ratio=ratio)))


@register("eliminate_nop_flatten")
def nop_flatten(b: GraphBuilder, near: bool) -> None:
    """Flatten of a rank-2 value on axis 1/-1 (or axis 0 with leading dim 1); near-miss: rank 3."""
    if near:
        shape, axis = b.dims(3, 2, 4), int(b.choice([1, 2, -1]))
    elif b.chance(0.3):
        shape, axis = [1, *b.dims(1, 2, 5)], 0
    else:
        shape, axis = b.dims(2, 2, 5), int(b.choice([1, -1]))
    x = b.wrap(b.input(shape, b.float_dtype()))
    b.output(b.wrap(b.op("Flatten", [x], axis=axis)))


@register("eliminate_nop_pad", opsets=(11, 21))
def nop_pad(b: GraphBuilder, near: bool) -> None:
    """Pad by zero on every side, any mode; near-miss: one non-zero pad."""
    rank = int(b.rng.integers(1, 4))
    shape = b.dims(rank, 2, 4)
    pads = np.zeros(2 * rank, dtype=np.int64)
    if near:
        pads[int(b.rng.integers(2 * rank))] = 1
    x = b.wrap(b.input(shape, b.float_dtype()))
    mode = b.choice(["constant", "reflect", "edge"])
    b.output(b.wrap(b.op("Pad", [x, b.const(pads, "pads")], mode=mode)))


@register("eliminate_nop_concat")
def nop_concat(b: GraphBuilder, near: bool) -> None:
    """Concat of a single input; near-miss: the same value twice."""
    rank = int(b.rng.integers(1, 4))
    x = b.wrap(b.input(b.dims(rank), b.float_dtype()))
    axis = int(b.rng.integers(-rank, rank))
    b.output(b.wrap(b.op("Concat", [x, x] if near else [x], axis=axis)))


@register("eliminate_nop_split")
def nop_split(b: GraphBuilder, near: bool) -> None:
    """Split into one output (split sizes absent or the whole axis); near-miss: two outputs."""
    rank = int(b.rng.integers(1, 4))
    shape = b.dims(rank, 2, 5)
    axis = int(b.rng.integers(-rank, rank))
    x = b.wrap(b.input(shape, b.float_dtype()))
    parts = [1, shape[axis] - 1] if near else [shape[axis]]
    if b.opset >= 18 and b.chance():
        outs = b.op("Split", [x], outputs=len(parts), axis=axis, num_outputs=len(parts))
        if near:
            parts = [(shape[axis] + 1) // 2, shape[axis] // 2]
    else:
        outs = b.op("Split", [x, b.const(np.array(parts, np.int64), "split")],
                    outputs=len(parts), axis=axis)
    for out in outs if near else [outs]:
        b.output(b.wrap(out))


@register("eliminate_nop_expand")
def nop_expand(b: GraphBuilder, near: bool) -> None:
    """Expand to a shape the input already covers (ones, or a suffix of its dims); near-miss: a
    shape that grows one axis."""
    rank = int(b.rng.integers(1, 4))
    shape = b.dims(rank, 2, 4)
    target = [1 if b.chance() else d for d in shape[int(b.rng.integers(rank)) :]] or [1]
    if near:
        shape[0], target = 1, [3, *shape[1:]]
    x = b.wrap(b.input(shape, b.float_dtype()))
    b.output(b.wrap(b.op("Expand", [x, b.const(np.array(target, np.int64), "shape")])))


@register("eliminate_nop_transpose")
def nop_transpose(b: GraphBuilder, near: bool) -> None:
    """Transpose with the identity permutation; near-miss: any other permutation."""
    rank = int(b.rng.integers(2, 5))
    perm = list(range(rank))
    if near:
        i = int(b.rng.integers(rank - 1))
        perm[i], perm[i + 1] = perm[i + 1], perm[i]
    x = b.wrap(b.input(b.dims(rank), b.float_dtype()))
    b.output(b.wrap(b.op("Transpose", [x], perm=perm)))


@register("eliminate_nop_reshape", opsets=(14, 21))
def nop_reshape(b: GraphBuilder, near: bool) -> None:
    """Reshape to the same shape, spelled with 0 (copy) and at most one -1; near-miss: allowzero
    with a 0, or a genuinely different shape."""
    rank = int(b.rng.integers(2, 5))
    shape = b.dims(rank, 2, 4)
    target: list[int] = list(shape)
    for i in range(rank):
        if b.chance(0.3):
            target[i] = 0
    if b.chance():
        target[int(b.rng.integers(rank))] = -1
    if near:
        target = [shape[0] * shape[1], *shape[2:]]
    x = b.wrap(b.input(shape, b.float_dtype()))
    # allowzero=1 turns a 0 into a literal empty axis, so it is only spelled out without zeros
    attrs = {"allowzero": 0 if 0 in target else int(b.choice([0, 1]))} if b.chance() else {}
    b.output(b.wrap(b.op("Reshape", [x, b.const(np.array(target, np.int64), "shape")], **attrs)))


@register("eliminate_identity")
def identity(b: GraphBuilder, near: bool) -> None:
    """Identity ops inside the graph; near-miss: an Identity joining a graph input straight to a
    graph output, which cannot be removed without renaming the interface."""
    x = b.input(b.dims(int(b.rng.integers(1, 4))), b.float_dtype())
    if near:
        b.output(b.op("Identity", [x]))
        return
    value = b.wrap(x)
    for _ in range(int(b.rng.integers(1, 3))):
        value = b.around(b.op("Identity", [value]), most=1)
    b.output(b.wrap(value))


_UNITS = {"Add": 0, "Sub": 0, "Mul": 1, "Div": 1, "Pow": 1}


@register("eliminate_nop_with_unit")
def nop_with_unit(b: GraphBuilder, near: bool) -> None:
    """x+0, x-0, x*1, x/1, x**1, x AND true, x OR false (constant broadcasting into x, either side
    where commutative), and Concat with an empty tensor; near-miss: 0-x, 1/x, or a unit constant
    whose shape would broadcast x to something bigger."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    kind = b.choice(["arith", "arith", "logic", "concat"])
    if kind == "concat":
        x = b.wrap(b.input(shape, np.float32))
        empty = np.zeros([*shape[:-1], 0 if not near else 1], np.float32)
        b.output(b.wrap(b.op("Concat", [x, b.const(empty, "empty")], axis=-1)))
        return
    if kind == "logic":
        x = b.input(shape, np.float32)
        mask = b.op("Greater", [b.wrap(x), b.const(np.zeros([1], np.float32), "zero")])
        op = b.choice(["And", "Or"])
        mask_unit = np.full(shape if not near else [2, *shape], op == "And", np.bool_)
        result = b.op(op, [mask, b.const(mask_unit, "unit")])
        b.output(b.op("Where", [result, b.wrap(x), b.const(np.zeros([1], np.float32), "z")]))
        return
    op = b.choice(list(_UNITS))
    dtype = b.float_dtype()
    x = b.wrap(b.input(shape, dtype, 0.5, 1.5))
    const_shape = shape[int(b.rng.integers(len(shape) + 1)) :]
    unit_on_left = op in ("Add", "Mul") and b.chance()
    if near:
        if op in ("Sub", "Div", "Pow") and b.chance():
            unit_on_left = True
        else:
            const_shape = [2, *shape]
    unit = b.const(np.full(const_shape, _UNITS[op], dtype), "unit")
    y = b.op(op, [unit, x] if unit_on_left else [x, unit])
    b.output(b.wrap(y))


_IDEMPOTENT = ("Ceil", "Floor", "Round", "Relu", "Sign", "Reshape")


@register("eliminate_consecutive_idempotent_ops", opsets=(14, 21))
def idempotent(b: GraphBuilder, near: bool) -> None:
    """op(op(x)) for Ceil, Floor, Round, Relu, Sign and Reshape; near-miss: the inner result is
    also used elsewhere (the pass needs a single use), or two different ops."""
    shape = b.dims(int(b.rng.integers(2, 4)), 2, 4)
    x = b.wrap(b.input(shape, b.float_dtype(), -3.0, 3.0))
    op = b.choice(_IDEMPOTENT)
    second = b.choice([o for o in _IDEMPOTENT if o not in (op, "Reshape")]) if near else op

    def apply(kind: str, value: str) -> str:
        if kind == "Reshape":
            target = [int(np.prod(shape))] if b.chance() else [-1, shape[-1]]
            return b.op("Reshape", [value, b.const(np.array(target, np.int64), "shape")])
        return b.op(kind, [value])

    inner = apply(op, x)
    if near and b.chance():
        b.output(b.wrap(apply(op, inner)))
        b.output(b.wrap(inner))
        return
    b.output(b.wrap(apply(second, inner)))


@register("eliminate_nop_monotone_argmax")
def monotone_argmax(b: GraphBuilder, near: bool) -> None:
    """ArgMax after Log/Exp/Sqrt, or after Softmax/LogSoftmax on the same axis; near-miss: a
    softmax over another axis, or the monotone result also used elsewhere."""
    rank = int(b.rng.integers(2, 4))
    shape = b.dims(rank, 2, 5)
    dtype = b.float_dtype()
    x = b.wrap(b.input(shape, dtype))
    # Log and Sqrt need positive input: |x| + 0.5
    positive = b.op("Add", [b.op("Abs", [x]), b.const(np.array([0.5], dtype), "eps")])
    axis = int(b.rng.integers(-rank, rank))
    op = b.choice(["Log", "Exp", "Sqrt", "Softmax", "LogSoftmax"])
    softmax_axis = axis
    if near and op in ("Softmax", "LogSoftmax"):
        softmax_axis = (axis + 1) % rank
    mono = b.op(op, [positive], axis=softmax_axis) if "Softmax" in op else b.op(op, [positive])
    keepdims = int(b.choice([0, 1]))
    b.output(b.op("ArgMax", [mono], axis=axis, keepdims=keepdims))
    if near and "Softmax" not in op:
        b.output(b.wrap(mono))
