"""onnxscript's rewrite rules (`onnxscript.rewriter`'s default rule set), one generator per rule
name (`rule:<name>`): the no-op arithmetic, collapsed casts, slices, reshapes and transposes,
min/max/clip/relu chains, scatters that write everything, explicit conv padding, folded batch
norms and zero biases. Its matcher binds initializers and graph inputs alike and reads only the
attributes a pattern names, so the near-misses change a value the rule's check must read."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ditox_ci.fuzz import fusions
from ditox_ci.fuzz.base import BuildFunc, register
from ditox_ci.fuzz.builder import GraphBuilder, tensor_type

SCRIPT = ("onnxscript",)
INT64_MAX = np.iinfo(np.int64).max


def _x(
    b: GraphBuilder, rank: int | None = None, dtype: type = np.float32, low: float = -1, high: float = 1
) -> str:
    return b.wrap(b.input(b.dims(rank or int(b.rng.integers(1, 4)), 2, 4), dtype, low, high))


def _f(b: GraphBuilder, value: float | list[float], dtype: type = np.float32) -> str:
    return b.const(np.array(value, dtype), "c")


def _i(b: GraphBuilder, value: int | list[int]) -> str:
    return b.const(np.array(value, np.int64), "i")


def _unit(op: str, unit: float, constant_first: bool) -> BuildFunc:
    """The pattern of x·1, 1·x, x+0, 0+x, x-0, x/1 with a rank-0 constant; near-miss: the
    constant has shape [1], or is not the unit."""

    def build(b: GraphBuilder, near: bool) -> None:
        x = _x(b)
        value = (unit + 2) if near and b.chance() else unit
        constant = b.const(np.array([value] if near and value == unit else value, np.float32), "c")
        b.output(b.wrap(b.op(op, [constant, x] if constant_first else [x, constant])))

    build.__doc__ = _unit.__doc__
    return build


for _name, _op, _value, _first in (
    ("mul", "Mul", 1.0, False),
    ("mul_2", "Mul", 1.0, True),
    ("add", "Add", 0.0, False),
    ("add_2", "Add", 0.0, True),
    ("sub_0", "Sub", 0.0, False),
    ("div_by_1", "Div", 1.0, False),
):
    register(f"rule:{_name}", optimizers=SCRIPT)(_unit(_op, _value, _first))


@register("rule:dropout_zero", opsets=(10, 10), optimizers=SCRIPT)
def dropout_zero(b: GraphBuilder, near: bool) -> None:
    """Dropout with ratio 0 (its attribute, opset 10): the identity; near-miss: ratio 0.5 and its mask
    read (a Dropout that stays)."""
    x = _x(b)
    if near:
        value, mask = b.op("Dropout", [x], outputs=2, ratio=0.5)
        b.output(b.wrap(value))
        b.output(b.op("Cast", [mask], to=tensor_type(np.float32)))
        return
    b.output(b.wrap(b.op("Dropout", [x], ratio=0.0)))


def _reshape_matmul_reshape(reshape_b: bool) -> BuildFunc:
    """Reshape(A, [M, K]) · B (itself reshaped to [K, N], or not) → Reshape back to the batched
    shape: a batched MatMul; near-miss: A's batch dim is dynamic (-1 in the shapes), which the rule
    must know to check the shapes."""

    def build(b: GraphBuilder, near: bool) -> None:
        batch, m, k, n = b.dims(4, 2, 4)
        a = b.wrap(b.input([batch, m, k], np.float32, symbolic={0: "batch"} if near else None))
        left = b.op("Reshape", [a, _i(b, [-1 if near else batch * m, k])])
        right = b.wrap(b.input([k, n], np.float32))
        if reshape_b:
            right = b.op("Reshape", [right, _i(b, [k, n])])
        product = b.op("MatMul", [left, right])
        b.output(b.wrap(b.op("Reshape", [product, _i(b, [-1 if near else batch, m, n])])))

    build.__doc__ = _reshape_matmul_reshape.__doc__
    return build


register("rule:two_reshapes_matmul_reshape", optimizers=SCRIPT)(_reshape_matmul_reshape(True))
register("rule:one_reshape_matmul_reshape", optimizers=SCRIPT)(_reshape_matmul_reshape(False))


def _cast_constant_of_shape(with_value: bool) -> BuildFunc:
    """Cast(ConstantOfShape(shape[, value])) → one ConstantOfShape of the cast type. Near-miss: the
    ConstantOfShape's result is read elsewhere too (the rule with a value), or it has a value of
    1.5 (the rule without one, which must not take it for zeros)."""

    def build(b: GraphBuilder, near: bool) -> None:
        attrs = {"value": numpy_helper.from_array(np.array([1.5], np.float32))} if with_value or near else {}
        filled = b.op("ConstantOfShape", [b.op("Shape", [_x(b, 2)])], **attrs)
        cast = b.op("Cast", [filled], to=tensor_type(b.choice([np.int32, np.float64])))
        b.output(b.op("Cast", [b.op("Add", [cast, cast])], to=tensor_type(np.float32)))
        if near and with_value:
            b.output(b.op("Neg", [filled]))

    build.__doc__ = _cast_constant_of_shape.__doc__
    return build


register("rule:cast_constant_of_shape", optimizers=SCRIPT)(_cast_constant_of_shape(True))
register("rule:cast_constant_of_shape_without_value", optimizers=SCRIPT)(_cast_constant_of_shape(False))


@register("rule:collapse_slice", optimizers=SCRIPT)
def whole_slice(b: GraphBuilder, near: bool) -> None:
    """Slice over a whole axis (start 0, end its size or INT64_MAX, step 1, all five inputs): the
    identity; near-miss: it stops one short."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    x = b.wrap(b.input(shape, np.float32))
    axis = int(b.rng.integers(len(shape)))
    end = shape[axis] - 1 if near else b.choice([shape[axis], INT64_MAX])
    b.output(b.wrap(b.op("Slice", [x, _i(b, [0]), _i(b, [end]), _i(b, [axis]), _i(b, [1])])))


