"""The base build of `planted_builds`: onnxoptimizer 0.4.2's passes, its round trip unfixed."""

from __future__ import annotations

import onnxoptimizer
from planted_builds import VERSION, optimize

__version__ = VERSION
__all__ = ["get_available_passes", "get_fuse_and_elimination_passes", "optimize"]


def get_available_passes() -> list[str]:
    return list(onnxoptimizer.get_available_passes())


def get_fuse_and_elimination_passes() -> list[str]:
    return list(onnxoptimizer.get_fuse_and_elimination_passes())
