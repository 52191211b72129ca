"""Whole-graph passes: dead code, duplicates, constants, control flow, and the interface rewrites
(renaming, splitting, dtype changes) that are not semantic optimizations."""

from __future__ import annotations

import numpy as np
from onnx import helper

from ditox_ci.control import NOP
from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder, tensor_type


def _branch(b: GraphBuilder, op: str, x: str, dtype: type) -> object:
    """A one-node If branch reading `x` from the enclosing graph."""
    out = b.fresh("branch")
    node = helper.make_node(op, [x], [out], name=b.fresh("sub"))
    return helper.make_graph([node], b.fresh("g"), [],
                             [helper.make_tensor_value_info(out, tensor_type(dtype), None)])


def _if(b: GraphBuilder, cond: str, x: str, dtype: type) -> str:
    then_op, else_op = b.rng.permutation(["Tanh", "Neg", "Sigmoid", "Abs"])[:2]
    return b.op("If", [cond], then_branch=_branch(b, str(then_op), x, dtype),
                else_branch=_branch(b, str(else_op), x, dtype))


@register("eliminate_if_with_const_cond")
def if_const_cond(b: GraphBuilder, near: bool) -> None:
    """If whose condition is a constant initializer or Constant node (true or false); near-miss:
    a condition computed from the input."""
    dtype = b.float_dtype()
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4))), dtype))
    if near:
        total = b.op("ReduceSum", [x], keepdims=0)
        cond = b.op("Greater", [total, b.const(np.array(0.0, dtype), "zero")])
    else:
        flag = np.array(b.chance(), np.bool_)
        cond = b.const(flag, "cond") if b.chance() else b.constant_node(flag)
    b.output(b.wrap(_if(b, cond, x, dtype)))


@register("lift_lexical_references")
def lexical_references(b: GraphBuilder, near: bool) -> None:
    """If branches that read values of the enclosing graph (lexical scope), which the pass records
    in a `__control_inputs` attribute; near-miss: branches computing only from their own
    constants. No initializers: the pass only sees graph inputs and node outputs in scope and
    raises "Unresolved value references" for an initializer that is not also a graph input."""
    dtype = b.float_dtype()
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4))), dtype))
    total = b.op("ReduceSum", [x], keepdims=0)
    cond = b.op("Greater", [total, b.constant_node(np.array(0.0, dtype))])
    if near:
        shape = [1]
        branches = {}
        for key in ("then_branch", "else_branch"):
            out = b.fresh("branch")
            value = helper.make_tensor(b.fresh("t"), tensor_type(dtype), shape,
                                       [float(b.rng.uniform(-1, 1))])
            node = helper.make_node("Constant", [], [out], value=value)
            branches[key] = helper.make_graph(
                [node], b.fresh("g"), [], [helper.make_tensor_value_info(out, tensor_type(dtype),
                                                                         shape)])
        b.output(b.wrap(b.op("Add", [x, b.op("If", [cond], **branches)])))
        return
    b.output(b.wrap(_if(b, cond, x, dtype)))


@register("eliminate_deadend")
def deadend(b: GraphBuilder, near: bool) -> None:
    """Nodes (and chains of nodes) whose results reach no output; near-miss: a node with one used
    and one unused output, which must stay."""
    rank = int(b.rng.integers(1, 4))
    shape = b.dims(rank, 2, 5)
    x = b.wrap(b.input(shape, b.float_dtype()))
    if near:
        values, _ = b.op("TopK", [x, b.const(np.array([1], np.int64), "k")], outputs=2, axis=-1)
        b.output(b.wrap(values))
        return
    dead = x
    for _ in range(int(b.rng.integers(1, 4))):
        dead = b.op(b.choice(["Tanh", "Neg", "Sigmoid"]), [dead])
    b.output(b.wrap(x))


