"""Quantized models: QDQ node units (DequantizeLinear → op → QuantizeLinear) as ONNX Runtime's
quantization tool writes them, dynamic quantization (DynamicQuantizeLinear, MatMulInteger), 4-bit
MatMulNBits, and the integer convolutions. ORT's QDQ transformers turn units into QLinear ops, drop
redundant pairs, move them through layout ops; the near-misses are the parameters each must compare
(a scale, a zero point, per-channel against per-tensor)."""

from __future__ import annotations

import numpy as np

from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder
from ditox_ci.fuzz.ort_rules import ORT

EXTENDED = ("onnxruntime-extended",)
SCRIPT = ("onnxscript",)
MICROSOFT = "com.microsoft"


def _param(b: GraphBuilder, value: float, dtype: type) -> str:
    """A rank-0 scale or zero point (ORT's QDQ rules take no other)."""
    return b.const(np.array(value, dtype), "q")


def _q(b: GraphBuilder, value: str, scale: float, zero: int, dtype: type = np.uint8) -> str:
    return b.op("QuantizeLinear", [value, _param(b, scale, np.float32), _param(b, zero, dtype)])


def _dq(b: GraphBuilder, value: str, scale: float, zero: int, dtype: type = np.uint8) -> str:
    return b.op("DequantizeLinear", [value, _param(b, scale, np.float32), _param(b, zero, dtype)])


def _activations(b: GraphBuilder, shape: list[int], dtype: type = np.uint8) -> str:
    """A quantized graph input over its whole range."""
    low, high = (0, 255) if dtype == np.uint8 else (-128, 127)
    return b.input(shape, dtype, low, high)


