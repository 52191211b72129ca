"""ONNX Runtime's own graph optimizer (basic level) as a ditox-ci optimizer, transformer by transformer.

The optimized model is what ONNX Runtime writes with `optimized_model_filepath`. Its passes are
ORT's graph transformers and the rewrite rules of its rule-based transformers, named as ORT names
them: a pass list enables exactly those (`disabled_optimizers` = every other one), so a
single-transformer config and localization (ddmin over the enabled set) need nothing else. The
control is ORT's round trip with its optimizations off. ORT orders and repeats what is enabled
itself, so the list is a set and `fixed_point` changes nothing.

ORT has no API that lists its transformers: they are read from its verbose log of one session
over a tiny model (a transformer that does not exist in a build is then not offered). Its rewrite
rules are not logged by name; RULES lists them as `graph_transformer_utils.cc` registers them.
`onnxruntime_extended_adapter.py` is this module at ORT's extended level.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from collections.abc import Sequence

import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

DISTRIBUTIONS = ("onnxruntime",)
PASS_ORDER_MATTERS = False
FIXED_POINT = (
    "always: ORT repeats each level's enabled transformers until the graph stops changing (10 steps at most)"
)
# ORT's own optimizations are what is under test: a noise floor measured with them on would
# accept exactly the changes to judge, so the original's noise is measured against ONNX's
# reference implementation instead
NOISE_FLOOR = "reference"
# it loads its input in ONNX Runtime: an original ORT cannot load is one it cannot optimize either
RUNTIME_LOADS_INPUT = True

# the levels each ORT level runs, as its verbose log numbers them
LEVELS = {"basic": (1,), "extended": (1, 2)}
SESSION_LEVELS = {
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
}
LEVEL = "basic"
# the rewrite rules of each level's rule-based transformer (`LevelN_RuleBasedTransformer`), by
# the names `disabled_optimizers` takes (ORT 1.32's GenerateRewriteRules; CastChainElimination
# only with a session option ditox-ci does not set)
RULES = {
    1: (
        "EliminateIdentity",
        "EliminateSlice",
        "UnsqueezeElimination",
        "EliminateDropout",
        "ExpandElimination",
        "CastElimination",
        "PreShapeNodeElimination",
        "NoopElimination",
        "DivMulFusion",
        "FuseReluClip",
        "GemmSumFusion",
        "GemmTransposeFusion",
        "NotWhereFusion",
        "ConvAddFusion",
        "ConvMulFusion",
        "ConvBNFusion",
        "Pad_Fusion",
        "MatMul_BatchNormalization_Fusion",
        "LabelEncoderFusion",
    ),
    2: ("ClipQuantRewrite", "ReluQuantRewrite", "GemmTransposeFusion"),
}
# what ORT 1.32 registers that changes no valid model through this adapter on a CPU (the
# registrations in graph_transformer_utils.cc, the gates in each transformer's code)
CANNOT_FIRE = {
    "FreeDimensionOverrideTransformer": (
        "acts only on the free dimension overrides of the session options, which ditox-ci does not set"
    ),
    "EnsureUniqueDQForNodeUnit": (
        "also runs once before the levels whatever is disabled, the control's session included, so "
        "its config is the control's"
    ),
    "GroupQueryAttentionFusion": "registered for the CUDA execution provider only",
    "GroupQueryAttentionPreNormFusion": "registered for the CUDA and WebGPU execution providers only",
    "SwiGluFusion": "registered for the CUDA execution provider only",
    "BiasDropoutFusion": "registered for the CUDA execution provider only",
    "MatMulActivationFusion": "registered for the DirectML execution provider only",
    "BiasSoftmaxFusion": "matches only an Add placed on the CUDA or ROCm execution provider",
}
RULE_BASED = re.compile(r"Level(\d+)_RuleBasedTransformer")
_APPLYING_LEVEL = re.compile(r"Applying \d+ graph transformer\(s\) for level (\d+)")
_APPLYING = re.compile(r"Applying graph transformer (\S+) on step 1\.")


def _verbose_log(model: onnx.ModelProto, options: ort.SessionOptions) -> str:
    """What ORT writes to the process's stderr (file descriptor 2) while it creates a session."""
    options.log_severity_level = 0
    options.log_verbosity_level = 1
    with tempfile.TemporaryFile() as log:
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        return log.read().decode(errors="replace")


@functools.cache
def transformers_by_level() -> dict[int, tuple[str, ...]]:
    """ORT's graph transformers at each level, in the order it applies them, as its log names them."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "list_transformers",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    found: dict[int, list[str]] = {}
    level = 0
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    for line in _verbose_log(model, options).splitlines():
        if match := _APPLYING_LEVEL.search(line):
            level = int(match.group(1))
        elif (match := _APPLYING.search(line)) and match.group(1) not in found.setdefault(level, []):
            found[level].append(match.group(1))
    return {level: tuple(names) for level, names in found.items()}


def passes_at(level: str) -> list[str]:
    """The transformers and rewrite rules of `level`: a rule-based transformer stands for its rules."""
    names: list[str] = []
    for number in LEVELS[level]:
        for name in transformers_by_level().get(number, ()):
            rule_based = RULE_BASED.fullmatch(name)
            names.extend(RULES.get(int(rule_based.group(1)), ()) if rule_based else (name,))
    return list(dict.fromkeys(names))


def get_available_passes() -> list[str]:
    return passes_at(LEVEL)


def get_fuse_and_elimination_passes() -> list[str]:
    return get_available_passes()


def optimized_by_ort(model: onnx.ModelProto, passes: Sequence[str], level: str) -> onnx.ModelProto:
    """What ORT writes at `level` with exactly `passes` enabled; with none, its optimizations off."""
    available = passes_at(level)
    unknown = sorted(set(passes) - set(available))
    if unknown:
        raise ValueError(f"ONNX Runtime ({level}) has no transformer {', '.join(unknown)}")
    options = ort.SessionOptions()
    options.graph_optimization_level = (
        SESSION_LEVELS[level] if passes else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    with tempfile.TemporaryDirectory() as folder:
        options.optimized_model_filepath = os.path.join(folder, "optimized.onnx")
        ort.InferenceSession(
            model.SerializeToString(),
            options,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=[name for name in available if name not in passes],
        )
        return onnx.load(options.optimized_model_filepath)


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
    return optimized_by_ort(model, passes, LEVEL)