@register("eliminate_common_subexpression")
def common_subexpression(b: GraphBuilder, near: bool) -> None:
    """The same op with the same inputs and attributes computed twice; near-miss: the twin differs
    in one attribute."""
    rank = int(b.rng.integers(2, 4))
    x = b.wrap(b.input(b.dims(rank, 2, 4), b.float_dtype()))
    axis = int(b.rng.integers(rank))
    op = b.choice(["Softmax", "Flatten", "Concat"])
    inputs = [x, x] if op == "Concat" else [x]
    first = b.op(op, inputs, axis=axis)
    other_axis = (axis + 1) % rank if near else axis
    second = b.op(op, inputs, axis=other_axis)
    b.output(b.wrap(first))
    b.output(b.wrap(second))


@register("eliminate_unused_initializer")
def unused_initializer(b: GraphBuilder, near: bool) -> None:
    """An initializer no node reads; near-miss: every initializer is read."""
    shape = b.dims(int(b.rng.integers(1, 3)), 2, 4)
    dtype = b.float_dtype()
    x = b.wrap(b.input(shape, dtype))
    bias = b.const(b.values(shape, dtype), "bias")
    if not near:
        b.const(b.values(b.dims(2), dtype), "unused")
    b.output(b.wrap(b.op("Add", [x, bias])))


@register("eliminate_duplicate_initializer")
def duplicate_initializer(b: GraphBuilder, near: bool) -> None:
    """Two initializers with equal dtype, shape and values read by different nodes; near-miss: the
    same numbers with another shape."""
    shape = b.dims(2, 2, 4)
    dtype = b.float_dtype()
    x = b.wrap(b.input(shape, dtype))
    data = b.values(shape, dtype)
    first = b.const(data, "w")
    twin = data.reshape(1, *shape) if near else data.copy()
    left = b.op("Add", [x, first])
    right = b.op("Mul", [x, b.const(twin, "w")])
    b.output(b.wrap(left))
    b.output(b.wrap(right))


@register("extract_constant_to_initializer", opsets=(12, 21))
def constant_to_initializer(b: GraphBuilder, near: bool) -> None:
    """Constant nodes with a tensor `value`; near-miss: a Constant spelled with value_float or
    value_floats, which the pass does not read."""
    shape = b.dims(int(b.rng.integers(1, 3)), 2, 4)
    x = b.wrap(b.input(shape, np.float32))
    if near:
        const = b.op("Constant", [], value_floats=[float(v) for v in b.values([shape[-1]])]) \
            if b.chance() else b.op("Constant", [], value_float=float(b.rng.uniform(-1, 1)))
    else:
        const = b.constant_node(b.values(shape[int(b.rng.integers(len(shape))):]))
    b.output(b.wrap(b.op(b.choice(["Add", "Mul", "Sub"]), [x, const])))


