"""Transformer-model fusions: GELU (erf, tanh and sigmoid forms), LayerNorm and RMSNorm spelled out
in primitive ops, the skip and bias variants ONNX Runtime fuses into its contrib ops, embeddings,
attention, rotary embeddings and grouped-query attention, as exporters write them. Each optimizer's
own fusion of a pattern is a pass of its own (ORT's GeluFusionL2, onnxsim's fuse_gelu); near-misses
change the one detail each fusion must check (a constant, an operand's side, an axis, a second
reader of an intermediate)."""

from __future__ import annotations

import math

import numpy as np

from ditox_ci.fuzz.base import BuildFunc, register
from ditox_ci.fuzz.builder import GraphBuilder
from ditox_ci.fuzz.ort_rules import ORT

EXTENDED = ("onnxruntime-extended",)
SIM = ("onnxsim",)
MICROSOFT = "com.microsoft"
SQRT2 = math.sqrt(2.0)
TANH_GELU = (0.044715, math.sqrt(2.0 / math.pi))


def _scalar(b: GraphBuilder, value: float) -> str:
    return b.const(np.array(value, np.float32), "c")


def _tokens(b: GraphBuilder, width: int) -> str:
    """A [batch, sequence, width] float input behind a context op."""
    return b.wrap(b.input([int(b.rng.integers(1, 3)), int(b.rng.integers(2, 5)), width], np.float32))


def _reduce(b: GraphBuilder, op: str, value: str, axes: list[int], keepdims: int = 1) -> str:
    """A reduction takes its axes as an attribute before opset 18 and as an input after."""
    if b.opset >= 18:
        return b.op(op, [value, b.const(np.array(axes, np.int64), "axes")], keepdims=keepdims)
    return b.op(op, [value], axes=axes, keepdims=keepdims)


def _reduce_mean(b: GraphBuilder, value: str, axes: list[int]) -> str:
    return _reduce(b, "ReduceMean", value, axes)


# --- GELU --------------------------------------------------------------------------------------


def _gelu_erf(spellings: bool, near_misses: tuple[str, ...]) -> BuildFunc:
    """0.5·x·(1 + erf(x/√2)) as exporters write it, in every spelling ORT matches (BERT's divisor
    1.4142099…, the 0.5 first or last) or, without `spellings`, only the canonical one onnxsim
    matches; near-miss: a divisor of 1.41, a factor of 0.5001, or the Erf's result read elsewhere
    too (ORT then leaves it; onnxsim rightly fuses and keeps the Erf for the other reader)."""

    def build(b: GraphBuilder, near: bool) -> None:
        x = _tokens(b, int(b.rng.integers(2, 9)))
        variant = b.choice(near_misses) if near else "fuse"
        divisor = float(b.choice([SQRT2, 1.4142099618911743])) if spellings else SQRT2
        divisor = 1.41 if variant == "divisor" else divisor
        half = 0.5001 if variant == "half" else 0.5
        erf = b.op("Erf", [b.op("Div", [x, _scalar(b, divisor)])])
        one_plus = b.op("Add", [erf, _scalar(b, 1.0)] if b.chance() else [_scalar(b, 1.0), erf])
        if b.chance() or not spellings:
            gelu = b.op("Mul", [b.op("Mul", [x, one_plus]), _scalar(b, half)])
        else:
            gelu = b.op("Mul", [b.op("Mul", [x, _scalar(b, half)]), one_plus])
        b.output(b.wrap(gelu))
        if variant == "shared":
            b.output(b.op("Neg", [erf]))

    build.__doc__ = _gelu_erf.__doc__
    return build


register("GeluFusionL1", opsets=(20, 21), optimizers=ORT)(_gelu_erf(True, ("divisor", "half", "shared")))
register("GeluFusionL2", opsets=(13, 19), optimizers=EXTENDED)(_gelu_erf(True, ("divisor", "half", "shared")))
register("fuse_gelu", opsets=(20, 21), optimizers=SIM)(_gelu_erf(False, ("divisor", "half")))


