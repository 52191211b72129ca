"""Integer inputs drawn for what consumes them, so that they reach what the passes change.

Drawn blindly in [0, --dynamic-dim), a Gather over 100 rows reads rows 0 and 1 only, a Reshape's
shape input makes the original fail, and negative indices are never tried. Here each integer graph
input is drawn by its first consumer that gives it a meaning: indices within the axis they index
(negative ones included; token ids into an embedding table within its rows), shapes from the
shapes of the tensors they reshape or expand, Slice bounds within the sliced axis, TopK's k within
its axis. Shapes come from the declared graph inputs, the initializers and ONNX shape inference;
symbolic dimensions are `dynamic_dim`, as for the random tensors themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

Shape = tuple[int, ...]


def dim_size(dim: onnx.TensorShapeProto.Dimension, dynamic_dim: int) -> int:
    """A dimension's size to draw at: its value, or `dynamic_dim` when it is symbolic, unset or
    negative (`dim_value: -1` passes the checker and means "unknown" to many exporters)."""
    return dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else dynamic_dim


@dataclass(frozen=True)
class GraphShapes:
    """Static shapes and constant values of the main graph's tensors, as far as they are known."""

    shapes: dict[str, Shape]
    constants: dict[str, np.ndarray]
    initializers: frozenset[str]

    @classmethod
    def of(cls, model: onnx.ModelProto, dynamic_dim: int) -> GraphShapes:
        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
        except Exception:  # a model shape inference rejects still gets the declared shapes
            inferred = model.graph
        shapes: dict[str, Shape] = {}
        for info in [*inferred.value_info, *inferred.input, *inferred.output]:
            tensor = info.type.tensor_type
            if info.type.HasField("tensor_type") and tensor.HasField("shape"):
                shapes[info.name] = tuple(dim_size(d, dynamic_dim) for d in tensor.shape.dim)
        constants = {}
        for initializer in model.graph.initializer:
            shapes[initializer.name] = tuple(initializer.dims)
            if initializer.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
                constants[initializer.name] = onnx.numpy_helper.to_array(initializer)
        names = frozenset(init.name for init in model.graph.initializer)
        return cls(shapes, constants, names)


# (shapes, node, the input's own shape, rng) → the values, or None when this use says nothing
Rule = Callable[[GraphShapes, onnx.NodeProto, Shape, np.random.Generator], np.ndarray | None]
RULES: dict[tuple[str, int], Rule] = {}


def rule(*uses: tuple[str, int]) -> Callable[[Rule], Rule]:
    def register(func: Rule) -> Rule:
        for use in uses:
            RULES[use] = func
        return func

    return register


def _attribute(node: onnx.NodeProto, name: str, default: int) -> int:
    for attribute in node.attribute:
        if attribute.name == name:
            return int(helper.get_attribute_value(attribute))
    return default


def _dim(shape: Shape | None, axis: int) -> int | None:
    if not shape or not -len(shape) <= axis < len(shape):
        return None
    return shape[axis]


@rule(("Gather", 1))
def _gather_indices(
    graph: GraphShapes, node: onnx.NodeProto, own: Shape, rng: np.random.Generator
) -> np.ndarray | None:
    axis = _attribute(node, "axis", 0)
    rows = _dim(graph.shapes.get(node.input[0]), axis)
    if not rows:
        return None
    # rows of a 2-D table the model carries are token ids into an embedding: those are never negative
    table = node.input[0] in graph.initializers and len(graph.shapes[node.input[0]]) == 2 and axis == 0
    return rng.integers(0 if table else -rows, rows, size=own)


@rule(("GatherElements", 1), ("ScatterElements", 1), ("Scatter", 1))
def _element_indices(
    graph: GraphShapes, node: onnx.NodeProto, own: Shape, rng: np.random.Generator
) -> np.ndarray | None:
    size = _dim(graph.shapes.get(node.input[0]), _attribute(node, "axis", 0))
    return rng.integers(-size, size, size=own) if size else None


@rule(("GatherND", 1), ("ScatterND", 1))
def _nd_indices(
    graph: GraphShapes, node: onnx.NodeProto, own: Shape, rng: np.random.Generator
) -> np.ndarray | None:
    data = graph.shapes.get(node.input[0])
    batch = _attribute(node, "batch_dims", 0)
    if not data or not own or batch + own[-1] > len(data):
        return None
    columns = [rng.integers(-data[batch + j], data[batch + j], size=own[:-1]) for j in range(own[-1])]
    return np.stack(columns, axis=-1) if columns else np.zeros(own, np.int64)


