"""onnxslim's fusion and elimination patterns (`onnxslim.core.pattern`) by the names
`--skip_fusion_patterns` takes, and its dead-node stage. Shapes are declared: slim's patterns
read them and its single patterns run without its shape inference. A pattern skips a match whose
intermediate is a graph output, so each sits inside the graph."""

from __future__ import annotations

import numpy as np

from ditox_ci.fuzz import fusions, rewrites
from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder, tensor_type

SLIM = ("onnxslim",)


def _i(b: GraphBuilder, value: int | list[int]) -> str:
    return b.const(np.array(value, np.int64), "i")


def _x(b: GraphBuilder, shape: list[int]) -> str:
    return b.wrap(b.input(shape, np.float32))


@register("EliminationConcat", optimizers=SLIM)
def nested_concat(b: GraphBuilder, near: bool) -> None:
    """Concat(Concat(a, b), c) on one axis: one Concat; near-miss: the inner one joins another axis."""
    rows, cols = b.dims(2, 2, 4)
    inner = b.op("Concat", [_x(b, [rows, cols]), _x(b, [rows, cols])], axis=1 if near else 0)
    third = _x(b, [rows, 2 * cols] if near else [rows, cols])
    b.output(b.wrap(b.op("Concat", [inner, third], axis=0)))


@register("EliminationReshape", optimizers=SLIM)
def nested_reshape(b: GraphBuilder, near: bool) -> None:
    """Reshape(Reshape(x, s1), s2): one Reshape; near-miss: s2 copies a dim of s1 with a 0."""
    a, c, d = b.dims(3, 2, 4)
    inner = b.op("Reshape", [_x(b, [a, c, d]), _i(b, [a * c, d])])
    b.output(b.wrap(b.op("Reshape", [inner, _i(b, [0, d] if near else [d, a * c])])))


@register("EliminationReshapeAs", optimizers=SLIM)
def reshape_as(b: GraphBuilder, near: bool) -> None:
    """Reshape(z, Concat(Unsqueeze(Gather(Shape(x), i)) for each i in order)): Reshape(z, x's static
    shape); near-miss: the dims gathered in another order."""
    rows, cols = b.dims(2, 2, 4)
    x = _x(b, [rows, cols])
    shape = b.op("Shape", [x])
    order = [1, 0] if near else [0, 1]
    parts = [
        b.op("Unsqueeze", [b.op("Gather", [shape, b.const(np.array(i, np.int64), "i")], axis=0), _i(b, [0])])
        for i in order
    ]
    b.output(b.wrap(b.op("Reshape", [_x(b, [rows * cols]), b.op("Concat", parts, axis=0)])))


@register("EliminationSlice", optimizers=SLIM)
def nested_slice(b: GraphBuilder, near: bool) -> None:
    """Slice(Slice(x) on axis 0) on axis 1: one Slice over both axes; near-miss: both on axis 0."""
    rows, cols = int(b.rng.integers(4, 7)), int(b.rng.integers(4, 7))
    inner = b.op("Slice", [_x(b, [rows, cols]), _i(b, [1]), _i(b, [3]), _i(b, [0]), _i(b, [1])])
    axis = 0 if near else 1
    b.output(
        b.wrap(
            b.op(
                "Slice",
                [inner, _i(b, [0 if near else 2]), _i(b, [1 if near else 4]), _i(b, [axis]), _i(b, [1])],
            )
        )
    )


@register("EliminationTranspose", optimizers=SLIM)
def nested_transpose(b: GraphBuilder, near: bool) -> None:
    """Transpose(Transpose(x)): one Transpose; near-miss: the first result is read elsewhere too."""
    inner = b.op("Transpose", [_x(b, b.dims(3, 2, 4))], perm=[1, 0, 2])
    b.output(b.wrap(b.op("Transpose", [inner], perm=[0, 2, 1])))
    if near:
        b.output(b.op("Neg", [inner]))


@register("EliminationTransposeViewTranspose", optimizers=SLIM)
def transpose_unsqueeze_transpose(b: GraphBuilder, near: bool) -> None:
    """Transpose → Unsqueeze → Transpose: the Unsqueeze first and one Transpose; near-miss: a dynamic
    dim (the pattern needs static shapes)."""
    rows, cols = b.dims(2, 2, 4)
    x = b.op("Tanh", [b.input([rows, cols], np.float32, symbolic={0: "n"} if near else None)])
    moved = b.op("Unsqueeze", [b.op("Transpose", [x], perm=[1, 0]), _i(b, [0])])
    b.output(b.wrap(b.op("Transpose", [moved], perm=[0, 2, 1])))


