"""ONNX Runtime's rewrite rules (its `Level1_RuleBasedTransformer`), by the names
`disabled_optimizers` takes, as `graph_transformer_utils.cc` registers them and its own tests build
them; near-misses are the details each rule checks (an edge count, a constant's value, an operand's
side)."""

from __future__ import annotations

import numpy as np

from ditox_ci.fuzz import fusions, graphs
from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder, tensor_type

ORT = ("onnxruntime", "onnxruntime-extended")
INT64_MAX = np.iinfo(np.int64).max


def _scalar(b: GraphBuilder, value: float, dtype: type = np.float32, shaped: bool | None = None) -> str:
    """A one-element constant, of shape [] or [1] (both count as scalars to ORT)."""
    shaped = b.chance() if shaped is None else shaped
    return b.const(np.array([value] if shaped else value, dtype), "c")


@register("EliminateIdentity", optimizers=ORT)
def identity(b: GraphBuilder, near: bool) -> None:
    """Identity between two nodes, or before a graph output; near-miss: an Identity from a graph
    input straight to a graph output, which must stay (the output needs a producer)."""
    x = b.input(b.dims(int(b.rng.integers(1, 4)), 2, 4), b.float_dtype())
    if near:
        b.output(b.op("Identity", [x]))
        return
    kept = b.op("Identity", [b.wrap(x)])
    b.output(kept if b.chance() else b.wrap(kept))


@register("EliminateSlice", optimizers=ORT)
def whole_slice(b: GraphBuilder, near: bool) -> None:
    """Slice from 0 to INT64_MAX, step 1, on one or more axes; near-miss: it ends at the axis's
    size, which ORT's rule does not take for the whole axis."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    x = b.wrap(b.input(shape, b.float_dtype()))
    axes = sorted(
        int(a) for a in b.rng.choice(len(shape), size=int(b.rng.integers(1, len(shape) + 1)), replace=False)
    )
    ends = [shape[a] if near else INT64_MAX for a in axes]
    inputs = [
        x,
        b.const(np.zeros(len(axes), np.int64), "starts"),
        b.const(np.array(ends, np.int64), "ends"),
        b.const(np.array(axes, np.int64), "axes"),
    ]
    if b.chance():
        inputs.append(b.const(np.ones(len(axes), np.int64), "steps"))
    b.output(b.wrap(b.op("Slice", inputs)))


@register("UnsqueezeElimination", opsets=(11, 12), optimizers=ORT)
def unsqueeze_initializer(b: GraphBuilder, near: bool) -> None:
    """Unsqueeze (axes attribute, opset 12 and before) of an initializer, folded into a reshaped
    copy; near-miss: the unsqueezed value is computed by a node."""
    shape = b.dims(2, 2, 4)
    weight = b.const(b.values(shape), "w")
    if near:
        weight = b.op("Tanh", [weight])
    axis = int(b.rng.integers(0, 3))
    expanded = b.op("Unsqueeze", [weight], axes=[axis])
    out_shape = list(shape)
    out_shape.insert(axis, 1)
    x = b.wrap(b.input(out_shape, np.float32))
    b.output(b.wrap(b.op("Add", [x, expanded])))


@register("EliminateDropout", optimizers=ORT)
def dropout(b: GraphBuilder, near: bool) -> None:
    """Dropout (inference: the identity) with its mask unused; near-miss: the mask is an output."""
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4)), 2, 4), np.float32))
    inputs = [x, b.const(np.array(float(b.choice([0.1, 0.5])), np.float32), "ratio")] if b.chance() else [x]
    if near:
        value, mask = b.op("Dropout", inputs, outputs=2)
        b.output(b.wrap(value))
        b.output(b.op("Cast", [mask], to=tensor_type(np.float32)))
        return
    b.output(b.wrap(b.op("Dropout", inputs)))


@register("ExpandElimination", optimizers=ORT)
def expand(b: GraphBuilder, near: bool) -> None:
    """Expand to a shape whose trailing dims are 1 or the input's own (a no-op); near-miss: the
    shape has one axis more, which does change the value."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    x = b.wrap(b.input(shape, b.float_dtype()))
    kept = int(b.rng.integers(1, len(shape) + 1))
    target = [d if b.chance() else 1 for d in shape[-kept:]]
    if near:
        target = [2, *shape]
    b.output(b.wrap(b.op("Expand", [x, b.const(np.array(target, np.int64), "shape")])))


@register("CastElimination", optimizers=ORT)
def same_type_cast(b: GraphBuilder, near: bool) -> None:
    """Cast to the type its input has; near-miss: a cast to another float type."""
    dtype = b.float_dtype()
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4)), 2, 4), dtype))
    other = np.float32 if dtype == np.float64 else np.float64
    b.output(b.wrap(b.op("Cast", [x], to=tensor_type(other if near else dtype))))


@register("PreShapeNodeElimination", optimizers=ORT)
def cast_before_shape(b: GraphBuilder, near: bool) -> None:
    """A Cast read only by Shape nodes (the shape does not depend on the type); near-miss: the cast
    value is read by another node too."""
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4)), 2, 4), np.float32))
    cast = b.op("Cast", [x], to=tensor_type(np.float64))
    b.output(b.op("Shape", [cast]))
    if b.chance():
        b.output(b.op("Shape", [cast]))
    if near:
        b.output(b.wrap(cast))