@register("DoubleQDQPairsRemover", optimizers=ORT)
def double_qdq(b: GraphBuilder, near: bool) -> None:
    """Q → DQ → Q → DQ, each pair with its own scale and zero point: the inner pair goes, the outer
    gets their combined range; near-miss: the first DQ's scale is not its Q's."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    x = b.op("Relu", [b.wrap(b.input(shape, np.float32))])
    first, second = float(b.choice([0.01, 0.02])), float(b.choice([0.015, 0.03]))
    zero = int(b.choice([0, 128]))
    value = _dq(b, _q(b, x, first, zero), first * (1.1 if near else 1.0), zero)
    value = _dq(b, _q(b, value, second, zero), second, zero)
    b.output(b.op("Relu", [value]))


@register("QDQPropagationTransformer", optimizers=ORT)
def qdq_propagation(b: GraphBuilder, near: bool) -> None:
    """A DQ before a layout op (Transpose, Reshape, Squeeze, Unsqueeze, MaxPool) gets a Q/DQ pair
    after it too, so the op sits inside a unit; near-miss: a per-channel DQ (scales per axis)."""
    shape = b.dims(3, 2, 4)
    x = _activations(b, shape)
    if near:
        scales = b.const(b.values([shape[0]], np.float32, 0.01, 0.05), "scale")
        value = b.op(
            "DequantizeLinear", [x, scales, b.const(np.full([shape[0]], 128, np.uint8), "zero")], axis=0
        )
    else:
        value = _dq(b, x, 0.02, 128)
    op = b.choice(["Transpose", "Reshape", "Squeeze"])
    if op == "Transpose":
        moved = b.op("Transpose", [value], perm=[2, 0, 1])
    elif op == "Reshape":
        moved = b.op("Reshape", [value, b.const(np.array([-1], np.int64), "shape")])
    else:
        moved = b.op(
            "Squeeze",
            [
                b.op("Unsqueeze", [value, b.const(np.array([0], np.int64), "a")]),
                b.const(np.array([0], np.int64), "a"),
            ],
        )
    b.output(b.op("Sigmoid", [moved]))


@register("WeightBiasQuantization", optimizers=ORT)
def weight_bias(b: GraphBuilder, near: bool) -> None:
    """DQ(x) → Conv or Gemm with float weights and bias → Q: the weights get an int8 Q/DQ pair and
    the bias an int32 DQ; near-miss: no Q after the op (no unit to complete)."""
    if b.chance():
        channels, out_channels = b.dims(2, 1, 3)
        x = _dq(b, _activations(b, [1, channels, *b.dims(2, 3, 5)]), 0.02, 128)
        result = b.op(
            "Conv",
            [
                x,
                b.const(b.values([out_channels, channels, 3, 3], np.float32, -0.5, 0.5), "w"),
                b.const(b.values([out_channels]), "bias"),
            ],
            pads=[1, 1, 1, 1],
        )
    else:
        m, k, n = b.dims(3, 2, 5)
        x = _dq(b, _activations(b, [m, k]), 0.02, 128)
        result = b.op("Gemm", [x, b.const(b.values([k, n]), "w"), b.const(b.values([n]), "bias")])
    if near:
        b.output(b.op("Sigmoid", [result]))
        return
    b.output(_dq(b, _q(b, result, 0.05, 128), 0.05, 128))


@register("WhereDummyDq", optimizers=ORT)
def where_dummy_dq(b: GraphBuilder, near: bool) -> None:
    """Where(cond, DQ(x), a float scalar) → Q: the scalar gets a dummy DQ so the Where forms a unit;
    near-miss: the scalar has shape [1]."""
    shape = b.dims(2, 2, 4)
    condition = b.op("Greater", [b.wrap(b.input(shape, np.float32)), b.const(np.array(0.0, np.float32), "z")])
    scalar = b.const(np.array([-1.0] if near else -1.0, np.float32), "fill")
    value = _dq(b, _activations(b, shape), 0.02, 128)
    chosen = b.op("Where", [condition, value, scalar] if b.chance() else [condition, scalar, value])
    b.output(_dq(b, _q(b, chosen, 0.02, 128), 0.02, 128))


@register("ClipQuantRewrite", optimizers=EXTENDED)
def clip_quant(b: GraphBuilder, near: bool) -> None:
    """Clip(min, max) → Q whose range lies within [min, max]: the Clip goes (Q saturates anyway);
    near-miss: Q's range reaches past the Clip's max."""
    x = b.op("Sigmoid", [b.wrap(b.input(b.dims(2, 2, 4), np.float32, -8, 8))])
    x = b.op("Mul", [x, b.const(np.array(8.0, np.float32), "k")])
    high = 5.0 if near else 6.0
    clipped = b.op(
        "Clip", [x, b.const(np.array(0.0, np.float32), "min"), b.const(np.array(high, np.float32), "max")]
    )
    b.output(_dq(b, _q(b, clipped, 6.0 / 255, 0), 6.0 / 255, 0))


@register("ReluQuantRewrite", optimizers=EXTENDED)
def relu_quant(b: GraphBuilder, near: bool) -> None:
    """Relu → Q whose zero point is its type's lowest value: the Relu goes; near-miss: a zero point
    above it (then the Relu's zeros are not the Q's floor)."""
    dtype = b.choice([np.uint8, np.int8])
    floor = 0 if dtype == np.uint8 else -128
    x = b.op("Relu", [b.wrap(b.input(b.dims(2, 2, 4), np.float32, -2, 2))])
    zero = floor + (3 if near else 0)
    b.output(_dq(b, _q(b, x, 0.01, zero, dtype), 0.01, zero, dtype))


@register("QDQS8ToU8Transformer", optimizers=EXTENDED)
def s8_to_u8(b: GraphBuilder, near: bool) -> None:
    """An int8 Q → DQ pair with equal zero points becomes uint8 (x86 kernels take uint8 activations);
    near-miss: the zero points differ."""
    x = b.wrap(b.input(b.dims(2, 2, 4), np.float32))
    quantized = _q(b, x, 0.01, 0, np.int8)
    b.output(b.op("Sigmoid", [_dq(b, quantized, 0.01, 1 if near else 0, np.int8)]))


@register("QDQSelectorActionTransformer", optimizers=EXTENDED)
def qdq_units(b: GraphBuilder, near: bool) -> None:
    """QDQ node units become QLinear ops or lose their pair: DQ → Reshape/Transpose → Q (dropped), DQ
    + DQ → Add → Q (QLinearAdd), DQ(x), DQ(W) → Conv/MatMul → Q (QLinearConv, QLinearMatMul).
    Near-miss: around a Reshape, a Q whose scale is not the DQ's."""
    unit = "drop" if near else b.choice(["drop", "add", "conv", "matmul"])
    if unit == "drop":
        shape = b.dims(2, 2, 4)
        value = _dq(b, _activations(b, shape), 0.02, 128)
        moved = (
            b.op("Reshape", [value, b.const(np.array([-1], np.int64), "shape")])
            if b.chance()
            else b.op("Transpose", [value], perm=[1, 0])
        )
        b.output(_q(b, moved, 0.03 if near else 0.02, 128))
        return
    if unit == "add":
        shape = b.dims(2, 2, 4)
        total = b.op(
            "Add", [_dq(b, _activations(b, shape), 0.02, 128), _dq(b, _activations(b, shape), 0.03, 120)]
        )
        b.output(_q(b, total, 0.05, 128))
        return
    if unit == "conv":
        channels, out_channels = b.dims(2, 1, 3)
        x = _dq(b, _activations(b, [1, channels, *b.dims(2, 3, 5)]), 0.02, 128)
        weight = b.op(
            "DequantizeLinear",
            [
                # 7-bit weights, as ORT's quantizer writes them with reduce_range: full-range int8
                # weights saturate its u8s8 kernels on CPUs without VNNI (a limitation it documents)
                b.const(b.values([out_channels, channels, 3, 3], np.int8, -64, 63), "w"),
                _param(b, 0.005, np.float32),
                _param(b, 0, np.int8),
            ],
        )
        result = b.op("Conv", [x, weight], pads=[1, 1, 1, 1])
    else:
        m, k, n = b.dims(3, 2, 5)
        x = _dq(b, _activations(b, [m, k]), 0.02, 128)
        weight = _dq(b, b.const(b.values([k, n], np.uint8, 0, 255), "w"), 0.005, 128)
        result = b.op("MatMul", [x, weight])
    b.output(_q(b, result, 0.1, 128))