@register("FastGeluFusion", optimizers=EXTENDED)
def gelu_tanh(b: GraphBuilder, near: bool) -> None:
    """0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) in either of GPT-2's two spellings, read by a
    node; near-miss: 0.0447 for 0.044715, or the last Mul is a graph output (ORT leaves those)."""
    x = _tokens(b, int(b.rng.integers(2, 9)))
    variant = b.choice(["coefficient", "graph-output"]) if near else "fuse"
    cubic, scale = TANH_GELU
    if variant == "coefficient":
        cubic = 0.0447
    if b.chance():
        inner = b.op("Mul", [b.op("Mul", [x, _scalar(b, cubic)]), x])
        inner = b.op("Mul", [b.op("Mul", [x, _scalar(b, scale)]), b.op("Add", [inner, _scalar(b, 1.0)])])
    else:
        cube = b.op("Pow", [x, _scalar(b, 3.0)])
        inner = b.op("Mul", [b.op("Add", [x, b.op("Mul", [cube, _scalar(b, cubic)])]), _scalar(b, scale)])
    gelu = b.op(
        "Mul", [b.op("Mul", [x, _scalar(b, 0.5)]), b.op("Add", [b.op("Tanh", [inner]), _scalar(b, 1.0)])]
    )
    b.output(gelu if variant == "graph-output" else b.op("Identity", [gelu]))


@register("QuickGeluFusion", optimizers=EXTENDED)
def gelu_sigmoid(b: GraphBuilder, near: bool) -> None:
    """x·sigmoid(α·x) (QuickGELU, α 1.702) or x·sigmoid(x) (SiLU); near-miss: the Sigmoid's result is
    read elsewhere too."""
    x = _tokens(b, int(b.rng.integers(2, 9)))
    scaled = b.op("Mul", [x, _scalar(b, 1.702)]) if b.chance() else x
    sigmoid = b.op("Sigmoid", [scaled])
    b.output(b.wrap(b.op("Mul", [x, sigmoid] if b.chance() else [sigmoid, x])))
    if near:
        b.output(b.op("Neg", [sigmoid]))


@register("BiasGeluFusion", opsets=(17, 21), optimizers=EXTENDED)
def bias_gelu(b: GraphBuilder, near: bool) -> None:
    """Add(x, bias[W]) → GELU (ONNX's Gelu from opset 20, ORT's contrib Gelu or FastGelu before):
    BiasGelu or FastGelu with a bias; near-miss: the bias is [1, W]."""
    width = int(b.rng.integers(2, 9))
    x = _tokens(b, width)
    biased = b.op("Add", [x, b.const(b.values([1, width] if near else [width]), "bias")])
    if b.opset >= 20:
        gelu = b.op("Gelu", [biased], approximate=b.choice(["none", "tanh"]))
    else:
        gelu = b.op(b.choice(["Gelu", "FastGelu"]), [biased], domain=MICROSOFT)
        b.annotate(gelu, np.float32, [])
        gelu = b.op("Reshape", [gelu, b.const(np.array([-1], np.int64), "shape")])
    b.output(b.wrap(gelu))


# --- LayerNorm and RMSNorm ----------------------------------------------------------------------


def _layer_norm(square: str) -> BuildFunc:
    """LayerNorm in primitive ops, its variance by `square` ("Pow" or "Mul"): ReduceMean → Sub →
    square → ReduceMean → Add(ε) → Sqrt → Div → Mul(γ) → Add(β). Near-misses: what a LayerNorm
    fusion must read — the exponent (3), the Sub's and the Div's operand order, the axis (not the
    last one)."""

    def build(b: GraphBuilder, near: bool) -> None:
        width = int(b.rng.integers(2, 9))
        x = _tokens(b, width)
        variant = b.choice(["exponent", "sub-order", "div-order", "axis"]) if near else "fuse"
        if square == "Mul" and variant == "exponent":
            variant = "axis"
        axes = [1] if variant == "axis" else [-1]
        mean = _reduce_mean(b, x, axes)
        centered = b.op("Sub", [mean, x] if variant == "sub-order" else [x, mean])
        if square == "Pow":
            squared = b.op("Pow", [centered, _scalar(b, 3.0 if variant == "exponent" else 2.0)])
        else:
            squared = b.op("Mul", [centered, centered])
        variance = b.op("Add", [_reduce_mean(b, squared, axes), _scalar(b, float(b.choice([1e-5, 1e-12])))])
        deviation = b.op("Sqrt", [variance])
        normed = b.op("Div", [deviation, centered] if variant == "div-order" else [centered, deviation])
        scaled = b.op("Mul", [normed, b.const(b.values([width], np.float32, 0.5, 1.5), "gamma")])
        b.output(b.wrap(b.op("Add", [scaled, b.const(b.values([width]), "beta")])))

    build.__doc__ = _layer_norm.__doc__
    return build


