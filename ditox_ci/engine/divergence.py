"""Node-level localization: where inside the graph an output mismatch starts.

Both models run with every top-level value exposed; the values present in both by name are
compared in the original's topological order, and the first one beyond tolerance is where the
optimized graph starts to compute something else. The nodes the culprit rewrote there are the
original's producers of that value and of its inputs back to values that still agree, which the
optimized graph no longer has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from ditox_ci.engine.values import Feeds, node_inputs, record_values


@dataclass(frozen=True)
class Divergence:
    """`tensor` is None when no shared intermediate differs (the divergence is hidden inside
    fused nodes or only visible in renamed outputs)."""

    tensor: str | None
    producer: str = ""
    rewritten: tuple[str, ...] = ()
    max_abs: float | None = None
    compared: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tensor": self.tensor,
            "producer": self.producer,
            "rewritten": list(self.rewritten),
            "max_abs": self.max_abs,
            "compared": self.compared,
        }


def _label(node: onnx.NodeProto) -> str:
    return f"{node.op_type} {node.name}" if node.name else f"{node.op_type} -> {node.output[0]}"


def _differs(
    want: Sequence[np.ndarray], got: Sequence[np.ndarray], rtol: float, atol: float
) -> float | None:
    """The max abs difference when the values differ beyond tolerance in any sample, else None."""
    worst: float | None = None
    for a, b in zip(want, got, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype:
            return float("inf")
        if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            if a.dtype == bool:
                return 1.0
            difference = float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64))))
            worst = difference if worst is None else max(worst, difference)
    return worst


def _node_key(node: onnx.NodeProto) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    return node.op_type, tuple(node.input), tuple(node.output)


def first_divergence(
    original: onnx.ModelProto, optimized: onnx.ModelProto, feeds: Feeds, *, rtol: float, atol: float
) -> Divergence:
    """Compare shared intermediates in topological order; raises runner errors if either model
    cannot run with its values exposed."""
    want = record_values(original, feeds)
    got = record_values(optimized, feeds)
    kept = {_node_key(node) for node in optimized.graph.node}
    producers = {name: node for node in original.graph.node for name in node.output if name}
    compared = 0
    for node in original.graph.node:
        for name in node.output:
            if not name or any(name not in s for s in got) or any(name not in s for s in want):
                continue
            compared += 1
            difference = _differs([s[name] for s in want], [s[name] for s in got], rtol, atol)
            if difference is None:
                continue
            rewritten, stack, seen = [], [name], set()
            while stack:
                value = stack.pop()
                producer = producers.get(value)
                if producer is None or value in seen:
                    continue
                seen.add(value)
                if _node_key(producer) not in kept:
                    rewritten.append(_label(producer))
                agrees = (
                    value != name
                    and all(value in s for s in got)
                    and (
                        _differs([s[value] for s in want], [s[value] for s in got], rtol, atol)
                        is None
                    )
                )
                if not agrees:
                    stack.extend(node_inputs(producer))
            return Divergence(
                tensor=name,
                producer=_label(node),
                rewritten=tuple(dict.fromkeys(rewritten)),
                max_abs=difference,
                compared=compared,
            )
    return Divergence(tensor=None, compared=compared)
