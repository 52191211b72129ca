"""Rewrites that change a model's numerics and keep its meaning, each with a model of its own, and
the same rewrites done wrong by a hair: what the float64 rule must let through and what it must not.

- BatchNorm folded into the Conv before it, and MatMul + Add made one Gemm: onnxoptimizer's own
  `fuse_bn_into_conv` and `fuse_matmul_add_bias_into_gemm`, on `conv_bn_model` and `matmul_add_model`;
- a division by a constant made a multiplication by its reciprocal (`optimize_reciprocal`, on
  `divide_model`), as compilers do under fast-math;
- a sum of four terms reassociated, `((a + b) + c) + d` into `a + (b + (c + d))`
  (`optimize_reassociated`, on `sum_model`).

Every rewriting pass list applies the planted ones; `optimize_*_off_by` variants do the same with a
relative error of OFF_BY in the constant or term they write: a miscompilation as small as the
tolerances let through. Each model's recorded inputs (`inputs`) are large and of mixed sign, so
that reassociating or refolding moves results by many units in the last place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnxoptimizer
from onnx import TensorProto, helper, numpy_helper

OFF_BY = 1e-4
OPSET = 17


def _model(
    name: str, nodes: list[onnx.NodeProto], inputs: list, outputs: list, weights: list
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def _weight(name: str, values: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(values.astype(np.float32), name)


def conv_bn_model(name: str = "conv_bn") -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    channels = 8
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 12, 12])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, channels, 10, 10])
    weights = [
        _weight("w", rng.standard_normal((channels, 4, 3, 3)) * 3),
        _weight("scale", rng.uniform(0.5, 4, channels)),
        _weight("shift", rng.standard_normal(channels) * 10),
        _weight("mean", rng.standard_normal(channels) * 5),
        _weight("var", rng.uniform(1e-3, 1e-2, channels)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"], epsilon=1e-5),
    ]
    return _model(name, nodes, [x], [y], weights)


def matmul_add_model(name: str = "matmul_add") -> onnx.ModelProto:
    rng = np.random.default_rng(2)
    # long enough a dot product that ONNX Runtime's kernel sums it in blocks: the Gemm adds the bias
    # before the blocks, MatMul + Add after them
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 1024])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 32])
    weights = [
        _weight("w", rng.standard_normal((1024, 32)) * 50),
        _weight("b", rng.standard_normal(32) * 1e4),
    ]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])]
    return _model(name, nodes, [x], [y], weights)


def divide_model(name: str = "divide") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 128])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 128])
    # no power of two: its reciprocal rounds
    divisor = _weight("d", np.linspace(0.3, 7.1, 128))
    return _model(name, [helper.make_node("Div", ["x", "d"], ["y"])], [x], [y], [divisor])


def sum_model(name: str = "sum") -> onnx.ModelProto:
    terms = [helper.make_tensor_value_info(t, TensorProto.FLOAT, [16, 64]) for t in "abcd"]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 64])
    nodes = [
        helper.make_node("Add", ["a", "b"], ["ab"]),
        helper.make_node("Add", ["ab", "c"], ["abc"]),
        helper.make_node("Add", ["abc", "d"], ["y"]),
    ]
    return _model(name, nodes, terms, [y], [])


def inputs(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Large values of mixed sign for each of the model's float inputs."""
    rng = np.random.default_rng(3)
    feed = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feed[value.name] = (rng.standard_normal(shape) * rng.choice([1.0, 30.0, 1e3], shape)).astype(
            np.float32
        )
    return feed


# the model each rewrite is for, and the onnxoptimizer pass that makes it (None: a planted one)
CASES: dict[str, tuple[Callable[[str], onnx.ModelProto], str | None]] = {
    "fuse_bn_into_conv": (conv_bn_model, "fuse_bn_into_conv"),
    "fuse_matmul_add_bias_into_gemm": (matmul_add_model, "fuse_matmul_add_bias_into_gemm"),
    "reciprocal": (divide_model, None),
    "reassociated": (sum_model, None),
}


def _rewriting(passes: Sequence[str]) -> bool:
    return any(name != "nop" for name in passes)


def _reciprocal(model: onnx.ModelProto, off_by: float) -> onnx.ModelProto:
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Div" and node.input[1] in initializers:
            divisor = numpy_helper.to_array(initializers[node.input[1]])
            inverse = (1.0 / divisor.astype(np.float64) * (1 + off_by)).astype(np.float32)
            initializers[node.input[1]].CopyFrom(numpy_helper.from_array(inverse, node.input[1]))
            node.op_type = "Mul"
    return model


def _reassociated(model: onnx.ModelProto, off_by: float) -> onnx.ModelProto:
    """a + (b + (c + d)) in place of ((a + b) + c) + d, with d × (1 + off_by)."""
    del model.graph.node[:]
    nodes = [helper.make_node("Add", ["c", "d"], ["cd"]), helper.make_node("Add", ["b", "cd"], ["bcd"])]
    if off_by:
        model.graph.initializer.append(_weight("nudge", np.array(1 + off_by)))
        nodes.insert(0, helper.make_node("Mul", ["d", "nudge"], ["dn"]))
        nodes[1].input[1] = "dn"
    model.graph.node.extend([*nodes, helper.make_node("Add", ["a", "bcd"], ["y"])])
    return model


def _planted(rewrite: Callable[[onnx.ModelProto, float], onnx.ModelProto], off_by: float) -> Callable:
    def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False) -> onnx.ModelProto:
        result = onnxoptimizer.optimize(model, list(passes), fixed_point)
        return rewrite(result, off_by) if _rewriting(passes) else result

    return optimize


def _folded_off_by(
    model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False
) -> onnx.ModelProto:
    """onnxoptimizer's fold or fusion, its largest float initializer (the weight) then off by OFF_BY."""
    result = onnxoptimizer.optimize(model, list(passes), fixed_point)
    floats = [t for t in result.graph.initializer if t.data_type == TensorProto.FLOAT]
    if _rewriting(passes) and floats:
        weight = max(floats, key=lambda tensor: int(np.prod(tensor.dims)))
        values = numpy_helper.to_array(weight) * (1 + OFF_BY)
        weight.CopyFrom(numpy_helper.from_array(values.astype(np.float32), weight.name))
    return result


optimize_reciprocal = _planted(_reciprocal, 0.0)
optimize_reciprocal_off_by = _planted(_reciprocal, OFF_BY)
optimize_reassociated = _planted(_reassociated, 0.0)
optimize_reassociated_off_by = _planted(_reassociated, OFF_BY)
optimize_folded_off_by = _folded_off_by


def get_available_passes() -> list[str]:
    return ["nop", "eliminate_identity", "fuse_bn_into_conv", "fuse_matmul_add_bias_into_gemm"]


def get_fuse_and_elimination_passes() -> list[str]:
    return ["eliminate_identity", "fuse_bn_into_conv", "fuse_matmul_add_bias_into_gemm"]
