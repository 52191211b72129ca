"""onnx-simplifier (`onnxsim`) as a ditox-ci optimizer.

Passes are onnxsim's skippable onnx-optimizer passes plus its two stages `constant_folding` and
`shape_inference`; a pass list turns exactly those on (`simplify(skipped_optimizers=the rest,
skip_constant_folding=..., skip_shape_inference=...)`). onnxsim runs everything it is given to its
own fixed point in its own order, so the list is a set and `fixed_point` changes nothing.

`skipped_optimizers` is a skip list over simplify()'s own default set, which is not quite what
onnxsim lists (onnxsim.cpp): it drops ALWAYS_DISABLED from every list itself (offered, they would be
passes whose configs are the control), and adds BATCHED_GEMM, which it does not list, to every list
that optimizes (unskipped, it ran in every single-pass config). What no option turns off when it
optimizes at all: it unsets all-zero RNN initial states. So every config optimizes, the control (no
pass) with every pass skipped, and a pass's config differs from the control by that pass alone
(with `perform_optimization=False` for the control, each of the 65 passes "changed" the three
silero-vad models that have such states).
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
ALWAYS_DISABLED = ("eliminate_shape_gather", "extract_constant_to_initializer")
BATCHED_GEMM = "fuse_matmul_add_bias_into_gemm_batched"


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
    listed = onnx_simplifier.C._list_optimizers()
    return (*(name for name in listed if name != "nop" and name not in ALWAYS_DISABLED), BATCHED_GEMM)


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
    simplified, _ = onnxsim.simplify(
        model,
        perform_optimization=True,
        skipped_optimizers=[name for name in _optimizer_passes() if name not in chosen],
        skip_constant_folding=CONSTANT_FOLDING not in chosen,
        skip_shape_inference=SHAPE_INFERENCE not in chosen,
    )
    return simplified