@register("rule:collapse_slice2", optimizers=SCRIPT)
def same_shape_slice(b: GraphBuilder, near: bool) -> None:
    """Slice on several axes whose output shape is its input's: the identity; near-miss: one axis is
    cut short."""
    shape = b.dims(2, 2, 5)
    x = b.wrap(b.input(shape, np.float32))
    ends = [shape[0] - 1 if near else shape[0], shape[1]]
    b.output(b.wrap(b.op("Slice", [x, _i(b, [0, 0]), _i(b, ends), _i(b, [0, 1]), _i(b, [1, 1])])))


@register("rule:materialize_reshape_shape", optimizers=SCRIPT)
def computed_reshape_shape(b: GraphBuilder, near: bool) -> None:
    """Reshape to a computed shape whose value shape inference knows: a constant shape; near-miss: the
    shape is a constant already."""
    rows, cols = b.dims(2, 2, 4)
    x = b.wrap(b.input([rows, cols], np.float32))
    other = b.wrap(b.input([cols, rows], np.float32))
    shape = _i(b, [cols, rows]) if near else b.op("Shape", [other])
    b.output(b.op("Add", [b.op("Reshape", [x, shape]), other]))


def _successive(op: str) -> BuildFunc:
    """op(op(x, a), b) with constants (Min or Max): one op; near-miss: the first result is read
    elsewhere too."""

    def build(b: GraphBuilder, near: bool) -> None:
        inner = b.op(op, [_x(b), _f(b, float(b.choice([0.5, 1.0, 2.0])))])
        b.output(b.wrap(b.op(op, [inner, _f(b, float(b.choice([-0.5, 0.0, 0.25])))])))
        if near:
            b.output(b.op("Neg", [inner]))

    build.__doc__ = _successive.__doc__
    return build


register("rule:fuse_successive_min", optimizers=SCRIPT)(_successive("Min"))
register("rule:fuse_successive_max", optimizers=SCRIPT)(_successive("Max"))


@register("rule:fuse_min_max_to_clip", optimizers=SCRIPT)
def max_of_min(b: GraphBuilder, near: bool) -> None:
    """Max(Min(x, hi), lo) with scalar constants lo ≤ hi: Clip(x, lo, hi); near-miss: lo > hi."""
    x = _x(b, low=-3, high=3)
    high = float(b.choice([0.5, 1.0]))
    low = high + 1 if near else -high
    b.output(b.wrap(b.op("Max", [b.op("Min", [x, _f(b, high)]), _f(b, low)])))


