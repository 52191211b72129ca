"""onnxscript's optimizer (`onnxscript.optimizer.optimize`) as a ditox-ci optimizer, pass by pass.

The default list is exactly what `optimize()` runs: inlining, then the loop of constant folding,
each default rewrite rule (`rule:<name>`) and the unused-node/function/opset removals, then the
clean-up passes. Passes run in the order given; those of the loop run as one loop (twice, like
`optimize()`, or until nothing changes under `fixed_point`), the others once, where they stand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common_passes
from onnxscript import rewriter
from onnxscript.optimizer import _constant_folding
from onnxscript.rewriter import pattern

DISTRIBUTIONS = ("onnxscript", "onnx-ir", "ml_dtypes")
PASS_ORDER_MATTERS = True
FIXED_POINT = "repeat: the optimize() loop runs until nothing changes (twice otherwise, as optimize() does)"
DEFAULT_LOOP_STEPS = 2
FIXED_POINT_LOOP_STEPS = 32
RULE_PREFIX = "rule:"
CANNOT_FIRE = {
    "rule:dropout_inference": (
        "its pattern is a Dropout with a training_mode attribute, which no Dropout version has: only "
        "a model the checker refuses matches"
    ),
}

_LOOP_PASSES: dict[str, Callable[[], ir.passes.PassBase]] = {
    "fold_constants": lambda: _constant_folding.FoldConstantsPass(
        shape_inference=True,
        input_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
        output_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
    ),
    "remove_unused_nodes": common_passes.RemoveUnusedNodesPass,
    "remove_unused_functions": common_passes.RemoveUnusedFunctionsPass,
    "remove_unused_opsets": common_passes.RemoveUnusedOpsetsPass,
}
_FINAL_PASSES: dict[str, Callable[[], ir.passes.PassBase]] = {
    "remove_unused_nodes_final": common_passes.RemoveUnusedNodesPass,
    "lift_constants_to_initializers": lambda: common_passes.LiftConstantsToInitializersPass(
        lift_all_constants=True, size_limit=0
    ),
    "lift_subgraph_initializers_to_main_graph": common_passes.LiftSubgraphInitializersToMainGraphPass,
    "deduplicate_initializers": common_passes.DeduplicateInitializersPass,
    "common_subexpression_elimination": common_passes.CommonSubexpressionEliminationPass,
    "output_fix": common_passes.OutputFixPass,
    "name_fix": common_passes.NameFixPass,
}


STAMPED_METADATA_PREFIX = "pkg.onnxscript."


def _drop_stamps(entries: Any) -> None:
    kept = [entry for entry in entries if not entry.key.startswith(STAMPED_METADATA_PREFIX)]
    if len(kept) != len(entries):
        del entries[:]
        entries.extend(kept)


def _normalize_graph(graph: onnx.GraphProto) -> None:
    _drop_stamps(graph.metadata_props)
    for value in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        _drop_stamps(value.metadata_props)
    for node in graph.node:
        _drop_stamps(node.metadata_props)
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                _normalize_graph(subgraph)


def normalize_output(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop what onnxscript stamps into metadata_props (`pkg.onnxscript.optimizer.folded_from` on
    the constants it folded): where a constant came from is not the graph."""
    _drop_stamps(model.metadata_props)
    _normalize_graph(model.graph)
    for function in model.functions:
        _drop_stamps(function.metadata_props)
        for node in function.node:
            _drop_stamps(node.metadata_props)
    return model


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _rules() -> dict[str, pattern.RewriteRule]:
    """Each default rewrite rule under a stable name: its own, else the variable its module binds
    it to (`sub_0_rule` → `sub_0`), else the op types it matches; a name two rules share gets a
    counter."""
    import sys

    bound: dict[int, str] = {}
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("onnxscript.rewriter.rules.common."):
            for attribute, value in vars(module).items():
                if isinstance(value, pattern.RewriteRule) and attribute.endswith("_rule"):
                    bound.setdefault(id(value), attribute[: -len("_rule")])
    named: dict[str, pattern.RewriteRule] = {}
    base = "rule"
    for rule in rewriter._DEFAULT_REWRITE_RULES:
        ops = (getattr(node, "_op_identifier", None) for node in rule._target_pattern._nodes)
        matched = "_".join(op[1] for op in ops if op).lower()
        # a commuted copy matches no op of its own: it is named after the rule it was made from
        base = _snake(rule.name) if rule.name else bound.get(id(rule), matched or base)
        name, counter = RULE_PREFIX + base, 2
        while name in named:
            name, counter = f"{RULE_PREFIX}{base}_{counter}", counter + 1
        named[name] = rule
    return named


_RULES = _rules()
_LOOP = ("fold_constants", *_RULES, "remove_unused_nodes", "remove_unused_functions", "remove_unused_opsets")


def get_available_passes() -> list[str]:
    return ["inline", *_LOOP, *_FINAL_PASSES]


def get_fuse_and_elimination_passes() -> list[str]:
    return get_available_passes()


def _loop_pass(names: Sequence[str], steps: int) -> ir.passes.PassBase:
    passes: list[ir.passes.PassBase] = []
    rules: list[pattern.RewriteRule] = []
    for name in names:
        if name in _RULES:
            rules.append(_RULES[name])
            continue
        if rules:
            passes.append(rewriter.RewritePass(rules))
            rules = []
        passes.append(_LOOP_PASSES[name]())
    if rules:
        passes.append(rewriter.RewritePass(rules))
    return ir.passes.PassManager(passes, steps=steps, early_stop=True)


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    unknown = [name for name in passes if name not in get_available_passes()]
    if unknown:
        raise ValueError(f"onnxscript has no pass {', '.join(unknown)}")
    model_ir = ir.serde.deserialize_model(model)
    pipeline: list[ir.passes.PassBase] = []
    loop: list[str] = []
    steps = FIXED_POINT_LOOP_STEPS if fixed_point else DEFAULT_LOOP_STEPS
    for name in passes:
        if name in _LOOP:
            loop.append(name)
            continue
        if loop:
            pipeline.append(_loop_pass(loop, steps))
            loop = []
        pipeline.append(common_passes.InlinePass() if name == "inline" else _FINAL_PASSES[name]())
    if loop:
        pipeline.append(_loop_pass(loop, steps))
    if pipeline:
        ir.passes.Sequential(*pipeline)(model_ir)
    return ir.serde.serialize_model(model_ir)
