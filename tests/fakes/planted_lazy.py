"""A build of onnxoptimizer that stops doing part of its work: on models whose graph is named
`lazy*`, LAZY_PASS no longer runs (as onnx/optimizer PR#325 found every constant-dependent pass
silently off on models below IR 4). Its results stay correct: only a comparison with what an
earlier build did finds it (`triage/missed.py`)."""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import onnxoptimizer

LAZY_PASS = "eliminate_identity"
__version__ = "0.4.2+lazy"


def get_available_passes() -> list[str]:
    return list(onnxoptimizer.get_available_passes())


def get_fuse_and_elimination_passes() -> list[str]:
    return list(onnxoptimizer.get_fuse_and_elimination_passes())


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False) -> onnx.ModelProto:
    kept = [name for name in passes if not (name == LAZY_PASS and model.graph.name.startswith("lazy"))]
    return onnxoptimizer.optimize(model, kept, fixed_point)
