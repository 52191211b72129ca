"""ONNX Runtime's graph optimizer at its extended level (basic's passes and level 2's, whose fusions
write `com.microsoft` contrib ops that only ONNX Runtime runs): `onnxruntime_adapter` at another
level. ORT's layout level and above write hardware-specific models and are not offered.

It imports the basic adapter beside it: in ditox-ci's package, or, in a repro bundle, the copy
that goes with it (BUNDLED_WITH), so a bundle runs the code the sweep ran, ditox-ci installed or not.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx

try:
    from . import onnxruntime_adapter as basic
except ImportError:  # loaded by its path in a repro bundle: the copy beside it, on repro.py's path
    import onnxruntime_adapter as basic  # type: ignore[no-redef]

DISTRIBUTIONS = basic.DISTRIBUTIONS
FIXED_POINT = basic.FIXED_POINT
NOISE_FLOOR = basic.NOISE_FLOOR
PASS_ORDER_MATTERS = basic.PASS_ORDER_MATTERS
RUNTIME_LOADS_INPUT = basic.RUNTIME_LOADS_INPUT
CANNOT_FIRE = basic.CANNOT_FIRE
BUNDLED_WITH = (basic.__file__,)
LEVEL = "extended"


def get_available_passes() -> list[str]:
    return basic.passes_at(LEVEL)


def get_fuse_and_elimination_passes() -> list[str]:
    return get_available_passes()


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    return basic.optimized_by_ort(model, passes, LEVEL)