@register("rule:fuse_max_min_to_clip", optimizers=SCRIPT)
def min_of_max(b: GraphBuilder, near: bool) -> None:
    """Min(Max(x, lo), hi) with scalar constants: Clip(x, lo, hi); near-miss: lo is a vector."""
    shape = b.dims(2, 2, 4)
    x = b.wrap(b.input(shape, np.float32, -3, 3))
    low = b.const(np.linspace(-1, -0.5, shape[-1]).astype(np.float32), "lo") if near else _f(b, -1.0)
    b.output(b.wrap(b.op("Min", [b.op("Max", [x, low]), _f(b, 1.0)])))


@register("rule:fuse_successive_clip_relu", optimizers=SCRIPT)
def clip_of_relu(b: GraphBuilder, near: bool) -> None:
    """Clip(Relu(x), lo, hi): one Clip; near-miss: lo is a graph input."""
    x = _x(b, low=-3, high=3)
    low = b.input([], np.float32, -1, 0) if near else _f(b, float(b.choice([-1.0, 0.5])))
    b.output(b.wrap(b.op("Clip", [b.op("Relu", [x]), low, _f(b, 6.0)])))


@register("rule:fuse_successive_relu_clip", optimizers=SCRIPT)
def relu_of_clip(b: GraphBuilder, near: bool) -> None:
    """Relu(Clip(x, lo, hi)): one Clip with lo ≥ 0. Near-miss: lo is a graph input, or hi < 0 (the
    result is 0 everywhere: the merged Clip(x, 0, hi) gives hi)."""
    x = _x(b, low=-6, high=6)
    variant = b.choice(["input", "negative"]) if near else "fuse"
    low = (
        b.input([], np.float32, -1, 0)
        if variant == "input"
        else _f(b, -5.0 if variant == "negative" else -1.0)
    )
    high = _f(b, -2.0 if variant == "negative" else 6.0)
    b.output(b.wrap(b.op("Relu", [b.op("Clip", [x, low, high])])))


@register("rule:fuse_successive_relu", optimizers=SCRIPT)
def relu_of_relu(b: GraphBuilder, near: bool) -> None:
    """Relu(Relu(x)): one Relu; near-miss: the first result is read elsewhere too."""
    inner = b.op("Relu", [_x(b)])
    b.output(b.wrap(b.op("Relu", [inner])))
    if near:
        b.output(b.op("Neg", [inner]))


@register("rule:fuse_successive_clip", optimizers=SCRIPT)
def clip_of_clip(b: GraphBuilder, near: bool) -> None:
    """Clip(Clip(x, a, b), c, d): one Clip with the tighter bounds. Near-miss: d is a graph input, or
    the ranges do not meet (Clip(Clip(x, -1, 0), 1, 4) is 1 everywhere; the merged Clip(x, 1, 0)
    is 0)."""
    x = _x(b, low=-6, high=6)
    variant = b.choice(["input", "disjoint"]) if near else "fuse"
    first = b.op("Clip", [x, _f(b, -1.0), _f(b, 0.0 if variant == "disjoint" else 6.0)])
    high = b.input([], np.float32, 3, 4) if variant == "input" else _f(b, 4.0)
    b.output(b.wrap(b.op("Clip", [first, _f(b, 1.0 if variant == "disjoint" else 0.0), high])))


@register("rule:cast_cast", optimizers=SCRIPT)
def cast_cast(b: GraphBuilder, near: bool) -> None:
    """double → Cast float → Cast float16: one Cast (the float step loses nothing float16 keeps);
    near-miss: float → Cast float16 → Cast float (a narrowing step in the middle)."""
    if near:
        x = _x(b)
        middle, last = np.float16, np.float32
    else:
        x = _x(b, dtype=np.float64)
        middle, last = np.float32, np.float16
    result = b.op("Cast", [b.op("Cast", [x], to=tensor_type(middle))], to=tensor_type(last))
    b.output(b.op("Cast", [result], to=tensor_type(np.float64)))


@register("rule:cast_identity", optimizers=SCRIPT)
def cast_identity(b: GraphBuilder, near: bool) -> None:
    """Cast to the type its input has: the identity; near-miss: a cast to double."""
    b.output(b.wrap(b.op("Cast", [_x(b)], to=tensor_type(np.float64 if near else np.float32))))


