"""The head build of `planted_builds`: the same version as the base, its round trip fixed, and
two passes more (NEW_PASS, IDLE_PASS)."""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import onnxoptimizer
from planted_builds import IDLE_PASS, NEW_PASS, VERSION
from planted_builds import optimize as _optimize

__version__ = VERSION


def get_available_passes() -> list[str]:
    return [*onnxoptimizer.get_available_passes(), NEW_PASS, IDLE_PASS]


def get_fuse_and_elimination_passes() -> list[str]:
    return list(onnxoptimizer.get_fuse_and_elimination_passes())


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False) -> onnx.ModelProto:
    return _optimize(model, passes, fixed_point, head=True)
