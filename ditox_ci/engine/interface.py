"""A model's interface, read against another's: its inputs that need a value, and whether an
optimized model's inputs and outputs still match the original's by position.

Imports nothing of ditox-ci: a repro bundle carries this module beside its runtime
(`pinpoint/repro.py`), so its `repro.py` judges an interface as the sweep judged it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper


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


def interface_change(
    original: onnx.ModelProto, optimized: onnx.ModelProto, what: Sequence[str] = ("input", "output")
) -> str | None:
    """Compare inputs and outputs (or only `what` of them) by position: count, element type, static
    dims (names may change)."""
    sides = {
        "input": (feedable_inputs(original), feedable_inputs(optimized)),
        "output": (list(original.graph.output), list(optimized.graph.output)),
    }
    for side in what:
        before, after = sides[side]
        if len(before) != len(after):
            return f"graph {side} count changed from {len(before)} to {len(after)}"
        for position, (a, b) in enumerate(zip(before, after)):
            (type_a, shape_a), (type_b, shape_b) = _signature(a), _signature(b)
            if type_a != type_b:
                names = (
                    onnx.TensorProto.DataType.Name(t) if t > 0 else "non-tensor" for t in (type_a, type_b)
                )
                return f"graph {side} #{position} ('{a.name}') element type changed: {' -> '.join(names)}"
            if _shapes_conflict(shape_a, shape_b):
                return f"graph {side} #{position} ('{a.name}') shape changed: {shape_a} -> {shape_b}"
    return None


def outputs_unchanged(original: onnx.ModelProto, optimized: onnx.ModelProto) -> bool:
    """Whether the outputs keep their count, element types and static dims: only then are their
    values compared (a changed output is the interface change's to say)."""
    return interface_change(original, optimized, ("output",)) is None


def fed(
    feeds: Sequence[Mapping[str, Any]], original: onnx.ModelProto, optimized: onnx.ModelProto
) -> list[dict[str, Any]] | None:
    """`original`'s feeds for `optimized` (`rebound`), an input it retyped given its value cast to
    the new element type, as the pass means callers to feed it (rewrite_input_dtype's int32 for
    int64); None when nothing the original ran on can be fed that means the same: the two take a
    different number of inputs, or a value does not survive the cast (an int64 beyond int32)."""
    before, after = feedable_inputs(original), feedable_inputs(optimized)
    if len(before) != len(after):
        return None
    retyped = {
        b.name: helper.tensor_dtype_to_np_dtype(b.type.tensor_type.elem_type)
        for a, b in zip(before, after)
        if a.type.HasField("tensor_type")
        and b.type.HasField("tensor_type")
        and b.type.tensor_type.elem_type > 0
        and a.type.tensor_type.elem_type != b.type.tensor_type.elem_type
    }
    adapted = []
    for feed in rebound(feeds, original, optimized):
        for name, value in feed.items():
            if name in retyped and isinstance(value, np.ndarray):
                with np.errstate(all="ignore"):  # a value the cast cannot hold is refused below
                    cast = value.astype(retyped[name])
                    kept = np.array_equal(cast.astype(value.dtype), value, equal_nan=value.dtype.kind == "f")
                if not kept:
                    return None
                feed[name] = cast
        adapted.append(feed)
    return adapted


def rebound(
    feeds: Sequence[Mapping[str, Any]], original: onnx.ModelProto, optimized: onnx.ModelProto
) -> list[dict[str, Any]]:
    """`original`'s feeds for `optimized`, by input position: a pass may rename inputs by design."""
    names = {a.name: b.name for a, b in zip(feedable_inputs(original), feedable_inputs(optimized))}
    return [{names.get(name, name): value for name, value in feed.items()} for feed in feeds]