@register("rule:expand_identity", optimizers=SCRIPT)
def expand_identity(b: GraphBuilder, near: bool) -> None:
    """Expand to exactly the input's shape: the identity; near-miss: a shape that broadcasts a 1."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    x = b.wrap(b.input([1, *shape[1:]] if near else shape, np.float32))
    b.output(b.wrap(b.op("Expand", [x, _i(b, shape)])))


@register("rule:flatten2_reshape", optimizers=SCRIPT)
def flatten_axis1(b: GraphBuilder, near: bool) -> None:
    """Flatten(x, axis=1): a Reshape to [N, -1]; near-miss: axis 2 of a value whose shape is unknown
    (no constant shape to write)."""
    if near:
        b.keep_value_info = False
        x = b.input(b.dims(4, 2, 3), np.float32, symbolic={0: "a", 1: "b", 2: "c", 3: "d"})
        b.output(b.wrap(b.op("Flatten", [b.op("Tanh", [x])], axis=2)))
        return
    b.output(b.wrap(b.op("Flatten", [_x(b, int(b.rng.integers(2, 4)))], axis=1)))


@register("rule:reshape_reshape", optimizers=SCRIPT)
def reshape_reshape(b: GraphBuilder, near: bool) -> None:
    """Reshape(Reshape(x, s1), s2) with constant shapes: one Reshape; near-miss: the first result is
    read elsewhere too."""
    shape = b.dims(3, 2, 4)
    x = b.wrap(b.input(shape, np.float32))
    inner = b.op("Reshape", [x, _i(b, [shape[0] * shape[1], shape[2]])])
    b.output(b.wrap(b.op("Reshape", [inner, _i(b, [shape[2], -1])])))
    if near:
        b.output(b.op("Neg", [inner]))


@register("rule:slices_split", optimizers=SCRIPT)
def halves_split(b: GraphBuilder, near: bool) -> None:
    """The two halves of the last axis as two Slices (the upper one first): one Split. Near-miss: the
    first half ends short, or the axis is odd (5 as 2 + 3: Split's own halves are 3 + 2)."""
    variant = b.choice(["short", "odd"]) if near else "split"
    size = 5 if variant == "odd" else 2 * int(b.rng.integers(2 if variant == "short" else 1, 4))
    x = b.wrap(b.input([*b.dims(int(b.rng.integers(1, 3)), 2, 3), size], np.float32))
    middle = size // 2
    first_end = middle - 1 if variant == "short" else middle
    upper = b.op("Slice", [x, _i(b, [middle]), _i(b, [size]), _i(b, [-1])])
    lower = b.op("Slice", [x, _i(b, [0]), _i(b, [first_end]), _i(b, [-1])])
    b.output(b.op("Neg", [upper]))
    b.output(b.op("Neg", [lower]))


@register("rule:transpose_identity", optimizers=SCRIPT)
def transpose_identity(b: GraphBuilder, near: bool) -> None:
    """Transpose with the identity permutation: the identity; near-miss: no perm (which reverses)."""
    rank = int(b.rng.integers(2, 4))
    x = _x(b, rank)
    b.output(b.wrap(b.op("Transpose", [x]) if near else b.op("Transpose", [x], perm=list(range(rank)))))


@register("rule:transpose_transpose", optimizers=SCRIPT)
def transpose_transpose(b: GraphBuilder, near: bool) -> None:
    """Two Transposes with explicit perms: one (or none); near-miss: the inner one has no perm."""
    rank = int(b.rng.integers(2, 4))
    x = _x(b, rank)
    first = [int(p) for p in b.rng.permutation(rank)]
    inner = b.op("Transpose", [x]) if near else b.op("Transpose", [x], perm=first)
    b.output(b.wrap(b.op("Transpose", [inner], perm=[int(p) for p in b.rng.permutation(rank)])))


@register("rule:unsqueeze_unsqueeze", optimizers=SCRIPT)
def unsqueeze_unsqueeze(b: GraphBuilder, near: bool) -> None:
    """Unsqueeze(Unsqueeze(x, [a]), [b]) with single non-negative axes: one Unsqueeze; near-miss: the
    second axis is negative."""
    rank = int(b.rng.integers(1, 3))
    x = _x(b, rank)
    inner = b.op("Unsqueeze", [x, _i(b, [int(b.rng.integers(0, rank + 1))])])
    second = -1 if near else int(b.rng.integers(0, rank + 2))
    b.output(b.wrap(b.op("Unsqueeze", [inner, _i(b, [second])])))


@register("rule:squeeze_reshape1d", optimizers=SCRIPT)
def squeeze_reshape(b: GraphBuilder, near: bool) -> None:
    """Reshape(Squeeze(x[1]), [-1]): the identity; near-miss: the Squeeze names its axis."""
    x = b.wrap(b.input([1], np.float32))
    squeezed = b.op("Squeeze", [x, _i(b, [0])]) if near else b.op("Squeeze", [x])
    b.output(b.wrap(b.op("Reshape", [squeezed, _i(b, [-1])])))


@register("rule:scatter_all_static", optimizers=SCRIPT)
def scatter_everything(b: GraphBuilder, near: bool) -> None:
    """ScatterND writing every row in order (indices [[0], [1], …]): its updates. Near-miss: the rows
    in another order, or reduction "add" (which adds to the data instead)."""
    rows, cols = int(b.rng.integers(2, 5)), int(b.rng.integers(1, 4))
    data = b.wrap(b.input([rows, cols], np.float32))
    updates = b.wrap(b.input([rows, cols], np.float32))
    variant = b.choice(["order", "add"]) if near else "all"
    order = np.arange(rows)[::-1] if variant == "order" else np.arange(rows)
    attrs = {"reduction": "add"} if variant == "add" else {}
    indices = b.const(order.reshape(rows, 1).astype(np.int64), "idx")
    b.output(b.wrap(b.op("ScatterND", [data, indices, updates], **attrs)))


@register("rule:scatter_all_dynamic", optimizers=SCRIPT)
def scatter_everything_dynamic(b: GraphBuilder, near: bool) -> None:
    """ScatterND whose indices are Range(0, Shape(data)[axis]) unsqueezed: its updates; near-miss: the
    Range stops one short."""
    rows, cols = int(b.rng.integers(2, 5)), int(b.rng.integers(1, 4))
    data = b.wrap(b.input([rows, cols], np.float32))
    updates = b.wrap(b.input([rows - 1 if near else rows, cols], np.float32))
    length = b.op("Gather", [b.op("Shape", [data], start=0), b.const(np.array(0, np.int64), "i")], axis=0)
    if near:
        length = b.op("Sub", [length, b.const(np.array(1, np.int64), "one")])
    indices = b.op(
        "Unsqueeze",
        [
            b.op("Range", [b.const(np.array(0, np.int64), "s"), length, b.const(np.array(1, np.int64), "d")]),
            _i(b, [-1]),
        ],
    )
    b.output(b.wrap(b.op("ScatterND", [data, indices, updates], reduction="none")))


@register("rule:normalize_pad_format_conv", optimizers=SCRIPT)
def conv_auto_pad(b: GraphBuilder, near: bool) -> None:
    """Conv with auto_pad SAME_UPPER, SAME_LOWER or VALID: explicit pads; near-miss: explicit pads."""
    channels = int(b.rng.integers(1, 3))
    x = b.wrap(b.input([1, channels, *b.dims(2, 4, 6)], np.float32))
    weight = b.const(b.values([int(b.rng.integers(1, 3)), channels, 3, 3], np.float32, -0.5, 0.5), "w")
    attrs = {"pads": [1, 1, 1, 1]} if near else {"auto_pad": b.choice(["SAME_UPPER", "SAME_LOWER", "VALID"])}
    b.output(b.wrap(b.op("Conv", [x, weight], **attrs)))


@register("rule:fuse_conv_pad", optimizers=SCRIPT)
def conv_pad(b: GraphBuilder, near: bool) -> None:
    """Pad(constant 0, spatial axes) → Conv: the pads move into the Conv; near-miss: reflect mode, a
    pad value of 1, or a pad on the channel axis."""
    channels = int(b.rng.integers(1, 3))
    x = b.wrap(b.input([1, channels, *b.dims(2, 4, 6)], np.float32))
    pads = np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)
    variant = b.choice(["reflect", "value", "channel"]) if near else "fuse"
    inputs = [x, b.const(pads + np.array([0, 1, 0, 0, 0, 0, 0, 0]) if variant == "channel" else pads, "pads")]
    if variant == "value":
        inputs.append(_f(b, 1.0))
    padded = b.op("Pad", inputs, mode="reflect" if variant == "reflect" else "constant")
    in_channels = channels + (1 if variant == "channel" else 0)
    weight = b.const(b.values([int(b.rng.integers(1, 3)), in_channels, 3, 3], np.float32, -0.5, 0.5), "w")
    b.output(b.wrap(b.op("Conv", [padded, weight])))