register("LayerNormFusionL1", opsets=(17, 21), optimizers=ORT)(_layer_norm("Pow"))
register("LayerNormFusionL2", opsets=(13, 16), optimizers=EXTENDED)(_layer_norm("Pow"))
register("fuse_layer_norm", opsets=(17, 17), optimizers=SIM)(_layer_norm("Mul"))


def _rms_norm(square: str, gamma_first: bool, near_misses: tuple[str, ...]) -> BuildFunc:
    """RMSNorm (LLaMA's): x / √(mean(x²) + ε) · γ; near-misses: x·Reciprocal(√…) (another spelling,
    which ORT does not match), or the mean over another axis."""

    def build(b: GraphBuilder, near: bool) -> None:
        width = int(b.rng.integers(2, 9))
        x = _tokens(b, width)
        variant = b.choice(near_misses) if near else "fuse"
        squared = b.op("Pow", [x, _scalar(b, 2.0)]) if square == "Pow" else b.op("Mul", [x, x])
        mean = _reduce_mean(b, squared, [1] if variant == "axis" else [-1])
        root = b.op("Sqrt", [b.op("Add", [mean, _scalar(b, float(b.choice([1e-6, 1e-5])))])])
        if variant == "reciprocal":
            normed = b.op("Mul", [x, b.op("Reciprocal", [root])])
        else:
            normed = b.op("Div", [x, root])
        gamma = b.const(b.values([width], np.float32, 0.5, 1.5), "gamma")
        b.output(b.wrap(b.op("Mul", [gamma, normed] if gamma_first else [normed, gamma])))

    build.__doc__ = _rms_norm.__doc__
    return build


register("SimplifiedLayerNormFusion", opsets=(13, 21), optimizers=EXTENDED)(
    _rms_norm("Pow", False, ("reciprocal", "axis"))
)
# onnxsim fuses the Reciprocal spelling too, rightly
register("fuse_rms_norm", opsets=(23, 23), optimizers=SIM)(_rms_norm("Mul", True, ("axis",)))


def _layer_norm_op(b: GraphBuilder, value: str, width: int, axis: int, epsilon: float) -> str:
    """ONNX's LayerNormalization with a random scale [width] and bias [width] (the near-misses'
    axis 1 keeps the 1-D scale, which then broadcasts over the normalized axes)."""
    gamma = b.const(b.values([width], np.float32, 0.5, 1.5), "gamma")
    beta = b.const(b.values([width]), "beta")
    return b.op("LayerNormalization", [value, gamma, beta], axis=axis, epsilon=epsilon)


@register("SkipLayerNormFusion", opsets=(17, 21), optimizers=EXTENDED)
def skip_layer_norm(b: GraphBuilder, near: bool) -> None:
    """Add(A, B) of two same-shaped 3-D values (a residual, maybe with a bias Add) → LayerNorm over
    the last axis: SkipLayerNormalization. Near-miss: B broadcasts ([1,1,W]), or the LayerNorm is
    over axis 1 with a γ of [W] (normalizing more than the last axis)."""
    width = int(b.rng.integers(2, 9))
    shape = [int(b.rng.integers(1, 3)), int(b.rng.integers(2, 5)), width]
    a = b.wrap(b.input(shape, np.float32))
    variant = b.choice(["broadcast", "axis"]) if near else "fuse"
    skip = b.wrap(b.input([1, 1, width] if variant == "broadcast" else shape, np.float32))
    if not near and b.chance():
        a = b.op("Add", [a, b.const(b.values([width]), "bias")])
    total = b.op("Add", [a, skip])
    normed = _layer_norm_op(b, total, width, 1 if variant == "axis" else -1, 1e-5)
    b.output(b.wrap(normed))