@register("EliminationUnsqueeze", optimizers=SLIM)
def nested_unsqueeze(b: GraphBuilder, near: bool) -> None:
    """Unsqueeze(Unsqueeze(x, [a]), [b]): one Unsqueeze; near-miss: the first result is read elsewhere
    too."""
    inner = b.op("Unsqueeze", [_x(b, b.dims(2, 2, 4)), _i(b, [0])])
    b.output(b.wrap(b.op("Unsqueeze", [inner, _i(b, [3])])))
    if near:
        b.output(b.op("Neg", [inner]))


@register("EliminationTransposeAsReshape", optimizers=SLIM)
def transpose_of_ones(b: GraphBuilder, near: bool) -> None:
    """A Transpose that only moves size-1 axes (data order unchanged) → Reshape: one Reshape;
    near-miss: the Transpose reorders two real axes."""
    a, c = b.dims(2, 2, 4)
    x = _x(b, [a, 1, c])
    moved = b.op("Transpose", [x], perm=[2, 1, 0] if near else [1, 0, 2])
    b.output(b.wrap(b.op("Reshape", [moved, _i(b, [c, a] if near else [a, c])])))


@register("FusionConcatReshape", opsets=(15, 21), optimizers=SLIM)
def concat_shape_reshape(b: GraphBuilder, near: bool) -> None:
    """Reshape(x, Concat(Shape(x)[0:1], constant)): Reshape(x, [-1, …]); near-miss: two dims of the
    Concat come from Shape (at most one can be -1)."""
    rows, cols = b.dims(2, 2, 4)
    x = _x(b, [rows, cols])
    head = b.op("Shape", [x], start=0, end=1)
    tail = b.op("Shape", [x], start=1, end=2) if near else _i(b, [cols])
    b.output(b.wrap(b.op("Reshape", [x, b.op("Concat", [head, tail], axis=0)])))


def _conv_then(b: GraphBuilder, conv: str, op: str, constant_shape: list[int]) -> None:
    channels, out_channels = 2, 3
    x = _x(b, [1, channels, 5, 5])
    weight_shape = [out_channels, channels, 3, 3] if conv == "Conv" else [channels, out_channels, 3, 3]
    result = b.op(conv, [x, b.const(b.values(weight_shape, np.float32, -0.5, 0.5), "w")])
    constant = b.const(b.values(constant_shape, np.float32, 0.5, 1.5), "k")
    b.output(b.wrap(b.op(op, [result, constant])))


@register("FusionConvAdd", optimizers=SLIM)
def conv_add(b: GraphBuilder, near: bool) -> None:
    """Conv → Add of a per-channel [C,1,1] constant: the Conv's bias; near-miss: it runs along the
    width ([1,1,1,W])."""
    _conv_then(b, "Conv", "Add", [1, 1, 1, 3] if near else [3, 1, 1])


@register("FusionConvTransposeAdd", optimizers=SLIM)
def conv_transpose_add(b: GraphBuilder, near: bool) -> None:
    """ConvTranspose → Add of a per-channel constant: its bias; near-miss: along the width."""
    _conv_then(b, "ConvTranspose", "Add", [1, 1, 1, 7] if near else [3, 1, 1])


@register("FusionConvMul", optimizers=SLIM)
def conv_mul(b: GraphBuilder, near: bool) -> None:
    """Conv → Mul by a per-channel [C,1,1] constant: scaled weights. Near-miss: a [C] constant, which
    broadcasts along the width (here as wide as C), not the channels."""
    _conv_then(b, "Conv", "Mul", [3] if near else [3, 1, 1])


@register("FusionConvTransposeMul", optimizers=SLIM)
def conv_transpose_mul(b: GraphBuilder, near: bool) -> None:
    """ConvTranspose → Mul by a per-channel constant: scaled weights; near-miss: along the width."""
    _conv_then(b, "ConvTranspose", "Mul", [7] if near else [3, 1, 1])


register("FusionConvBN", optimizers=SLIM)(fusions.bn_into_conv)
register("FusionConvTransposeBN", optimizers=SLIM)(rewrites.batch_norm_after_conv_transpose)