register("rule:fuse_batch_norm_into_conv", optimizers=SCRIPT)(fusions.bn_into_conv)


def _batch_norm(b: GraphBuilder, value: str, channels: int, near: bool) -> str:
    """BatchNormalization with constant parameters; near-miss: its mean is a graph input."""
    mean = b.input([channels], np.float32) if near else b.const(b.values([channels]), "mean")
    return b.op(
        "BatchNormalization",
        [
            value,
            b.const(b.values([channels], np.float32, 0.5, 1.5), "scale"),
            b.const(b.values([channels]), "beta"),
            mean,
            b.const(b.values([channels], np.float32, 0.5, 2), "var"),
        ],
    )


@register("rule:fuse_batch_norm_into_conv_transpose", optimizers=SCRIPT)
def batch_norm_after_conv_transpose(b: GraphBuilder, near: bool) -> None:
    """ConvTranspose (constant weights, maybe a bias) → BatchNormalization: folded into the weights;
    near-miss: the mean is a graph input."""
    channels, out_channels = b.dims(2, 1, 3)
    x = b.wrap(b.input([1, channels, *b.dims(2, 3, 5)], np.float32))
    inputs = [x, b.const(b.values([channels, out_channels, 2, 2], np.float32, -0.5, 0.5), "w")]
    if b.chance():
        inputs.append(b.const(b.values([out_channels]), "bias"))
    b.output(b.wrap(_batch_norm(b, b.op("ConvTranspose", inputs), out_channels, near)))


