"""A planted optimizer that never returns on models named `stuck*`, so a sweep can be cancelled
while its workers are busy. Each call leaves `<pid>-<ppid>-<graph name>` in $DITOX_TEST_PIDS: the
worker and its parent (the forkserver), which must both be gone once the sweep has exited."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import onnx
import onnxoptimizer

# it wraps onnxoptimizer, so it declares its pass lists (without them it would be opaque)
get_available_passes = onnxoptimizer.get_available_passes
get_fuse_and_elimination_passes = onnxoptimizer.get_fuse_and_elimination_passes


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False) -> onnx.ModelProto:
    marker = Path(os.environ["DITOX_TEST_PIDS"]) / f"{os.getpid()}-{os.getppid()}-{model.graph.name}"
    marker.touch()
    if model.graph.name.startswith("stuck"):
        time.sleep(3600)
    return onnxoptimizer.optimize(model, list(passes), fixed_point)