@register("FusionGemm", optimizers=SLIM)
def matmul_add(b: GraphBuilder, near: bool) -> None:
    """MatMul(x, constant W) → Add(bias): a Gemm; near-miss: the constant is on the left."""
    m, k, n = b.dims(3, 2, 5)
    if near:
        product = b.op("MatMul", [b.const(b.values([m, k]), "w"), _x(b, [k, n])])
    else:
        product = b.op("MatMul", [_x(b, [m, k]), b.const(b.values([k, n]), "w")])
    b.output(b.wrap(b.op("Add", [product, b.const(b.values([n]), "bias")])))


@register("FusionGemmMul", optimizers=SLIM)
def gemm_reshape_mul(b: GraphBuilder, near: bool) -> None:
    """Gemm → Reshape keeping N last → Mul by [N]: a scaled Gemm. Near-miss: the Reshape moves N off
    the last axis ([M, N] to [M·N, 1]) and the Mul broadcasts, which the fused Gemm cannot."""
    m, k, n = int(b.rng.integers(2, 4)), int(b.rng.integers(2, 5)), int(b.rng.integers(2, 4))
    product = b.op(
        "Gemm", [_x(b, [m, k]), b.const(b.values([n, k]), "w"), b.const(b.values([n]), "c")], transB=1
    )
    shaped = b.op("Reshape", [product, _i(b, [m * n, 1] if near else [1, m, n])])
    b.output(b.wrap(b.op("Mul", [shaped, b.const(b.values([n], np.float32, 0.5, 1.5), "s")])))


@register("FusionGemmAdd", optimizers=SLIM)
def gemm_reshape_add(b: GraphBuilder, near: bool) -> None:
    """Gemm without C → Reshape → Add of [N]: a Gemm with C; near-miss: the shapes are not declared
    (the pattern reads them)."""
    b.keep_value_info = not near
    m, k, n = b.dims(3, 2, 5)
    product = b.op("Gemm", [_x(b, [m, k]), b.const(b.values([k, n]), "w")])
    shaped = b.op("Reshape", [product, _i(b, [1, m, n])])
    b.output(b.wrap(b.op("Add", [shaped, b.const(b.values([n]), "bias")])))


@register("FusionPadConv", optimizers=SLIM)
def pad_conv(b: GraphBuilder, near: bool) -> None:
    """Pad (constant 0, spatial) → Conv: the Conv's pads; near-miss: reflect mode."""
    x = _x(b, [1, 2, *b.dims(2, 4, 6)])
    padded = b.op("Pad", [x, _i(b, [0, 0, 1, 1, 0, 0, 1, 1])], mode="reflect" if near else "constant")
    b.output(b.wrap(b.op("Conv", [padded, b.const(b.values([3, 2, 3, 3], np.float32, -0.5, 0.5), "w")])))


@register("FusionReduce", opsets=(13, 17), optimizers=SLIM)
def reduce_unsqueeze(b: GraphBuilder, near: bool) -> None:
    """ReduceSum(keepdims=0) → Unsqueeze of the reduced axis: ReduceSum(keepdims=1); near-miss: the
    Unsqueeze puts the axis elsewhere."""
    x = _x(b, b.dims(3, 2, 4))
    reduced = b.op("ReduceSum", [x, _i(b, [1])], keepdims=0)
    b.output(b.wrap(b.op("Unsqueeze", [reduced, _i(b, [0] if near else [1])])))


@register("dead_node_elimination", optimizers=SLIM)
def no_op_nodes(b: GraphBuilder, near: bool) -> None:
    """A Cast to the same type, an Identity, a Dropout or a zero Pad: removed; near-miss: a Cast to
    double."""
    x = _x(b, b.dims(2, 2, 4))
    if near:
        b.output(b.op("Cast", [b.op("Cast", [x], to=tensor_type(np.float64))], to=tensor_type(np.float32)))
        return
    op = b.choice(["Cast", "Identity", "Dropout", "Pad"])
    if op == "Cast":
        value = b.op("Cast", [x], to=tensor_type(np.float32))
    elif op == "Pad":
        value = b.op("Pad", [x, _i(b, [0, 0, 0, 0])])
    else:
        value = b.op(op, [x])
    b.output(b.wrap(value))