@register("BiasSkipLayerNormFusion", optimizers=EXTENDED)
def bias_skip_layer_norm(b: GraphBuilder, near: bool) -> None:
    """MatMul → Add(bias[W]) → ORT's SkipLayerNormalization: the bias moves into it; near-miss: the
    bias is [1,1,W]."""
    width = int(b.rng.integers(2, 9))
    shape = [int(b.rng.integers(1, 3)), int(b.rng.integers(2, 5)), width]
    a = b.wrap(b.input(shape, np.float32))
    biased = b.op(
        "Add",
        [
            b.op("MatMul", [a, b.const(b.values([width, width]), "w")]),
            b.const(b.values([1, 1, width] if near else [width]), "bias"),
        ],
    )
    skip = b.wrap(b.input(shape, np.float32))
    inputs = [biased, skip] if b.chance() else [skip, biased]
    normed = b.op(
        "SkipLayerNormalization",
        [
            *inputs,
            b.const(b.values([width], np.float32, 0.5, 1.5), "gamma"),
            b.const(b.values([width]), "beta"),
        ],
        domain=MICROSOFT,
        epsilon=1e-5,
    )
    b.annotate(normed, np.float32, shape)
    b.output(b.wrap(normed))


@register("EmbedLayerNormFusion", opsets=(17, 21), optimizers=EXTENDED)
def embed_layer_norm(b: GraphBuilder, near: bool) -> None:
    """BERT's embeddings: Gather(words, ids) + Gather(positions, 0..S-1) + Gather(segments, seg) →
    LayerNorm → ORT's Attention: EmbedLayerNormalization. Near-miss: positions that are not 0..S-1,
    or the LayerNorm over axis 1 (normalizing more than the hidden axis)."""
    batch, sequence = int(b.rng.integers(1, 3)), int(b.rng.integers(2, 5))
    heads = int(b.rng.integers(1, 3))
    width = heads * int(b.rng.integers(2, 5))
    vocabulary = int(b.rng.integers(4, 12))
    ids = b.input([batch, sequence], np.int64, 0, vocabulary - 1)
    segments = b.input([batch, sequence], np.int64, 0, 1)
    variant = b.choice(["positions", "axis"]) if near else "fuse"
    positions = np.tile(np.arange(sequence, dtype=np.int64), (batch, 1))
    if variant == "positions":
        positions = positions[:, ::-1].copy()
    words = b.op("Gather", [b.const(b.values([vocabulary, width]), "words"), ids])
    placed = b.op(
        "Gather", [b.const(b.values([sequence + 2, width]), "positions"), b.const(positions, "pos")]
    )
    typed = b.op("Gather", [b.const(b.values([2, width]), "segments"), segments])
    total = b.op("Add", [b.op("Add", [words, placed]), typed])
    normed = _layer_norm_op(b, total, width, 1 if variant == "axis" else -1, 1e-12)
    attended = b.op(
        "Attention",
        [
            normed,
            b.const(b.values([width, 3 * width], np.float32, -0.3, 0.3), "qkv"),
            b.const(b.values([3 * width]), "qkv_bias"),
        ],
        domain=MICROSOFT,
        num_heads=heads,
    )
    b.annotate(attended, np.float32, [batch, sequence, width])
    b.output(b.wrap(attended))


# --- attention ----------------------------------------------------------------------------------


def _split3(b: GraphBuilder, value: str, axis: int) -> list[str]:
    """Split into three equal parts: sizes as an input before opset 18, num_outputs after."""
    if b.opset >= 18:
        return list(b.op("Split", [value], outputs=3, axis=axis, num_outputs=3))
    return list(b.op("Split", [value, b.const(np.array([1, 1, 1], np.int64), "split")], outputs=3, axis=axis))


