"""A model's interface, read against another's: its inputs that need a value, and whether an
optimized model's inputs and outputs still match the original's by position.

Imports nothing of ditox-ci: a repro bundle carries this module beside its runtime
(`pinpoint/repro.py`), so its `repro.py` judges an interface as the sweep judged it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import onnx


def feedable_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that need a value: those backed by an initializer have a default."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    return [info for info in model.graph.input if info.name not in initializers]


def _signature(value: onnx.ValueInfoProto) -> tuple[int, tuple[int | None, ...] | None]:
    tensor = value.type.tensor_type
    if not value.type.HasField("tensor_type"):
        return (-1, None)
    shape = (
        # a negative dim_value is as unknown as a symbolic one
        tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None for d in tensor.shape.dim)
        if tensor.HasField("shape")
        else None
    )
    return (tensor.elem_type, shape)


def _shapes_conflict(a: tuple[int | None, ...] | None, b: tuple[int | None, ...] | None) -> bool:
    if a is None or b is None:
        return False
    return len(a) != len(b) or any(x is not None and y is not None and x != y for x, y in zip(a, b))


def interface_change(original: onnx.ModelProto, optimized: onnx.ModelProto) -> str | None:
    """Compare inputs and outputs by position: count, element type, static dims (names may change)."""
    for what, before, after in (
        ("input", feedable_inputs(original), feedable_inputs(optimized)),
        ("output", list(original.graph.output), list(optimized.graph.output)),
    ):
        if len(before) != len(after):
            return f"graph {what} count changed from {len(before)} to {len(after)}"
        for position, (a, b) in enumerate(zip(before, after)):
            (type_a, shape_a), (type_b, shape_b) = _signature(a), _signature(b)
            if type_a != type_b:
                names = (
                    onnx.TensorProto.DataType.Name(t) if t > 0 else "non-tensor" for t in (type_a, type_b)
                )
                return f"graph {what} #{position} ('{a.name}') element type changed: {' -> '.join(names)}"
            if _shapes_conflict(shape_a, shape_b):
                return f"graph {what} #{position} ('{a.name}') shape changed: {shape_a} -> {shape_b}"
    return None


def rebound(
    feeds: Sequence[Mapping[str, Any]], original: onnx.ModelProto, optimized: onnx.ModelProto
) -> list[dict[str, Any]]:
    """`original`'s feeds for `optimized`, by input position: a pass may rename inputs by design."""
    names = {a.name: b.name for a, b in zip(feedable_inputs(original), feedable_inputs(optimized))}
    return [{names.get(name, name): value for name, value in feed.items()} for feed in feeds]
