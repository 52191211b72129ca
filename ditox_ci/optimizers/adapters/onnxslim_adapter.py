"""onnxslim (`onnxslim.slim`) as a ditox-ci optimizer, stage by stage and pattern by pattern.

Passes are slim's optimization stages (`constant_folding`, `dead_node_elimination`,
`subexpression_elimination`, `weight_tying`), its `shape_inference`, and each of its fusion and
elimination patterns under the name `--skip_fusion_patterns` takes (`FusionConvBN`,
`EliminationSlice`, …); a pass list turns exactly those on. slim always runs its stages in its
own order and repeats them until the graph stops changing, so the list is a set and `fixed_point`
changes nothing.

No stage or pattern runs without slim's graph round trip (onnx-graphsurgeon's import, a cleanup that
drops dead nodes and unused graph inputs, a topological sort, its export: an empty producer
version, no doc strings), so every config, the control included, goes through it: `graph_fusion` is
never skipped, and with no pattern on it is that round trip alone. A config then differs from the
control only by what its passes do (with the control skipping `graph_fusion`, every pattern
"changed" 958 of 1,023 operator models). The control also drops initializers from the graph inputs
(`freeze`, in place on its input) and rewrites output dims.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import onnxslim
from onnxslim.core.optimization import OptimizationSettings
from onnxslim.core.pattern.registry import get_fusion_patterns

DISTRIBUTIONS = ("onnxslim",)
PASS_ORDER_MATTERS = False
FIXED_POINT = "always: slim repeats its enabled stages until the graph stops changing (ONNXSLIM_MAX_ITER, 10)"

SHAPE_INFERENCE = "shape_inference"
GRAPH_FUSION = "graph_fusion"
# slim's stages but graph_fusion, which is the patterns and the round trip every config shares
STAGES = tuple(key for key in OptimizationSettings.stats() if key != GRAPH_FUSION)


def _patterns() -> list[str]:
    return list(get_fusion_patterns())


def get_available_passes() -> list[str]:
    return [*STAGES, SHAPE_INFERENCE, *_patterns()]


def get_fuse_and_elimination_passes() -> list[str]:
    return get_available_passes()


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    chosen = set(passes)
    unknown = chosen - set(get_available_passes())
    if unknown:
        raise ValueError(f"onnxslim has no pass {', '.join(sorted(unknown))}")
    slimmed = onnxslim.slim(
        model,
        skip_optimizations=[name for name in STAGES if name not in chosen],
        skip_fusion_patterns=[name for name in _patterns() if name not in chosen],
        no_shape_infer=SHAPE_INFERENCE not in chosen,
    )
    if not isinstance(slimmed, onnx.ModelProto):
        raise TypeError(f"onnxslim returned {type(slimmed).__name__}, not a model")
    return slimmed