@register("AttentionFusion", opsets=(13, 19), optimizers=EXTENDED)
def attention_packed(b: GraphBuilder, near: bool) -> None:
    """Self-attention with one packed QKV projection split in three (MobileCLIP's export), scaled
    Q·Kᵀ, Softmax, ·V, the output projection: MultiHeadAttention. (BERT's form hangs off a
    LayerNormalization of opset 1, which no valid model of opset 13 and later has.) Near-miss: the
    Softmax axis spelled 3 instead of -1, or the projection's result is a graph output."""
    heads, head = int(b.choice([1, 2])), int(b.choice([2, 4]))
    width = heads * head
    height, breadth = b.dims(2, 1, 3)
    sequence = height * breadth
    image = b.wrap(b.input([1, width, height, breadth], np.float32))
    tokens = b.op(
        "Transpose",
        [b.op("Reshape", [image, b.const(np.array([1, width, sequence], np.int64), "s")])],
        perm=[0, 2, 1],
    )
    packed = b.op("MatMul", [tokens, b.const(b.values([width, 3 * width], np.float32, -0.5, 0.5), "qkv")])
    q, k, v = _split3(
        b, b.op("Reshape", [packed, b.const(np.array([1, sequence, 3, heads, head], np.int64), "s")]), axis=2
    )
    squeeze0 = b.const(np.array([0], np.int64), "axes")
    q = b.op(
        "Mul",
        [
            b.op("Squeeze", [b.op("Transpose", [q], perm=[2, 0, 3, 1, 4]), squeeze0]),
            _scalar(b, 1.0 / math.sqrt(head)),
        ],
    )
    k = b.op("Transpose", [b.op("Squeeze", [k, b.const(np.array([2], np.int64), "axes")])], perm=[0, 2, 3, 1])
    v = b.op("Squeeze", [b.op("Transpose", [v], perm=[2, 0, 3, 1, 4]), squeeze0])
    variant = b.choice(["axis", "graph-output"]) if near else "fuse"
    weights = b.op("Softmax", [b.op("MatMul", [q, k])], axis=3 if variant == "axis" else -1)
    context = b.op("Transpose", [b.op("MatMul", [weights, v])], perm=[0, 2, 1, 3])
    context = b.op("Reshape", [context, b.const(np.array([1, sequence, width], np.int64), "s")])
    projected = b.op(
        "Add",
        [
            b.op("MatMul", [context, b.const(b.values([width, width]), "wo")]),
            b.const(b.values([width]), "bo"),
        ],
    )
    b.output(projected if variant == "graph-output" else b.op("Identity", [projected]))


def _heads(b: GraphBuilder, value: str, shape: list[int], perm: list[int]) -> str:
    return b.op("Transpose", [b.op("Reshape", [value, b.const(np.array(shape, np.int64), "s")])], perm=perm)


@register("fuse_attention", optimizers=SIM)
def attention_separate(b: GraphBuilder, near: bool) -> None:
    """Self-attention with separate Q, K, V projections (BERT's, GPT's): MatMul → Reshape →
    Transpose per head, Q·Kᵀ / √d, Softmax, ·V, back and the output projection: ORT's Attention.
    Near-miss: K and V read another input (cross-attention)."""
    batch, sequence = int(b.rng.integers(1, 3)), int(b.rng.integers(2, 5))
    heads, head = int(b.choice([1, 2])), int(b.choice([2, 4]))
    width = heads * head
    x = b.wrap(b.input([batch, sequence, width], np.float32))
    memory = b.wrap(b.input([batch, sequence, width], np.float32)) if near else x
    split = [batch, sequence, heads, head]
    q = _heads(b, b.op("MatMul", [x, b.const(b.values([width, width]), "wq")]), split, [0, 2, 1, 3])
    k = _heads(b, b.op("MatMul", [memory, b.const(b.values([width, width]), "wk")]), split, [0, 2, 3, 1])
    v = _heads(b, b.op("MatMul", [memory, b.const(b.values([width, width]), "wv")]), split, [0, 2, 1, 3])
    scores = b.op("Div", [b.op("MatMul", [q, k]), _scalar(b, math.sqrt(head))])
    context = b.op("Transpose", [b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])], perm=[0, 2, 1, 3])
    context = b.op("Reshape", [context, b.const(np.array([batch, sequence, width], np.int64), "s")])
    b.output(b.wrap(b.op("MatMul", [context, b.const(b.values([width, width]), "wo")])))


