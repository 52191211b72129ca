"""ONNX Runtime's graph optimizer at its extended level (basic's passes and level 2's, whose fusions
write `com.microsoft` contrib ops that only ONNX Runtime runs): `onnxruntime_adapter` at another
level. ORT's layout level and above write hardware-specific models and are not offered.

Unlike the other adapters this one imports ditox-ci (the basic adapter), so its repro bundles need
ditox-ci installed.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx

from ditox_ci.optimizers.adapters.onnxruntime_adapter import (
    DISTRIBUTIONS,
    FIXED_POINT,
    NOISE_FLOOR,
    PASS_ORDER_MATTERS,
    RUNTIME_LOADS_INPUT,
    optimized_by_ort,
    passes_at,
)

__all__ = ["DISTRIBUTIONS", "FIXED_POINT", "NOISE_FLOOR", "PASS_ORDER_MATTERS", "RUNTIME_LOADS_INPUT"]
LEVEL = "extended"


def get_available_passes() -> list[str]:
    return passes_at(LEVEL)


def get_fuse_and_elimination_passes() -> list[str]:
    return get_available_passes()


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    return optimized_by_ort(model, passes, LEVEL)