def _dynamic_matmul(b: GraphBuilder) -> tuple[str, str, str, str, str, str, int]:
    """DynamicQuantizeLinear(x) and a constant uint8 B with its scale and zero point."""
    m, k, n = b.dims(3, 2, 5)
    quantized, scale, zero = b.op("DynamicQuantizeLinear", [b.wrap(b.input([m, k], np.float32))], outputs=3)
    weight = b.const(b.values([k, n], np.uint8, 0, 255), "w")
    return quantized, scale, zero, weight, _param(b, 0.01, np.float32), _param(b, 128, np.uint8), n


@register("MatMulIntegerToFloatFusion", optimizers=EXTENDED)
def matmul_integer_to_float(b: GraphBuilder, near: bool) -> None:
    """MatMulInteger → Cast to float → Mul by the product of the two scales (dynamic quantization as
    ORT's tool writes it): MatMulIntegerToFloat; near-miss: the Cast's result is read elsewhere."""
    quantized, scale, zero, weight, weight_scale, weight_zero, n = _dynamic_matmul(b)
    product = b.op("MatMulInteger", [quantized, weight, zero, weight_zero])
    widened = b.op("Cast", [product], to=1)
    result = b.op("Mul", [widened, b.op("Mul", [scale, weight_scale])])
    if b.chance():
        result = b.op("Add", [result, b.const(b.values([n]), "bias")])
    b.output(b.wrap(result))
    if near:
        b.output(b.op("Neg", [widened]))


@register("DynamicQuantizeMatMulFusion", optimizers=EXTENDED)
def dynamic_quantize_matmul(b: GraphBuilder, near: bool) -> None:
    """DynamicQuantizeLinear → ORT's MatMulIntegerToFloat: DynamicQuantizeMatMul; near-miss: the
    dynamic scale is read elsewhere too."""
    quantized, scale, zero, weight, weight_scale, weight_zero, n = _dynamic_matmul(b)
    inputs = [quantized, weight, scale, weight_scale, zero, weight_zero]
    if b.chance():
        inputs.append(b.const(b.values([n]), "bias"))
    result = b.op("MatMulIntegerToFloat", inputs, domain=MICROSOFT)
    b.annotate(result, np.float32, [])
    b.output(b.wrap(b.op("Reshape", [result, b.const(np.array([-1], np.int64), "shape")])))
    if near:
        b.output(b.op("Neg", [scale]))


@register("QDQFinalCleanupTransformer", optimizers=EXTENDED)
def final_cleanup(b: GraphBuilder, near: bool) -> None:
    """DQ → Q with the same scale and zero point (a round trip to float and back): both go;
    near-miss: the Q's scale differs (a requantization)."""
    shape = b.dims(2, 2, 4)
    value = _dq(b, b.op("Identity", [_activations(b, shape)]), 0.02, 128)
    b.output(b.op("Identity", [_q(b, value, 0.04 if near else 0.02, 128)]))