@rule(("OneHot", 0))
def _one_hot_indices(
    graph: GraphShapes, node: onnx.NodeProto, own: Shape, rng: np.random.Generator
) -> np.ndarray | None:
    depth = graph.constants.get(node.input[1])
    if depth is None or depth.size != 1 or int(depth.reshape(-1)[0]) < 1:
        return None
    size = int(depth.reshape(-1)[0])
    return rng.integers(-size, size, size=own)


def _fold(shape: Shape, rank: int) -> list[int]:
    """`shape` as `rank` dimensions with the same number of elements."""
    if rank <= 0:
        return []
    if len(shape) >= rank:
        return [*shape[: rank - 1], int(np.prod(shape[rank - 1 :], dtype=np.int64))]
    return [*shape, *([1] * (rank - len(shape)))]


@rule(("Reshape", 1))
def _reshape_shape(
    graph: GraphShapes, node: onnx.NodeProto, own: Shape, rng: np.random.Generator
) -> np.ndarray | None:
    data = graph.shapes.get(node.input[0])
    if data is None or len(own) != 1:
        return None
    target = _fold(data, own[0])
    if target and rng.integers(0, 2):  # sometimes let Reshape infer one dimension, as models do
        target[int(rng.integers(0, len(target)))] = -1
    return np.array(target, dtype=np.int64)


@rule(("Expand", 1))
def _expand_shape(
    graph: GraphShapes, node: onnx.NodeProto, own: Shape, rng: np.random.Generator
) -> np.ndarray | None:
    data = graph.shapes.get(node.input[0])
    if data is None or len(own) != 1:
        return None
    aligned = [*([1] * max(0, own[0] - len(data))), *data][-own[0] :] if own[0] else []
    return np.array(aligned, dtype=np.int64)


@rule(("ConstantOfShape", 0))
def _constant_shape(
    graph: GraphShapes, node: onnx.NodeProto, own: Shape, rng: np.random.Generator
) -> np.ndarray | None:
    return rng.integers(1, 4, size=own) if len(own) == 1 else None


@rule(("Tile", 1))
def _tile_repeats(
    graph: GraphShapes, node: onnx.NodeProto, own: Shape, rng: np.random.Generator
) -> np.ndarray | None:
    return rng.integers(1, 3, size=own) if len(own) == 1 else None


@rule(("TopK", 1))
def _top_k(
    graph: GraphShapes, node: onnx.NodeProto, own: Shape, rng: np.random.Generator
) -> np.ndarray | None:
    size = _dim(graph.shapes.get(node.input[0]), _attribute(node, "axis", -1))
    return np.full(own, rng.integers(1, size + 1)) if size else None


def _slice_axes(graph: GraphShapes, node: onnx.NodeProto, count: int) -> list[int]:
    axes = graph.constants.get(node.input[3]) if len(node.input) > 3 and node.input[3] else None
    if axes is None or axes.size != count:
        return list(range(count))
    return [int(a) for a in axes.reshape(-1)]


@rule(("Slice", 1), ("Slice", 2))
def _slice_bounds(
    graph: GraphShapes, node: onnx.NodeProto, own: Shape, rng: np.random.Generator
) -> np.ndarray | None:
    data = graph.shapes.get(node.input[0])
    if data is None or len(own) != 1:
        return None
    sizes = [_dim(data, axis) for axis in _slice_axes(graph, node, own[0])]
    if any(size is None for size in sizes):
        return None
    return np.array([rng.integers(-size, size + 1) for size in sizes if size is not None], dtype=np.int64)


def draw_by_use(
    shape: Shape,
    dtype: type[np.integer],
    uses: Sequence[tuple[onnx.NodeProto, int]],
    graph: GraphShapes,
    rng: np.random.Generator,
) -> np.ndarray | None:
    """An integer input drawn for its first consumer with a rule; None when none has one."""
    for node, position in uses:
        func = RULES.get((node.op_type, position)) if node.domain in ("", "ai.onnx") else None
        values = func(graph, node, shape, rng) if func else None
        if values is not None:
            info = np.iinfo(dtype)
            return np.clip(values, info.min, info.max).astype(dtype).reshape(shape)
    return None


def consumers(model: onnx.ModelProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    """Each tensor's consumers in the main graph: (node, input position), in node order."""
    uses: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in model.graph.node:
        for position, name in enumerate(node.input):
            if name:
                uses.setdefault(name, []).append((node, position))
    return uses