@register("adjust_add")
def adjust_add(b: GraphBuilder, near: bool) -> None:
    """Add(constant, x): the pass swaps the operands to Add(x, constant); near-miss: already in
    that order."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    dtype = b.float_dtype()
    x = b.wrap(b.input(shape, dtype))
    if b.chance():
        x = b.op("MatMul", [x, b.const(b.values([shape[-1], shape[-1]], dtype), "w")])
    bias = b.const(b.values(shape[int(b.rng.integers(len(shape))):], dtype), "bias")
    b.output(b.wrap(b.op("Add", [x, bias] if near else [bias, x])))


@register("adjust_slice_and_matmul")
def slice_and_matmul(b: GraphBuilder, near: bool) -> None:
    """MatMul(Slice(constant data, constant axes not on the last axis), constant rhs): the pass
    multiplies first and slices after; near-miss: the slice is on the last axis."""
    rows, inner, cols = b.dims(3, 3, 6)
    dtype = np.float32
    data = b.const(b.values([rows, inner], dtype), "data")
    axis = 1 if near else int(b.choice([0, -2]))
    limit = inner if near else rows
    start = int(b.rng.integers(0, 2))
    end = int(b.rng.integers(start + 1, limit + 1))
    bounds = [b.const(np.array([v], np.int64), "s") for v in (start, end, axis)]
    sliced = b.op("Slice", [data, *bounds])
    rhs_rows = end - start if near else inner
    product = b.op("MatMul", [sliced, b.const(b.values([rhs_rows, cols], dtype), "rhs")])
    x = b.wrap(b.input([end - start if not near else rows, cols], dtype))
    b.output(b.wrap(b.op("Add", [x, product])))


@register("rewrite_input_dtype")
def input_dtype(b: GraphBuilder, near: bool) -> None:
    """An int64 graph input (the pass retypes it to int32 behind a Cast); near-miss: an int32
    input, which it leaves alone."""
    rows, cols = b.dims(2, 2, 5)
    table = b.const(b.values([rows, cols], np.float32), "table")
    indices = b.input(b.dims(int(b.rng.integers(1, 3)), 1, 4), np.int32 if near else np.int64,
                      0, rows - 1)
    b.output(b.wrap(b.op("Gather", [table, indices], axis=0)))


@register("rewrite_where")
def rewrite_where(b: GraphBuilder, near: bool) -> None:
    """Where(Not(c), x, y) becomes Where(c, y, x); near-miss: Not(c) also used elsewhere."""
    shape = b.dims(int(b.rng.integers(1, 4)), 2, 4)
    dtype = b.float_dtype()
    x = b.wrap(b.input(shape, dtype))
    y = b.wrap(b.input(shape, dtype))
    negated = b.op("Not", [b.op("Greater", [x, y])])
    b.output(b.wrap(b.op("Where", [negated, x, y])))
    if near:
        b.output(b.op("Cast", [negated], to=tensor_type(dtype)))


@register("rename_input_output")
def rename_input_output(b: GraphBuilder, near: bool) -> None:
    """Graph inputs/outputs not named input_<i>/output_<i> get those names; near-miss: they
    already have them."""
    count = int(b.rng.integers(1, 3))
    shape = b.dims(int(b.rng.integers(1, 3)))
    xs = [b.input(shape, np.float32, name=f"input_{i}" if near else None) for i in range(count)]
    total = xs[0] if count == 1 else b.op("Add", xs)
    b.output(b.op("Tanh", [b.around(total)], out="output_0" if near else None))


@register("set_unique_name_for_nodes")
def unique_node_names(b: GraphBuilder, near: bool) -> None:
    """Nodes without names get unique ones; near-miss: every node is already named."""
    b.name_nodes = near
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4))), b.float_dtype()))
    b.output(b.wrap(x))


def _foldable(b: GraphBuilder) -> tuple[str, list[int]]:
    """An input plus a value computed only from initializers (what split_init/predict cut at)."""
    shape = b.dims(int(b.rng.integers(1, 3)), 2, 4)
    weight = b.op("Tanh", [b.const(b.values(shape), "w")])
    return b.op("Add", [b.wrap(b.input(shape)), weight]), shape


@register("split_init", near_misses=False)
def split_init(b: GraphBuilder, near: bool) -> None:
    """Keeps only the initializer-only part of the graph (the rest is dropped), so it changes
    every model with a node that reads an input: by design, not a semantic rewrite."""
    value, _ = _foldable(b)
    b.output(b.wrap(value))


@register("split_predict")
def split_predict(b: GraphBuilder, near: bool) -> None:
    """Drops the initializer-only part and takes its results as inputs instead; near-miss: no
    node computes from initializers alone."""
    if near:
        x = b.wrap(b.input(b.dims(2)))
        b.output(b.wrap(x))
        return
    value, _ = _foldable(b)
    b.output(b.wrap(value))


@register(NOP, fires=False, near_misses=False)
def nop(b: GraphBuilder, near: bool) -> None:
    """The pass that does nothing: any model, which must come back byte for byte."""
    dtype = b.float_dtype()
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4))), dtype))
    b.output(b.wrap(b.op("Add", [x, b.const(np.ones([1], dtype))])))
