"""Fusions: two or more ops folded into one (Conv+BN, Conv+Add, Pad+Conv/Pool, MatMul+Add, …)."""

from __future__ import annotations

import numpy as np

from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder


def _conv(b: GraphBuilder, x: str, channels: int, out_channels: int, bias: bool,
          spatial: int) -> str:
    kernel = [int(k) for k in b.rng.integers(1, 4, size=spatial)]
    weight = b.const(b.values([out_channels, channels, *kernel], np.float32, -0.5, 0.5))
    inputs = [x, weight]
    if bias:
        inputs.append(b.const(b.values([out_channels], np.float32), "bias"))
    pads = [int(p) for p in b.rng.integers(0, 2, size=2 * spatial)] if b.chance() else None
    attrs = {"pads": pads} if pads else {}
    return b.op("Conv", inputs, **attrs)


def _image(b: GraphBuilder, spatial: int, low: int = 4, high: int = 7) -> tuple[str, int]:
    channels = int(b.rng.integers(1, 4))
    shape = [int(b.rng.integers(1, 3)), channels, *b.dims(spatial, low, high)]
    return b.wrap(b.input(shape, np.float32)), channels


@register("fuse_bn_into_conv")
def bn_into_conv(b: GraphBuilder, near: bool) -> None:
    """Conv (constant weights, with or without bias) → BatchNormalization (constant parameters);
    near-miss: the Conv result is also used elsewhere, or the BN scale is a graph input."""
    spatial = int(b.rng.integers(1, 3))
    x, channels = _image(b, spatial)
    out_channels = int(b.rng.integers(1, 4))
    conv = _conv(b, x, channels, out_channels, b.chance(), spatial)
    variable_scale = near and b.chance()
    scale = b.input([out_channels], np.float32, 0.5, 1.5) if variable_scale else \
        b.const(b.values([out_channels], np.float32, 0.5, 1.5), "scale")
    params = [b.const(b.values([out_channels], np.float32), n) for n in ("beta", "mean")]
    var = b.const(b.values([out_channels], np.float32, 0.5, 2.0), "var")
    epsilon = float(b.choice([1e-5, 1e-3]))
    bn = b.op("BatchNormalization", [conv, scale, *params, var], epsilon=epsilon)
    b.output(b.wrap(bn))
    if near and not variable_scale:
        b.output(b.wrap(conv))


@register("fuse_add_bias_into_conv")
def add_bias_into_conv(b: GraphBuilder, near: bool) -> None:
    """Conv without bias → Add of a per-channel or one-element bias ([C], [C,1,..], [1,C,1,..],
    [1], [1,1,..]) that is an initializer, a Constant or a graph input; near-miss: the bias is
    computed by a node, or the Conv result is also used elsewhere."""
    spatial = int(b.rng.integers(1, 3))
    x, channels = _image(b, spatial)
    out_channels = int(b.rng.integers(1, 4))
    conv = _conv(b, x, channels, out_channels, False, spatial)
    bias_shape = b.choice([[out_channels, *[1] * spatial], [1, out_channels, *[1] * spatial],
                           [1], [1] * (spatial + 2)])
    source = b.choice(["initializer", "constant", "input"])
    if source == "input":
        bias = b.input(bias_shape, np.float32)
    elif source == "constant":
        bias = b.constant_node(b.values(bias_shape, np.float32))
    else:
        bias = b.const(b.values(bias_shape, np.float32), "bias")
    shared = near and b.chance()
    if near and not shared:
        bias = b.op("Tanh", [bias])
    b.output(b.wrap(b.op("Add", [conv, bias])))
    if shared:
        b.output(b.wrap(conv))


def _spatial_pads(b: GraphBuilder, spatial: int, most: int) -> np.ndarray:
    """Pad's `pads` for an image with `spatial` axes: 0 to `most` on each side of each spatial axis,
    none on the batch and channel axes, and at least 1 before the first spatial axis."""
    pads = np.zeros(2 * (spatial + 2), np.int64)
    for axis in range(2, spatial + 2):
        pads[axis] = int(b.rng.integers(0, most + 1))
        pads[axis + spatial + 2] = int(b.rng.integers(0, most + 1))
    pads[2] = max(pads[2], 1)
    return pads


@register("fuse_pad_into_conv", opsets=(11, 21))
def pad_into_conv(b: GraphBuilder, near: bool) -> None:
    """Pad (constant mode, value 0, spatial axes only) → Conv; near-miss: reflect mode, a non-zero
    pad value, or padding on the channel axis."""
    spatial = int(b.rng.integers(1, 3))
    x, channels = _image(b, spatial)
    pads = _spatial_pads(b, spatial, most=2)
    inputs = [x, b.const(pads, "pads")]
    mode = "constant"
    if near:
        variant = b.choice(["reflect", "value"])
        if variant == "reflect":
            mode = "reflect"
        else:
            inputs.append(b.const(np.array(0.5, np.float32), "pad_value"))
    elif b.chance():
        inputs.append(b.const(np.array(0.0, np.float32), "pad_value"))
    padded = b.op("Pad", inputs, mode=mode)
    conv = _conv(b, padded, channels, int(b.rng.integers(1, 4)), b.chance(), spatial)
    b.output(b.wrap(conv))


