"""ONNX Runtime's graph transformers that fold ops of any model (not the transformer-model or
quantization fusions, which have their own families): MatMul+Add into Gemm, activations into
FusedConv/FusedGemm, scales and transposes into FusedMatMul, Gather/Slice into Split, the Focus
Slices into SpaceToDepth, Reshape shape subgraphs, Transpose pairs. Patterns and near-misses follow
each transformer's code and its tests in `onnxruntime/test/optimizer`."""

from __future__ import annotations

import numpy as np

from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder
from ditox_ci.fuzz.ort_rules import INT64_MAX, ORT

EXTENDED = ("onnxruntime-extended",)


@register("MatMulAddFusion", optimizers=ORT)
def matmul_add(b: GraphBuilder, near: bool) -> None:
    """MatMul(A, constant 2-D B) → Add(bias): a Gemm (with Reshapes around it for a static N-D A);
    near-miss: an N-D A whose first dim is dynamic, or a one-element bias."""
    m, k, n = b.dims(3, 2, 5)
    n = max(n, 2)
    rank = int(b.rng.integers(2, 4))
    lead = b.dims(rank - 2, 2, 3)
    variant = b.choice(["dynamic", "scalar-bias"]) if near else "fuse"
    if variant == "dynamic":
        lead = lead or [2]
        a = b.input([*lead, m, k], np.float32, symbolic={0: "batch"})
    else:
        a = b.input([*lead, m, k], np.float32)
    product = b.op("MatMul", [b.wrap(a), b.const(b.values([k, n]), "w")])
    # an N-D A takes a bias [N] only
    bias_shape = [1] if variant == "scalar-bias" else [n] if lead else b.choice([[n], [1, n], [m, n], [m, 1]])
    b.output(b.wrap(b.op("Add", [product, b.const(b.values(bias_shape), "bias")])))


@register("ReshapeFusion", opsets=(14, 21), optimizers=ORT)
def reshape_shape_subgraph(b: GraphBuilder, near: bool) -> None:
    """Reshape(x, Concat(Unsqueeze(Gather(Shape(x), i)), …, constants)): a constant shape with 0
    for the dims it copies; or Reshape(Reshape(x)). Near-miss: the Reshape has allowzero=1, where a 0
    is a 0."""
    shape = b.dims(int(b.rng.integers(3, 5)), 2, 4)
    x = b.wrap(b.input(shape, np.float32))
    allowzero = {"allowzero": 1} if near else {}
    if b.chance(0.3):
        first = b.op("Reshape", [x, b.const(np.array([shape[0], -1], np.int64), "shape")], **allowzero)
        b.output(b.wrap(b.op("Reshape", [first, b.const(np.array([-1], np.int64), "shape")], **allowzero)))
        return
    kept = int(b.rng.integers(1, len(shape) - 1))
    parts = []
    for axis in range(kept):
        dim = b.op("Gather", [b.op("Shape", [x]), b.const(np.array(axis, np.int64), "i")], axis=0)
        parts.append(b.op("Unsqueeze", [dim, b.const(np.array([0], np.int64), "axes")]))
    parts.append(b.const(np.array([-1], np.int64), "rest"))
    b.output(b.wrap(b.op("Reshape", [x, b.op("Concat", parts, axis=0)], **allowzero)))


@register("SliceConcatToSpaceToDepthFusion", optimizers=ORT)
def space_to_depth(b: GraphBuilder, near: bool) -> None:
    """Four Slices with step 2 on H and W at offsets (0|1, 0|1) → Concat on channels (YOLOv5's
    Focus): SpaceToDepth, plus a Gather for another order; near-miss: one Slice stops before H's end."""
    x = b.wrap(b.input([1, int(b.rng.integers(1, 4)), *(2 * d for d in b.dims(2, 2, 4))], np.float32))
    offsets = [(0, 0), (0, 1), (1, 0), (1, 1)]
    if b.chance():
        offsets = [(0, 0), (1, 0), (0, 1), (1, 1)]
    slices = []
    for h, w in offsets:
        ends = [4 if near and (h, w) == (1, 1) else INT64_MAX, INT64_MAX]
        inputs = [
            x,
            b.const(np.array([h, w], np.int64), "starts"),
            b.const(np.array(ends, np.int64), "ends"),
            b.const(np.array([2, 3], np.int64), "axes"),
            b.const(np.array([2, 2], np.int64), "steps"),
        ]
        slices.append(b.op("Slice", inputs))
    if near:
        slices = [
            b.op(
                "Slice",
                [
                    s,
                    b.const(np.array([0, 0], np.int64), "starts"),
                    b.const(np.array([1, 1], np.int64), "ends"),
                    b.const(np.array([2, 3], np.int64), "axes"),
                ],
            )
            for s in slices
        ]
    b.output(b.wrap(b.op("Concat", slices, axis=1)))


