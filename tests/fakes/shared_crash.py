"""A planted fault in an optimizer's shared code: every pass list but the empty one (the control)
goes through one broken graph builder, which fails naming the first initializer it met, as
onnxslim's did under 20+ passes (52 findings on 7 models). The true verdict: one bug, in the
shared code, not one per pass."""

from __future__ import annotations

from collections.abc import Sequence

import onnx

PASSES = ["fold_constants", "drop_identity", "fuse_matmul_add", "merge_casts", "dedup_initializers"]


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False) -> onnx.ModelProto:
    if passes:
        first = model.graph.initializer[0].name if model.graph.initializer else model.graph.node[0].name
        raise RuntimeError(f"rebuild_graph: tensor {first} has no producer")
    result = onnx.ModelProto()
    result.CopyFrom(model)
    return result


def get_available_passes() -> list[str]:
    return list(PASSES)


def get_fuse_and_elimination_passes() -> list[str]:
    return list(PASSES)
