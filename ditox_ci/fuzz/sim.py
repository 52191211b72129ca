"""onnxsim's own passes (those it adds to the onnx-optimizer passes it bundles): no-op reductions and
softmaxes, sequences and optionals built and taken apart, loops with a constant trip count,
chains of Mul, Reduce and Reshape, scales folded into convolutions, reshape families, ArgMax with
select_last_index, boolean Where, batched MatMul+Add into Gemm. Shapes are declared (onnxsim's
single passes run without its shape inference)."""

from __future__ import annotations

import numpy as np
from onnx import helper

from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder, tensor_type

SIM = ("onnxsim",)


def _i(b: GraphBuilder, value: int | list[int]) -> str:
    return b.const(np.array(value, np.int64), "i")


@register("fuse_consecutive_mul", optimizers=SIM)
def consecutive_mul(b: GraphBuilder, near: bool) -> None:
    """Mul(Mul(x, c1), c2) with constants: one Mul by c1·c2; near-miss: the first product is read
    elsewhere too."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    x = b.wrap(b.input(shape, np.float32))
    first = b.op("Mul", [x, b.const(b.values(shape[-1:]), "c")])
    b.output(b.wrap(b.op("Mul", [first, b.const(b.values(shape[-1:]), "c")])))
    if near:
        b.output(b.op("Neg", [first]))


@register("fuse_consecutive_reduce", opsets=(13, 17), optimizers=SIM)
def consecutive_reduce(b: GraphBuilder, near: bool) -> None:
    """ReduceMean or ReduceSum twice (keepdims) over other axes: one reduction over both; near-miss:
    ReduceSumSquare, which squares twice."""
    x = b.wrap(b.input(b.dims(3, 2, 4), np.float32))
    op = "ReduceSumSquare" if near else b.choice(["ReduceMean", "ReduceMax", "ReduceMin"])
    first = b.op(op, [x], axes=[1], keepdims=1)
    b.output(b.wrap(b.op(op, [first], axes=[2], keepdims=1)))


@register("fuse_consecutive_reshapes", optimizers=SIM)
def consecutive_reshapes(b: GraphBuilder, near: bool) -> None:
    """Reshape(Reshape(x, s1), s2) with constant shapes: one Reshape to s2; near-miss: s2 copies a dim
    of s1 with a 0, which means another dim once the first Reshape goes."""
    a, c, d = b.dims(3, 2, 4)
    x = b.wrap(b.input([a, c, d], np.float32))
    inner = b.op("Reshape", [x, _i(b, [a * c, d])])
    b.output(b.wrap(b.op("Reshape", [inner, _i(b, [0, d] if near else [d, a * c])])))


def _conv(b: GraphBuilder, x: str, channels: int, out_channels: int, group: int = 1) -> str:
    weight = b.const(b.values([out_channels, channels // group, 3, 3], np.float32, -0.5, 0.5), "w")
    return b.op("Conv", [x, weight, b.const(b.values([out_channels]), "bias")], group=group)


@register("fuse_mul_into_conv", optimizers=SIM)
def mul_after_conv(b: GraphBuilder, near: bool) -> None:
    """Conv → Mul by a per-output-channel constant ([C,1,1]): scaled weights and bias; near-miss: the
    constant runs along the width ([1,1,1,W])."""
    channels, out_channels = b.dims(2, 1, 3)
    x = b.wrap(b.input([1, channels, 5, 5], np.float32))
    scale = b.const(b.values([1, 1, 1, 3] if near else [out_channels, 1, 1], np.float32, 0.5, 1.5), "s")
    b.output(b.wrap(b.op("Mul", [_conv(b, x, channels, out_channels), scale])))


@register("fuse_preceding_mul_into_conv", optimizers=SIM)
def mul_before_conv(b: GraphBuilder, near: bool) -> None:
    """Mul by a per-input-channel constant → Conv: the scale folds into the weights; near-miss: a
    grouped Conv with per-channel scales."""
    channels = 2 * int(b.rng.integers(1, 3))
    x = b.wrap(b.input([1, channels, 5, 5], np.float32))
    scaled = b.op("Mul", [x, b.const(b.values([channels, 1, 1], np.float32, 0.5, 1.5), "s")])
    b.output(b.wrap(_conv(b, scaled, channels, channels, group=2 if near else 1)))


@register("fuse_reshape_family", optimizers=SIM)
def reshape_family(b: GraphBuilder, near: bool) -> None:
    """Flatten, Squeeze, Unsqueeze or Reshape in a row: one Reshape to the final static shape;
    near-miss: two dims of the input are dynamic (no single shape to write)."""
    a, c, d = b.dims(3, 2, 4)
    symbolic = {0: "n", 1: "m"} if near else None
    x = b.op("Tanh", [b.input([a, c, d], np.float32, symbolic=symbolic)])
    flat = b.op("Flatten", [x], axis=1)
    b.output(b.wrap(b.op("Unsqueeze", [flat, _i(b, [0])])))


@register("fuse_split_gather_concat", optimizers=SIM)
def split_gather_concat(b: GraphBuilder, near: bool) -> None:
    """Split indices in parts, Gather with each, Concat in order: one Gather; near-miss: the Concat
    takes the parts in another order."""
    rows, cols = int(b.rng.integers(3, 6)), int(b.rng.integers(1, 4))
    data = b.wrap(b.input([rows, cols], np.float32))
    count = 2 * int(b.rng.integers(1, 3))
    indices = b.input([count], np.int64, 0, rows - 1)
    parts = b.op("Split", [indices, _i(b, [count // 2, count // 2])], outputs=2, axis=0)
    gathered = [b.op("Gather", [data, part], axis=0) for part in parts]
    b.output(b.wrap(b.op("Concat", gathered[::-1] if near else gathered, axis=0)))


@register("rewrite_arg_reduce_select_last_index", optimizers=SIM)
def arg_select_last(b: GraphBuilder, near: bool) -> None:
    """ArgMax/ArgMin with select_last_index=1: rewritten over the reversed axis; near-miss:
    select_last_index=0."""
    rank = int(b.rng.integers(2, 4))
    x = b.wrap(b.input(b.dims(rank, 2, 4), np.float32))
    op = b.choice(["ArgMax", "ArgMin"])
    result = b.op(
        op,
        [b.op("Round", [x])],
        axis=int(b.rng.integers(rank)),
        keepdims=1,
        select_last_index=0 if near else 1,
    )
    b.output(b.op("Neg", [result]))


@register("rewrite_bool_where", optimizers=SIM)
def bool_where(b: GraphBuilder, near: bool) -> None:
    """Where on booleans (no ONNX Runtime CPU kernel: the reference runner runs the original): Casts
    to int32 around it; near-miss: the values are int32."""
    shape = b.dims(2, 2, 4)
    dtype = np.int32 if near else np.bool_
    condition = b.input(shape, np.bool_)
    a, c = (b.input(shape, dtype, 0, 5) for _ in range(2))
    b.output(b.op("Cast", [b.op("Where", [condition, a, c])], to=tensor_type(np.int64)))


@register("eliminate_nop_reduce", optimizers=SIM)
def reduce_over_one(b: GraphBuilder, near: bool) -> None:
    """A reduction with keepdims over an axis of size 1: the identity; near-miss: the axis has 3."""
    shape = b.dims(3, 2, 4)
    shape[1] = 3 if near else 1
    x = b.wrap(b.input(shape, np.float32))
    op = b.choice(["ReduceMean", "ReduceMax", "ReduceSum"])
    reduced = (
        b.op(op, [x, _i(b, [1])], keepdims=1)
        if op == "ReduceSum" or b.opset >= 18
        else b.op(op, [x], axes=[1], keepdims=1)
    )
    b.output(b.op("Relu", [reduced]))


@register("eliminate_nop_softmax", optimizers=SIM)
def softmax_over_one(b: GraphBuilder, near: bool) -> None:
    """Softmax over an axis of size 1: ones; near-miss: the axis has 3."""
    x = b.wrap(b.input([int(b.rng.integers(2, 4)), 3 if near else 1], np.float32))
    b.output(b.wrap(b.op("Softmax", [x], axis=1)))


@register("eliminate_reshape_around_elementwise", optimizers=SIM)
def reshape_around_elementwise(b: GraphBuilder, near: bool) -> None:
    """Gemm → Reshape → elementwise op → Reshape back → Gemm: the two Reshapes go; near-miss: the
    elementwise result is read elsewhere too."""
    rows, k, width = 6, int(b.rng.integers(2, 5)), int(b.rng.integers(2, 5))
    first = b.op("Gemm", [b.wrap(b.input([rows, k], np.float32)), b.const(b.values([k, width]), "w")])
    shaped = b.op("Reshape", [first, _i(b, [2, 3, width])])
    activated = b.op(b.choice(["Relu", "Tanh", "Sigmoid"]), [shaped])
    back = b.op("Reshape", [activated, _i(b, [-1, width])])
    b.output(b.wrap(b.op("Gemm", [back, b.const(b.values([width, 3]), "w")])))
    if near:
        b.output(b.op("Neg", [activated]))


@register("eliminate_reshape_family_on_constant", optimizers=SIM)
def reshape_of_initializer(b: GraphBuilder, near: bool) -> None:
    """Reshape of an initializer: the initializer reshaped; near-miss: the initializer is read by
    another node too."""
    rows, cols = b.dims(2, 2, 4)
    weight = b.const(b.values([rows, cols]), "w")
    x = b.wrap(b.input([rows * cols], np.float32))
    b.output(b.wrap(b.op("Add", [x, b.op("Reshape", [weight, _i(b, [rows * cols])])])))
    if near:
        b.output(b.op("Neg", [weight]))


def _sequence(b: GraphBuilder, count: int) -> tuple[str, list[int]]:
    shape = b.dims(int(b.rng.integers(1, 3)), 2, 4)
    return b.op("SequenceConstruct", [b.wrap(b.input(shape, np.float32)) for _ in range(count)]), shape


@register("eliminate_sequence_at_construct", optimizers=SIM)
def sequence_at(b: GraphBuilder, near: bool) -> None:
    """SequenceAt(SequenceConstruct(…), constant position): that element; near-miss: the position is
    a graph input."""
    count = int(b.rng.integers(2, 4))
    sequence, _ = _sequence(b, count)
    position = b.input([], np.int64, 0, count - 1) if near else b.const(np.array(count - 1, np.int64), "at")
    b.output(b.op("Relu", [b.op("SequenceAt", [sequence, position])]))


@register("eliminate_sequence_length_construct", optimizers=SIM)
def sequence_length(b: GraphBuilder, near: bool) -> None:
    """SequenceLength(SequenceConstruct(…)): a constant; near-miss: the sequence grows by a
    SequenceInsert first."""
    sequence, shape = _sequence(b, int(b.rng.integers(2, 4)))
    if near:
        sequence = b.op("SequenceInsert", [sequence, b.wrap(b.input(shape, np.float32))])
    b.output(b.op("Neg", [b.op("SequenceLength", [sequence])]))


@register("eliminate_optional_get_element", opsets=(18, 21), near_misses=False, optimizers=SIM)
def optional_get(b: GraphBuilder, near: bool) -> None:
    """OptionalGetElement(Optional(x)): x."""
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 3)), 2, 4), np.float32))
    b.output(b.op("Relu", [b.op("OptionalGetElement", [b.op("Optional", [x])])]))


@register("eliminate_optional_has_element", opsets=(18, 21), near_misses=False, optimizers=SIM)
def optional_has(b: GraphBuilder, near: bool) -> None:
    """OptionalHasElement(Optional(x)): a constant true."""
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 3)), 2, 4), np.float32))
    flag = b.op("OptionalHasElement", [b.op("Optional", [x])])
    b.output(b.op("Cast", [flag], to=tensor_type(np.float32)))


@register("eliminate_loop_with_const_trip_count", optimizers=SIM)
def constant_trip_loop(b: GraphBuilder, near: bool) -> None:
    """A Loop with a constant trip count and a condition it passes through: unrolled; near-miss: the
    trip count is a graph input."""
    shape = b.dims(int(b.rng.integers(1, 3)), 2, 4)
    x = b.wrap(b.input(shape, np.float32))
    trips = (
        b.input([], np.int64, 1, 3)
        if near
        else b.const(np.array(int(b.rng.integers(1, 4)), np.int64), "trips")
    )
    keep = b.const(np.array(True), "keep")
    index, condition, carried, step, out = (b.fresh(stem) for stem in ("i", "cond", "v", "step", "next"))
    value = helper.make_tensor(b.fresh("one"), 1, [], [float(b.choice([0.5, 1.0]))])
    body = helper.make_graph(
        [
            helper.make_node("Constant", [], [step], value=value),
            helper.make_node("Add", [carried, step], [out]),
        ],
        b.fresh("body"),
        [
            helper.make_tensor_value_info(index, tensor_type(np.int64), []),
            helper.make_tensor_value_info(condition, tensor_type(np.bool_), []),
            helper.make_tensor_value_info(carried, 1, shape),
        ],
        [
            helper.make_tensor_value_info(condition, tensor_type(np.bool_), []),
            helper.make_tensor_value_info(out, 1, shape),
        ],
    )
    looped = b.op("Loop", [trips, keep, x], body=body)
    b.annotate(looped, np.float32, shape)
    b.output(b.wrap(looped))


@register("fuse_matmul_add_bias_into_gemm_batched", optimizers=SIM)
def batched_matmul_add(b: GraphBuilder, near: bool) -> None:
    """MatMul of a 3-D float A and a constant 2-D B → Add(bias[N]): Reshape, Gemm, Reshape; near-miss:
    the same in double (onnxsim fuses float only)."""
    batch, m, k, n = b.dims(4, 2, 4)
    dtype = np.float64 if near else np.float32
    a = b.wrap(b.input([batch, m, k], dtype))
    product = b.op("MatMul", [a, b.const(b.values([k, n], dtype), "w")])
    b.output(b.wrap(b.op("Add", [product, b.const(b.values([n], dtype), "bias")])))