@register("rule:fuse_batch_norm_into_gemm", optimizers=SCRIPT)
def batch_norm_after_gemm(b: GraphBuilder, near: bool) -> None:
    """Gemm (constant B and C) → BatchNormalization: folded into B and C; near-miss: the mean is a
    graph input."""
    m, k, n = b.dims(3, 2, 5)
    product = b.op(
        "Gemm",
        [b.wrap(b.input([m, k], np.float32)), b.const(b.values([k, n]), "w"), b.const(b.values([n]), "c")],
    )
    b.output(b.wrap(_batch_norm(b, product, n, near)))


def _zero_bias(b: GraphBuilder, size: int, near: bool) -> str:
    """An all-zero bias (-0.0 among the zeros); near-miss: one value is 1e-3."""
    bias = np.zeros([size], np.float32)
    bias[0] = -0.0
    if near:
        bias[int(b.rng.integers(size))] = 1e-3
    return b.const(bias, "bias")


@register("rule:remove_optional_bias_from_conv", optimizers=SCRIPT)
def conv_zero_bias(b: GraphBuilder, near: bool) -> None:
    """Conv with an all-zero bias: the bias goes."""
    channels, out_channels = b.dims(2, 1, 3)
    x = b.wrap(b.input([1, channels, *b.dims(2, 3, 5)], np.float32))
    weight = b.const(b.values([out_channels, channels, 3, 3], np.float32, -0.5, 0.5), "w")
    b.output(b.wrap(b.op("Conv", [x, weight, _zero_bias(b, out_channels, near)])))


@register("rule:remove_optional_bias_from_conv_transpose", optimizers=SCRIPT)
def conv_transpose_zero_bias(b: GraphBuilder, near: bool) -> None:
    """ConvTranspose with an all-zero bias: the bias goes."""
    channels, out_channels = b.dims(2, 1, 3)
    x = b.wrap(b.input([1, channels, *b.dims(2, 3, 5)], np.float32))
    weight = b.const(b.values([channels, out_channels, 2, 2], np.float32, -0.5, 0.5), "w")
    b.output(b.wrap(b.op("ConvTranspose", [x, weight, _zero_bias(b, out_channels, near)])))


@register("rule:remove_optional_bias_from_gemm", optimizers=SCRIPT)
def gemm_zero_bias(b: GraphBuilder, near: bool) -> None:
    """Gemm with an all-zero C: C goes."""
    m, k, n = b.dims(3, 2, 5)
    b.output(
        b.wrap(
            b.op(
                "Gemm",
                [b.wrap(b.input([m, k], np.float32)), b.const(b.values([k, n]), "w"), _zero_bias(b, n, near)],
            )
        )
    )