@register("NoopElimination", optimizers=ORT)
def noop_arithmetic(b: GraphBuilder, near: bool) -> None:
    """x+0, 0+x, x-0, x*1, 1*x, x/1 with a one-element constant; near-miss: 0-x, or x+1."""
    dtype = b.choice([np.float32, np.float64, np.int64])
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    x = b.input(shape, dtype, -5, 5)
    x = b.wrap(x) if dtype != np.int64 else b.op("Abs", [x])
    op = b.choice(["Add", "Sub", "Mul", "Div"])
    unit = 0 if op in ("Add", "Sub") else 1
    if near:
        op, unit = b.choice([("Sub", 0), ("Add", 1)])
        inputs = [_scalar(b, unit, dtype), x] if op == "Sub" else [x, _scalar(b, unit, dtype)]
    else:
        constant = _scalar(b, unit, dtype)
        inputs = [constant, x] if op in ("Add", "Mul") and b.chance() else [x, constant]
    b.output(b.op("Neg", [b.op(op, inputs)]))


@register("DivMulFusion", optimizers=ORT)
def div_mul(b: GraphBuilder, near: bool) -> None:
    """Mul(Div(1, x), z) becomes Div(z, x); near-miss: the numerator is 2, or the Div result is
    read elsewhere too."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    x = b.op("Add", [b.op("Abs", [b.input(shape, np.float32)]), b.const(np.array(0.5, np.float32))])
    z = b.wrap(b.input(shape, np.float32))
    variant = b.choice(["numerator", "shared"]) if near else "fuse"
    quotient = b.op("Div", [_scalar(b, 2.0 if variant == "numerator" else 1.0), x])
    b.output(b.wrap(b.op("Mul", [quotient, z] if b.chance() else [z, quotient])))
    if variant == "shared":
        b.output(b.wrap(quotient))


@register("FuseReluClip", opsets=(12, 21), optimizers=ORT)
def relu_clip(b: GraphBuilder, near: bool) -> None:
    """Relu → Clip(min constant or absent, max): the Relu goes and min becomes 0; near-miss: the
    Clip's min is a graph input."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    relu = b.op("Relu", [b.wrap(b.input(shape, np.float32, -3, 3))])
    low = (
        b.input([], np.float32, -1, 1)
        if near
        else b.const(np.array(b.choice([-1.0, 0.5]), np.float32), "min")
    )
    high = b.const(np.array(b.choice([1.0, 6.0]), np.float32), "max")
    b.output(b.wrap(b.op("Clip", [relu, low, high])))


@register("GemmSumFusion", optimizers=ORT)
def gemm_sum(b: GraphBuilder, near: bool) -> None:
    """Gemm without C → Sum of it and one more value ([N], [1,N], [M,1] or [M,N]): the value
    becomes C; near-miss: the Gemm has a C already."""
    m, k, n = b.dims(3, 2, 5)
    a = b.wrap(b.input([m, k], np.float32))
    inputs = [a, b.const(b.values([k, n]), "w")]
    if near:
        inputs.append(b.const(b.values([n]), "c"))
    product = b.op("Gemm", inputs, alpha=float(b.choice([1.0, 0.5])))
    other = b.input(b.choice([[n], [1, n], [m, 1], [m, n]]), np.float32)
    b.output(b.wrap(b.op("Sum", [product, other])))


@register("GemmTransposeFusion", optimizers=ORT)
def gemm_transpose(b: GraphBuilder, near: bool) -> None:
    """Transpose (perm 1,0) → Gemm's A or B, or Gemm without C → Transpose: folded into transA,
    transB or swapped operands; near-miss: the transposed value is also read by another node."""
    m, k, n = b.dims(3, 2, 5)
    if b.chance():
        a = b.wrap(b.input([k, m], np.float32))
        transposed = b.op("Transpose", [a], perm=[1, 0])
        b.output(b.wrap(b.op("Gemm", [transposed, b.const(b.values([k, n]), "w")])))
        if near:
            b.output(b.op("Neg", [transposed]))
        return
    a = b.wrap(b.input([m, k], np.float32))
    product = b.op("Gemm", [a, b.const(b.values([k, n]), "w")])
    b.output(b.wrap(b.op("Transpose", [product], perm=[1, 0])))
    if near:
        b.output(b.op("Neg", [product]))


register("NotWhereFusion", optimizers=ORT)(graphs.rewrite_where)