@register("fuse_pad_into_pool", opsets=(11, 21))
def pad_into_pool(b: GraphBuilder, near: bool) -> None:
    """Pad (constant 0 for AveragePool, constant -inf-like for MaxPool) → pool; near-miss: a pad on
    the batch axis or reflect mode."""
    spatial = int(b.rng.integers(1, 3))
    x, _ = _image(b, spatial)
    pads = _spatial_pads(b, spatial, most=1)
    mode = "constant"
    if near:
        if b.chance():
            mode = "reflect"
        else:
            pads[0] = 1
    padded = b.op("Pad", [x, b.const(pads, "pads")], mode=mode)
    pool = b.choice(["MaxPool", "AveragePool"])
    kernel = [int(k) for k in b.rng.integers(1, 3, size=spatial)]
    attrs = {"count_include_pad": int(b.choice([0, 1]))} if pool == "AveragePool" else {}
    b.output(b.wrap(b.op(pool, [padded], kernel_shape=kernel, **attrs)))


@register("fuse_transpose_into_gemm")
def transpose_into_gemm(b: GraphBuilder, near: bool) -> None:
    """Transpose(perm 1,0) → Gemm's A and/or B (transA/transB flip), even when the transposed
    value is used elsewhere too; near-miss: a context op between Transpose and Gemm."""
    m, k, n = b.dims(3, 2, 5)
    a = b.wrap(b.input([k, m], np.float32))
    a_t = b.op("Transpose", [a], perm=[1, 0])
    shared = b.chance()
    if near:
        a_t = b.op("Tanh", [a_t])
    weight = b.const(b.values([n, k], np.float32), "w")
    b_input = b.op("Transpose", [weight], perm=[1, 0]) if b.chance() else \
        b.const(b.values([k, n], np.float32), "wt")
    attrs = {"alpha": float(b.choice([1.0, 0.5]))}
    if near:
        b_input = b.const(b.values([k, n], np.float32), "wt")
    b.output(b.wrap(b.op("Gemm", [a_t, b_input], **attrs)))
    if shared:
        b.output(b.wrap(a_t))


@register("fuse_matmul_add_bias_into_gemm")
def matmul_add_into_gemm(b: GraphBuilder, near: bool) -> None:
    """MatMul of 2-D A and constant 2-D B → Add of a constant bias ([N] or [1,N]); near-miss: a
    3-D A, which Gemm cannot take."""
    m, k, n = b.dims(3, 2, 6)
    shape = [2, m, k] if near else [m, k]
    a = b.wrap(b.input(shape, np.float32))
    product = b.op("MatMul", [a, b.const(b.values([k, n], np.float32), "w")])
    bias = b.const(b.values(b.choice([[n], [1, n]]), np.float32), "bias")
    b.output(b.wrap(b.op("Add", [product, bias])))


@register("fuse_qkv")
def qkv(b: GraphBuilder, near: bool) -> None:
    """One value feeding exactly three MatMuls with constant same-shaped weights (attention
    Q, K, V); near-miss: one weight of a different width."""
    tokens, hidden, width = b.dims(3, 2, 6)
    x = b.wrap(b.input([int(b.rng.integers(1, 3)), tokens, hidden], np.float32))
    widths = [width, width, width + 1 if near else width]
    for w in widths:
        b.output(b.wrap(b.op("MatMul", [x, b.const(b.values([hidden, w], np.float32), "w")])))


@register("replace_einsum_with_matmul", opsets=(12, 21))
def einsum(b: GraphBuilder, near: bool) -> None:
    """Einsum spelling a (batched) MatMul, "bij,bjk->bik" or with B transposed "bij,bkj->bik";
    near-miss: an equation that sums over a batch axis, which is no MatMul."""
    batch = int(b.rng.integers(0, 3))
    letters = "abcdefgh"[:batch]
    m, k, n = b.dims(3, 2, 5)
    batch_dims = b.dims(batch, 1, 3)
    transposed = b.chance()
    left = letters + "ij"
    right = letters + ("kj" if transposed else "jk")
    result = letters + "ik"
    if near:
        left, right, result = left + "z", right + "z", result + "z"
    x_shape = [*batch_dims, m, k, *([2] if near else [])]
    y_core = [n, k] if transposed else [k, n]
    y_shape = [*batch_dims, *y_core, *([2] if near else [])]
    x = b.wrap(b.input(x_shape, b.float_dtype(allow_double=False)))
    y = b.const(b.values(y_shape, np.float32), "w")
    b.output(b.wrap(b.op("Einsum", [x, y], equation=f"{left},{right}->{result}")))


@register("fuse_consecutive_log_softmax")
def log_softmax(b: GraphBuilder, near: bool) -> None:
    """Log(Softmax(x, axis)); near-miss: the Softmax result is also used elsewhere."""
    rank = int(b.rng.integers(1, 4))
    x = b.wrap(b.input(b.dims(rank, 2, 5), b.float_dtype()))
    soft = b.op("Softmax", [x], axis=int(b.rng.integers(-rank, rank)))
    b.output(b.wrap(b.op("Log", [soft])))
    if near:
        b.output(b.wrap(soft))