def _cancelling_transposes(b: GraphBuilder) -> None:
    """Transpose, maybe elementwise ops, then the inverse Transpose: both go."""
    x = b.wrap(b.input(b.dims(4, 2, 4), np.float32))
    perm = [int(p) for p in b.rng.permutation(4)]
    while perm == sorted(perm):
        perm = [int(p) for p in b.rng.permutation(4)]
    value = b.op("Transpose", [x], perm=perm)
    for _ in range(int(b.rng.integers(0, 3))):
        value = b.op(b.choice(["Relu", "Sigmoid", "Neg"]), [value])
    inverse = [int(i) for i in np.argsort(perm)]
    b.output(b.wrap(b.op("Transpose", [value], perm=inverse)))


@register("TransposeOptimizer", optimizers=ORT)
def transposes(b: GraphBuilder, near: bool) -> None:
    """Transposes that cancel, pushed through elementwise ops; near-miss: a lone Transpose into a
    MatMul, which has nothing to cancel against."""
    if not near:
        _cancelling_transposes(b)
        return
    m, k = b.dims(2, 2, 5)
    transposed = b.op("Transpose", [b.wrap(b.input([k, m], np.float32))], perm=[1, 0])
    b.output(b.wrap(b.op("MatMul", [transposed, b.wrap(b.input([k, m], np.float32))])))


@register("TransposeOptimizer_CPUExecutionProvider", optimizers=EXTENDED)
def transposes_cpu(b: GraphBuilder, near: bool) -> None:
    """The CPU's own handlers: a uint8 MaxPool between NHWC→NCHW and back becomes NhwcMaxPool; or
    the generic cancelling pair. Near-miss: the same with float data, which has no NHWC kernel."""
    if not near and b.chance(0.3):
        _cancelling_transposes(b)
        return
    shape = [1, *b.dims(2, 4, 6), int(b.rng.integers(1, 4))]
    x = b.input(shape, np.float32 if near else np.uint8, 0, 255)
    nchw = b.op("Transpose", [x], perm=[0, 3, 1, 2])
    pooled = b.op("MaxPool", [nchw], kernel_shape=[2, 2], strides=[int(b.choice([1, 2]))] * 2)
    b.output(b.op("Transpose", [pooled], perm=[0, 2, 3, 1]))


_GEMM_ACTIVATIONS = {
    "Relu": {},
    "Sigmoid": {},
    "Tanh": {},
    "LeakyRelu": {"alpha": 0.1},
    "Elu": {"alpha": 0.5},
    "HardSigmoid": {},
    "Softplus": {},
    "Softsign": {},
    "Selu": {},
}


@register("GemmActivationFusion", optimizers=EXTENDED)
def gemm_activation(b: GraphBuilder, near: bool) -> None:
    """Gemm → an activation: FusedGemm; near-miss: the Gemm's result is read elsewhere too."""
    m, k, n = b.dims(3, 2, 5)
    inputs = [b.wrap(b.input([m, k], np.float32)), b.const(b.values([k, n]), "w")]
    if b.chance():
        inputs.append(b.const(b.values([n]), "c"))
    product = b.op("Gemm", inputs)
    activation = b.choice(sorted(_GEMM_ACTIVATIONS))
    b.output(b.wrap(b.op(activation, [product], **_GEMM_ACTIVATIONS[activation])))
    if near:
        b.output(b.op("Neg", [product]))


@register("ConvActivationFusion", optimizers=EXTENDED)
def conv_activation(b: GraphBuilder, near: bool) -> None:
    """Conv → Relu, Sigmoid, Tanh, LeakyRelu, HardSigmoid or Clip with constant bounds: FusedConv;
    near-miss: the Clip's max is a graph input, or the Conv's result is read elsewhere too."""
    channels, out_channels = b.dims(2, 1, 3)
    x = b.wrap(b.input([1, channels, *b.dims(2, 4, 6)], np.float32))
    conv = b.op(
        "Conv",
        [
            x,
            b.const(b.values([out_channels, channels, 3, 3], np.float32, -0.5, 0.5), "w"),
            b.const(b.values([out_channels]), "bias"),
        ],
        pads=[1, 1, 1, 1],
    )
    variant = (
        b.choice(["clip-input", "shared"])
        if near
        else b.choice(["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Clip"])
    )
    if variant in ("Clip", "clip-input"):
        high = (
            b.input([], np.float32, 1, 6)
            if variant == "clip-input"
            else b.const(np.array(6.0, np.float32), "max")
        )
        activated = b.op("Clip", [conv, b.const(np.array(0.0, np.float32), "min"), high])
    elif variant == "shared":
        activated = b.op("Relu", [conv])
        b.output(b.op("Neg", [conv]))
    else:
        activated = b.op(variant, [conv], **({"alpha": 0.1} if variant == "LeakyRelu" else {}))
    b.output(b.wrap(activated))