@register("fuse_gqa", optimizers=SIM)
def grouped_query_attention(b: GraphBuilder, near: bool) -> None:
    """Grouped-query attention with a causal mask (LLaMA's export): K and V heads repeated for the
    query heads (Unsqueeze → Expand → Reshape), Q·Kᵀ / √d + mask, Softmax, ·V: GroupQueryAttention.
    The head size is 8 (ORT's kernel takes multiples of 8). Near-miss: the mask is all zeros (no
    causal mask)."""
    sequence = int(b.rng.integers(2, 5))
    kv_heads = int(b.choice([1, 2]))
    heads = kv_heads * int(b.choice([2, 4]))
    head = 8
    x = b.wrap(b.input([1, sequence, heads * head], np.float32))
    q = _heads(
        b,
        b.op("MatMul", [x, b.const(b.values([heads * head, heads * head], np.float32, -0.3, 0.3), "wq")]),
        [1, sequence, heads, head],
        [0, 2, 1, 3],
    )
    repeat = heads // kv_heads

    def grouped(stem: str) -> str:
        value = _heads(
            b,
            b.op(
                "MatMul", [x, b.const(b.values([heads * head, kv_heads * head], np.float32, -0.3, 0.3), stem)]
            ),
            [1, sequence, kv_heads, head],
            [0, 2, 1, 3],
        )
        value = b.op("Unsqueeze", [value, b.const(np.array([2], np.int64), "axes")])
        value = b.op(
            "Expand", [value, b.const(np.array([1, kv_heads, repeat, sequence, head], np.int64), "s")]
        )
        return b.op("Reshape", [value, b.const(np.array([1, heads, sequence, head], np.int64), "s")])

    k, v = grouped("wk"), grouped("wv")
    scores = b.op(
        "Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]), _scalar(b, math.sqrt(head))]
    )
    mask = np.zeros([1, 1, sequence, sequence], np.float32)
    if not near:
        mask[0, 0][np.triu_indices(sequence, 1)] = -np.inf
    weights = b.op("Softmax", [b.op("Add", [scores, b.const(mask, "mask")])], axis=-1)
    context = b.op("Transpose", [b.op("MatMul", [weights, v])], perm=[0, 2, 1, 3])
    context = b.op("Reshape", [context, b.const(np.array([1, sequence, heads * head], np.int64), "s")])
    b.output(b.wrap(b.op("MatMul", [context, b.const(b.values([heads * head, heads * head]), "wo")])))


@register("fuse_rope", opsets=(23, 23), optimizers=SIM)
def rotary_embedding(b: GraphBuilder, near: bool) -> None:
    """Rotary embeddings as LLaMA's export writes them: x·cos(θ) + rotate_half(x)·sin(θ), θ the
    angles concatenated with themselves: RotaryEmbedding. Near-miss: the two halves of θ differ."""
    heads, sequence = int(b.rng.integers(1, 3)), int(b.rng.integers(2, 5))
    half = int(b.rng.integers(1, 4))
    x = b.wrap(b.input([1, heads, sequence, 2 * half], np.float32))
    angles = b.input([1, sequence, half], np.float32, 0, 3)
    other = b.input([1, sequence, half], np.float32, 0, 3) if near else angles
    both = b.op("Concat", [angles, other], axis=-1)
    axes = b.const(np.array([1], np.int64), "axes")
    cos = b.op("Unsqueeze", [b.op("Cos", [both]), axes])
    sin = b.op("Unsqueeze", [b.op("Sin", [both]), axes])
    last = b.const(np.array([-1], np.int64), "axes")
    low = b.op(
        "Slice", [x, b.const(np.array([0], np.int64), "s"), b.const(np.array([half], np.int64), "e"), last]
    )
    high = b.op(
        "Slice",
        [x, b.const(np.array([half], np.int64), "s"), b.const(np.array([2 * half], np.int64), "e"), last],
    )
    rotated = b.op("Concat", [b.op("Neg", [high]), low], axis=-1)
    b.output(b.wrap(b.op("Add", [b.op("Mul", [x, cos]), b.op("Mul", [rotated, sin])])))


@register("fuse_lp_normalization", optimizers=SIM)
def lp_normalization(b: GraphBuilder, near: bool) -> None:
    """x / ReduceL2(x, axis, keepdims=1): LpNormalization; near-miss: keepdims=0 and an Unsqueeze."""
    rank = int(b.rng.integers(2, 4))
    x = b.wrap(b.input(b.dims(rank, 2, 4), np.float32, 0.5, 2))
    axis = int(b.rng.integers(rank))
    if near:
        norm = b.op(
            "Unsqueeze",
            [_reduce(b, "ReduceL2", x, [axis], keepdims=0), b.const(np.array([axis], np.int64), "axes")],
        )
    else:
        norm = _reduce(b, "ReduceL2", x, [axis])
    b.output(b.wrap(b.op("Div", [x, norm])))
