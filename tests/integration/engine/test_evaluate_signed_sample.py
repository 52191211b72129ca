"""The sign-structured sample (every float input all negative, values that tie) finds what random
and wide samples miss: onnxoptimizer's fuse_pad_into_pool folds a zero Pad into a MaxPool, whose own
padding is -inf, so the two differ only where a window sees no positive value."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import onnxoptimizer
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import SIGNED_LEVELS
from ditox_ci.engine.evaluate import EvalSettings, judge, prepare
from tests.helpers import sweep


def _pad_pool() -> onnx.ModelProto:
    """Pad 1 with zeros, then a 6×6 MaxPool over a 6×6 input: every window holds 25 or more input
    values, so a random sample has a positive one in each (the bug hides) with certainty near 1."""
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
    graph = helper.make_graph(
        [
            helper.make_node("Pad", ["x", "pads"], ["padded"], mode="constant"),
            helper.make_node("MaxPool", ["padded"], ["y"], kernel_shape=[6, 6], strides=[1, 1]),
        ],
        "pad_pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 3, 3])],
        [pads],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_only_the_all_negative_sample_shows_a_zero_pad_folded_into_max_pool(tmp_path: Path) -> None:
    model = _pad_pool()
    onnx.save(model, tmp_path / "m.onnx")
    context = prepare(ModelRef("m.onnx", "t", str(tmp_path / "m.onnx")), EvalSettings())
    assert context.draw is not None and context.draw.signed and len(context.feeds) == 3
    assert set(np.unique(context.feeds[2]["x"])) <= set(SIGNED_LEVELS)

    fused = onnxoptimizer.optimize(model, ["fuse_pad_into_pool"])
    assert [node.op_type for node in fused.graph.node] == ["MaxPool"]
    outcome = judge(context, fused)
    assert outcome.kind == "output-mismatch" and outcome.evidence["sample"] == 2

    unsigned = dataclasses.replace(context, feeds=context.feeds[:2], outputs=context.outputs[:2], judged={})
    # random and wide samples miss it (the pass leaves the Pad's pads behind: a warning, no bug)
    assert judge(unsigned, fused).kind == "warning"


def test_a_default_sweep_finds_it_on_the_pass(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    onnx.save(_pad_pool(), models / "pad_pool.onnx")
    code, report, stderr = sweep(
        "--models",
        str(models),
        "--configs",
        "pass:fuse_pad_into_pool",
        "--reduce-budget",
        "5",
        out=tmp_path / "r",
    )
    assert code == 1, stderr
    [finding] = report["findings"]
    assert (finding["kind"], finding["culprit"]["passes"]) == ("output-mismatch", ["fuse_pad_into_pool"])
    assert finding["evidence"]["sample"] == 2