def _conv_then(b: GraphBuilder, op: str, near: bool) -> None:
    """Conv (constant weights) → Add/Mul of a per-channel constant ([C,1,1] or [1,C,1,1]); the
    near-miss puts the constant on the left, where ORT's rules do not look."""
    channels, out_channels = b.dims(2, 1, 3)
    x = b.wrap(b.input([1, channels, *b.dims(2, 4, 6)], np.float32))
    inputs = [x, b.const(b.values([out_channels, channels, 3, 3], np.float32, -0.5, 0.5), "w")]
    if b.chance():
        inputs.append(b.const(b.values([out_channels]), "bias"))
    conv = b.op("Conv", inputs, pads=[1, 1, 1, 1])
    constant = b.const(
        b.values(b.choice([[out_channels, 1, 1], [1, out_channels, 1, 1]]), np.float32, 0.5, 1.5), "k"
    )
    b.output(b.wrap(b.op(op, [constant, conv] if near else [conv, constant])))


@register("ConvAddFusion", optimizers=ORT)
def conv_add(b: GraphBuilder, near: bool) -> None:
    """Conv → Add(conv, per-channel constant): the constant joins the bias."""
    _conv_then(b, "Add", near)


@register("ConvMulFusion", optimizers=ORT)
def conv_mul(b: GraphBuilder, near: bool) -> None:
    """Conv → Mul(conv, per-channel constant): the constant scales weights and bias."""
    _conv_then(b, "Mul", near)


register("ConvBNFusion", optimizers=ORT)(fusions.bn_into_conv)


@register("Pad_Fusion", optimizers=ORT)
def pad_fusion(b: GraphBuilder, near: bool) -> None:
    """Pad (constant mode, value 0, spatial axes) → Conv or AveragePool: the pads move into the
    child (an AveragePool then counts them); near-miss: reflect mode, a pad value of 1, or a
    MaxPool child, whose own padding is -inf."""
    channels = int(b.rng.integers(1, 4))
    x = b.wrap(b.input([1, channels, *b.dims(2, 4, 6)], np.float32))
    variant = b.choice(["reflect", "value", "maxpool"]) if near else b.choice(["conv", "avgpool"])
    pads = np.zeros(8, np.int64)
    # a pool's padding must be smaller than its window (2), or the fused pool would be invalid
    pads[[2, 3, 6, 7]] = b.rng.integers(0, 3 if variant == "conv" else 2, size=4)
    pads[2] = max(pads[2], 1)
    inputs = [x, b.const(pads, "pads")]
    if variant == "value":
        inputs.append(b.const(np.array(1.0, np.float32), "value"))
    padded = b.op("Pad", inputs, mode="reflect" if variant == "reflect" else "constant")
    if variant in ("conv", "reflect", "value"):
        weight = b.const(b.values([int(b.rng.integers(1, 4)), channels, 3, 3], np.float32, -0.5, 0.5), "w")
        child = b.op("Conv", [padded, weight])
    else:
        child = b.op("MaxPool" if variant == "maxpool" else "AveragePool", [padded], kernel_shape=[2, 2])
    b.output(b.wrap(child))


@register("MatMul_BatchNormalization_Fusion", optimizers=ORT)
def matmul_batch_norm(b: GraphBuilder, near: bool) -> None:
    """MatMul(x, constant 2-D B) → BatchNormalization with constant parameters: one Gemm; near-miss:
    B is a graph input."""
    m, k, n = b.dims(3, 2, 5)
    x = b.wrap(b.input([m, k], np.float32))
    weight = b.input([k, n], np.float32) if near else b.const(b.values([k, n]), "w")
    product = b.op("MatMul", [x, weight])
    params = [
        b.const(b.values([n], np.float32, lo, hi), name)
        for name, lo, hi in (("scale", 0.5, 1.5), ("bias", -1, 1), ("mean", -1, 1), ("var", 0.5, 2))
    ]
    b.output(b.wrap(b.op("BatchNormalization", [product, *params], epsilon=float(b.choice([1e-5, 1e-3])))))


@register("LabelEncoderFusion", opsets=(13, 21), optimizers=ORT)
def label_encoders(b: GraphBuilder, near: bool) -> None:
    """Two ai.onnx.ml LabelEncoders (opset 4) mapping int64 → int64 → int64 (each with its own default
    for keys it does not know, and keys each once): one encoder; near-miss: the middle type is
    float, which ORT's fusion does not take."""
    keys = [int(k) for k in b.rng.choice(10, size=int(b.rng.integers(2, 6)), replace=False)]
    middle = [int(v) for v in b.rng.integers(0, 10, size=len(keys))]
    known = sorted(set(middle))
    x = b.input(b.dims(int(b.rng.integers(1, 3)), 2, 4), np.int64, 0, 9)
    ml = "ai.onnx.ml"
    if near:
        first = b.op(
            "LabelEncoder",
            [x],
            domain=ml,
            keys_int64s=keys,
            values_floats=[float(v) for v in middle],
            default_float=-1.0,
        )
        second = b.op(
            "LabelEncoder",
            [first],
            domain=ml,
            keys_floats=[float(v) for v in known],
            values_int64s=list(range(len(known))),
            default_int64=-1,
        )
    else:
        first = b.op("LabelEncoder", [x], domain=ml, keys_int64s=keys, values_int64s=middle, default_int64=-1)
        second = b.op(
            "LabelEncoder",
            [first],
            domain=ml,
            keys_int64s=known,
            values_int64s=list(range(len(known))),
            default_int64=-2,
        )
    b.output(b.op("Neg", [second]))
