"""A planted range-dependent miscompilation: on models named `range*`, eliminate_identity also
turns every Relu into Clip(0, 6), which only inputs that leave the small range can tell apart."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import onnxoptimizer

BROKEN_PASS = "eliminate_identity"


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False) -> onnx.ModelProto:
    result = onnxoptimizer.optimize(model, list(passes), fixed_point)
    if model.graph.name.startswith("range") and BROKEN_PASS in passes:
        return relu6(result)
    return result


def relu6(model: onnx.ModelProto) -> onnx.ModelProto:
    """The planted miscompilation: a copy of `model` whose every Relu is Clip(0, 6)."""
    bounded = onnx.ModelProto()
    bounded.CopyFrom(model)
    for node in bounded.graph.node:
        if node.op_type == "Relu":
            node.op_type, node.input[:] = "Clip", [node.input[0], "relu6_low", "relu6_high"]
    bounded.graph.initializer.extend(
        [onnx.numpy_helper.from_array(np.float32(v), n) for v, n in ((0, "relu6_low"), (6, "relu6_high"))]
    )
    return bounded


def get_available_passes() -> list[str]:
    return ["nop", BROKEN_PASS]


def get_fuse_and_elimination_passes() -> list[str]:
    return [BROKEN_PASS]