@register("MatMulNBitsFusion", optimizers=EXTENDED)
def matmul_nbits_bias(b: GraphBuilder, near: bool) -> None:
    """ORT's 4-bit MatMulNBits (block-quantized weights, as its quantizer writes them) → Add(bias
    [N]): the bias moves into it; near-miss: the bias is [1, N]."""
    n, blocks = int(b.rng.integers(1, 5)), int(b.rng.integers(1, 3))
    block = 16
    k = blocks * block
    a = b.wrap(b.input([int(b.rng.integers(1, 4)), k], np.float32))
    packed = b.const(b.values([n, blocks, block // 2], np.uint8, 0, 255), "b4")
    scales = b.const(b.values([n * blocks], np.float32, 0.01, 0.05), "scales")
    product = b.op("MatMulNBits", [a, packed, scales], domain=MICROSOFT, K=k, N=n, bits=4, block_size=block)
    b.annotate(product, np.float32, [])
    biased = b.op("Add", [product, b.const(b.values([1, n] if near else [n]), "bias")])
    b.output(b.wrap(b.op("Reshape", [biased, b.const(np.array([-1], np.int64), "shape")])))


# --- onnxscript's rules on integer convolutions ----------------------------------------------------


def _integer_image(b: GraphBuilder) -> tuple[str, str, int]:
    channels, out_channels = b.dims(2, 1, 3)
    x = _activations(b, [1, channels, *b.dims(2, 4, 6)])
    weight = b.const(b.values([out_channels, channels, 3, 3], np.uint8, 0, 255), "w")
    return x, weight, out_channels


@register("rule:normalize_pad_format_conv_integer", optimizers=SCRIPT)
def conv_integer_auto_pad(b: GraphBuilder, near: bool) -> None:
    """ConvInteger with auto_pad SAME_UPPER, SAME_LOWER or VALID: explicit pads; near-miss: explicit
    pads already."""
    x, weight, _ = _integer_image(b)
    if near:
        result = b.op("ConvInteger", [x, weight], pads=[1, 1, 1, 1])
    else:
        result = b.op("ConvInteger", [x, weight], auto_pad=b.choice(["SAME_UPPER", "SAME_LOWER", "VALID"]))
    b.output(b.op("Neg", [result]))


@register("rule:fuse_conv_integer_pad", optimizers=SCRIPT)
def conv_integer_pad(b: GraphBuilder, near: bool) -> None:
    """Pad(constant 0) → ConvInteger without a zero point: the pads move into the ConvInteger.
    Near-miss: a pad value of 3, or an x zero point of 128 (ConvInteger pads with its zero point,
    so a 0-pad is no longer the same)."""
    x, weight, _ = _integer_image(b)
    padded = b.op(
        "Pad",
        [
            x,
            b.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
            *([b.const(np.array(3, np.uint8), "value")] if near and b.chance() else []),
        ],
    )
    zero_point = near and len(b.nodes[-1].input) == 2
    inputs = [padded, weight, *([b.const(np.array(128, np.uint8), "x_zero")] if zero_point else [])]
    b.output(b.op("Neg", [b.op("ConvInteger", inputs)]))


@register("rule:remove_optional_bias_from_qlinear_conv", optimizers=SCRIPT)
def qlinear_conv_zero_bias(b: GraphBuilder, near: bool) -> None:
    """QLinearConv with an all-zero int32 bias: the bias input goes; near-miss: one bias value is 1."""
    x, weight, out_channels = _integer_image(b)
    bias = np.zeros([out_channels], np.int32)
    if near:
        bias[int(b.rng.integers(out_channels))] = 1
    params = [_param(b, 0.02, np.float32), _param(b, 128, np.uint8)]
    result = b.op(
        "QLinearConv",
        [
            x,
            *params,
            weight,
            _param(b, 0.005, np.float32),
            _param(b, 128, np.uint8),
            _param(b, 0.1, np.float32),
            _param(b, 128, np.uint8),
            b.const(bias, "bias"),
        ],
        pads=[1, 1, 1, 1],
    )
    b.output(b.op("DequantizeLinear", [result, _param(b, 0.1, np.float32), _param(b, 128, np.uint8)]))