@register("GatherSliceToSplitFusion", optimizers=EXTENDED)
def gathers_to_split(b: GraphBuilder, near: bool) -> None:
    """Gathers (scalar or [1] indices) and Slices of one value that tile an axis exactly: one
    Split; near-miss: a piece of the axis is left out."""
    rank = int(b.rng.integers(2, 4))
    shape = b.dims(rank, 2, 4)
    axis = int(b.rng.integers(rank))
    shape[axis] = int(b.rng.integers(3, 6))
    x = b.op("Relu", [b.wrap(b.input(shape, np.float32))])
    position = 0
    end = shape[axis] - (1 if near else 0)
    while position < end:
        # two pieces at least: a first one that does not take the whole axis
        width = int(b.rng.integers(1, end - position + (0 if position == 0 else 1)))
        if width == 1 and b.chance():
            index = np.array(position if b.chance() else [position], np.int64)
            piece = b.op("Gather", [x, b.const(index, "i")], axis=axis)
        else:
            piece = b.op(
                "Slice",
                [
                    x,
                    b.const(np.array([position], np.int64), "starts"),
                    b.const(np.array([position + width], np.int64), "ends"),
                    b.const(np.array([axis], np.int64), "axes"),
                ],
            )
        b.output(b.op("Neg", [piece]))
        position += width


@register("GatherToSliceFusion", optimizers=EXTENDED)
def range_gather(b: GraphBuilder, near: bool) -> None:
    """Gather with Range(start, limit, delta) indices: a Slice. Near-miss: a Range with a negative
    start or delta, whose Gather indices wrap around but whose Slice bounds do not (ORT does not
    check the values)."""
    rank = int(b.rng.integers(2, 4))
    shape = b.dims(rank, 3, 6)
    axis = int(b.rng.integers(rank))
    x = b.wrap(b.input(shape, np.float32))
    size = shape[axis]
    if near:
        start, limit, delta = b.choice([(-size, 0, 1), (size - 1, -1, -1), (-2, size - 2, 1)])
    else:
        start = int(b.rng.integers(0, size - 1))
        limit = int(b.rng.integers(start + 1, size + 1))
        delta = int(b.choice([1, 1, 2]))
    bounds = [
        b.const(np.array(v, np.int64), n) for v, n in ((start, "start"), (limit, "limit"), (delta, "delta"))
    ]
    b.output(b.wrap(b.op("Gather", [x, b.op("Range", bounds)], axis=axis)))


@register("MatmulTransposeFusion", optimizers=EXTENDED)
def matmul_transpose(b: GraphBuilder, near: bool) -> None:
    """Transpose swapping the last two axes (or moving a batch axis) → MatMul: FusedMatMul with
    transA/transB/transBatch; near-miss: a permutation that moves the last axis to the front."""
    batch, m, k, n = b.dims(4, 2, 4)
    a = b.wrap(b.input([batch, m, k], np.float32))
    if near:
        other = b.wrap(b.input([k, n, batch], np.float32))
        perm = [2, 0, 1]
    elif b.chance(0.3):
        other = b.wrap(b.input([k, batch, n], np.float32))
        perm = [1, 0, 2]
    else:
        other = b.wrap(b.input([batch, n, k], np.float32))
        perm = [0, 2, 1]
    transposed = b.op("Transpose", [other], perm=perm)
    b.output(b.wrap(b.op("MatMul", [a, transposed] if b.chance(0.7) or near else [transposed, a])))


@register("MatMulScaleFusion", optimizers=EXTENDED)
def matmul_scale(b: GraphBuilder, near: bool) -> None:
    """Mul or Div by a one-element constant before or after a MatMul: FusedMatMul's alpha;
    near-miss: the scale is a vector."""
    m, k, n = b.dims(3, 2, 5)
    a = b.wrap(b.input([int(b.rng.integers(1, 3)), m, k], np.float32))
    factor = float(b.choice([0.125, 0.5, 2.0, 8.0]))
    scale = b.const(
        np.full([k if near else 1], factor, np.float32)
        if near or b.chance()
        else np.array(factor, np.float32),
        "scale",
    )
    op = b.choice(["Mul", "Div"])
    weight = b.const(b.values([k, n]), "w")
    if b.chance():
        b.output(b.wrap(b.op("MatMul", [b.op(op, [a, scale]), weight])))
    else:
        product = b.op("MatMul", [a, weight])
        if near:
            scale = b.const(np.full([n], factor, np.float32), "scale")
        b.output(b.wrap(b.op(op, [product, scale])))
