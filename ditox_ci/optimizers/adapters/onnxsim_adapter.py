"""onnx-simplifier (`onnxsim`) as a ditox-ci optimizer.

Passes are onnxsim's skippable onnx-optimizer passes plus its two stages `constant_folding` and
`shape_inference`; a pass list turns exactly those on (`simplify(skipped_optimizers=the rest,
skip_constant_folding=..., skip_shape_inference=...)`). onnxsim runs everything it is given to its
own fixed point in its own order, so the list is a set and `fixed_point` changes nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import onnx
import onnxsim
from onnx import TensorProto, helper
from onnxsim import onnx_simplifier

CONSTANT_FOLDING = "constant_folding"
SHAPE_INFERENCE = "shape_inference"
STAGES = (CONSTANT_FOLDING, SHAPE_INFERENCE)

DISTRIBUTIONS = ("onnxsim",)
PASS_ORDER_MATTERS = False
FIXED_POINT = "always: onnxsim iterates whatever it runs to its own fixed point"
STAMPED_METADATA_PREFIX = "onnxsim."


@functools.cache
def _optimizer_passes() -> tuple[str, ...]:
    # onnxsim registers a part of its passes during its first simplify(): list them after one
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "warm_up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    onnxsim.simplify(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    # without its `nop` (the control's name, spelled out: a repro bundle carries this file alone),
    # the control runs onnxsim's round trip with no pass at all
    return tuple(name for name in onnx_simplifier.C._list_optimizers() if name != "nop")


def get_available_passes() -> list[str]:
    return [*_optimizer_passes(), *STAGES]


def get_fuse_and_elimination_passes() -> list[str]:
    return get_available_passes()


def normalize_output(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop the options and change log onnxsim stamps into `metadata_props`: they are not the graph."""
    kept = [entry for entry in model.metadata_props if not entry.key.startswith(STAMPED_METADATA_PREFIX)]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    return model


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    chosen = set(passes)
    unknown = chosen - set(get_available_passes())
    if unknown:
        raise ValueError(f"onnxsim has no pass {', '.join(sorted(unknown))}")
    optimizers = [name for name in _optimizer_passes() if name in chosen]
    simplified, _ = onnxsim.simplify(
        model,
        perform_optimization=bool(optimizers),
        skipped_optimizers=[name for name in _optimizer_passes() if name not in chosen],
        skip_constant_folding=CONSTANT_FOLDING not in chosen,
        skip_shape_inference=SHAPE_INFERENCE not in chosen,
    )
    return simplified
