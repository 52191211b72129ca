"""The common passes of onnx-ir (`onnx_ir.passes.common`) as a ditox-ci optimizer.

onnx-ir has no default pipeline of its own; the default list is every pass that keeps a model's
interface, in the order a clean-up would run them. Passes run in the order given, once, or as a
loop until nothing changes under `fixed_point`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common_passes

DISTRIBUTIONS = ("onnx-ir", "ml_dtypes")
PASS_ORDER_MATTERS = True
FIXED_POINT = "repeat: the pass list runs as a PassManager until nothing changes"
FIXED_POINT_STEPS = 32
CANNOT_FIRE = {
    "topological_sort": (
        "a valid model's nodes are sorted already: only a model the checker refuses ('must be "
        "topologically sorted') is changed"
    ),
}

# AddInitializersToInputs / RemoveInitializersFromInputs change the graph's inputs by design and
# CheckerPass changes nothing: none of them is a pass to guard.
PASSES: dict[str, Callable[[], ir.passes.PassBase]] = {
    "inline": common_passes.InlinePass,
    "identity_elimination": common_passes.IdentityEliminationPass,
    "remove_unused_nodes": common_passes.RemoveUnusedNodesPass,
    "remove_unused_functions": common_passes.RemoveUnusedFunctionsPass,
    "remove_unused_opsets": common_passes.RemoveUnusedOpsetsPass,
    "lift_constants_to_initializers": common_passes.LiftConstantsToInitializersPass,
    "lift_subgraph_initializers_to_main_graph": common_passes.LiftSubgraphInitializersToMainGraphPass,
    "deduplicate_initializers": common_passes.DeduplicateInitializersPass,
    "deduplicate_hashed_initializers": common_passes.DeduplicateHashedInitializersPass,
    "common_subexpression_elimination": common_passes.CommonSubexpressionEliminationPass,
    "add_default_attributes": common_passes.AddDefaultAttributesPass,
    "shape_inference": common_passes.ShapeInferencePass,
    "topological_sort": common_passes.TopologicalSortPass,
    "output_fix": common_passes.OutputFixPass,
    "name_fix": common_passes.NameFixPass,
    "clear_metadata_and_docstring": common_passes.ClearMetadataAndDocStringPass,
}
# clear_metadata_and_docstring drops what the model says of itself: available, never by default
DEFAULT = tuple(name for name in PASSES if name != "clear_metadata_and_docstring")


def get_available_passes() -> list[str]:
    return list(PASSES)


def get_fuse_and_elimination_passes() -> list[str]:
    return list(DEFAULT)


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    unknown = [name for name in passes if name not in PASSES]
    if unknown:
        raise ValueError(f"onnx-ir has no pass {', '.join(unknown)}")
    model_ir = ir.serde.deserialize_model(model)
    if passes:
        steps = FIXED_POINT_STEPS if fixed_point else 1
        ir.passes.PassManager([PASSES[name]() for name in passes], steps=steps, early_stop=True)(model_ir)
    return ir.serde.serialize_model(model_ir)
