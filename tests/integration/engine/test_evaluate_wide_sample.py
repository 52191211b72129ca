"""Every model is judged on a small-range and a wide-range sample: a miscompilation that shows only
once activations leave the small range (Relu turned into a bounded Relu6) is found, by the wide one."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from bounded_relu import relu6
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import write_recorded_inputs
from ditox_ci.engine.evaluate import EvalSettings, judge, prepare
from tests.helpers import FAKES

FAKE = FAKES / "bounded_relu.py"


def _relu_model(name: str) -> onnx.ModelProto:
    weight = onnx.numpy_helper.from_array(np.full((4, 8), 0.5, np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("Identity", ["x"], ["i"]),
            helper.make_node("Add", ["i", "w"], ["a"]),
            helper.make_node("Relu", ["a"], ["y"]),
        ],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_the_wide_sample_alone_finds_a_range_dependent_miscompilation(tmp_path: Path) -> None:
    model = _relu_model("range_relu")
    onnx.save(model, tmp_path / "m.onnx")
    context = prepare(ModelRef("m.onnx", "t", str(tmp_path / "m.onnx")), EvalSettings())
    assert len(context.feeds) == 3 and context.draw is not None and context.draw.wide_scales == {}
    small, wide = (np.abs(feed["x"]).max() for feed in context.feeds[:2])
    assert small < 2 < 100 < wide

    outcome = judge(context, relu6(model))  # Relu6 equals Relu on every x below 5.5
    assert outcome.kind == "output-mismatch" and outcome.evidence["sample"] == 1

    small_only = dataclasses.replace(
        context, feeds=context.feeds[:1], outputs=context.outputs[:1], judged={}
    )
    assert judge(small_only, relu6(model)).kind is None


def test_only_the_input_that_overflows_the_original_is_scaled_back(tmp_path: Path) -> None:
    """y = Exp(a) + b: a wide `a` overflows float32 (e^1000), so it alone is scaled back, to
    magnitudes below 10; `b` stays wide."""
    graph = helper.make_graph(
        [helper.make_node("Exp", ["a"], ["e"]), helper.make_node("Add", ["e", "b"], ["y"])],
        "exp",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [64]) for name in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, tmp_path / "m.onnx")
    context = prepare(ModelRef("m.onnx", "t", str(tmp_path / "m.onnx")), EvalSettings())
    assert context.draw is not None and context.draw.wide_scales == {"a": 0.01}
    wide = context.feeds[1]
    assert np.abs(wide["a"]).max() < 10 < 100 < np.abs(wide["b"]).max()
    assert np.isfinite(context.outputs[1][0]).all()


def test_a_sweep_finds_the_planted_bounded_relu_and_its_bundle_reproduces_it(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    onnx.save(_relu_model("range_relu"), models / "range_relu.onnx")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ditox_ci", "sweep", "--models", str(models), "--out", str(out)]
    command += ["--optimizer", f"{FAKE}:optimize", "--configs", "default", "--quiet"]
    subprocess.run(command, capture_output=True, text=True, timeout=300)
    (finding,) = json.loads((out / "report.json").read_text())["findings"]
    assert (finding["kind"], finding["culprit"]["passes"]) == ("output-mismatch", ["eliminate_identity"])
    assert finding["evidence"]["sample"] == 1
    # pinpointing judged the same three samples (small, wide, sign-structured), so the bundle
    # carries the wide one that shows the bug
    repro = out / finding["repro"]
    assert len(np.load(repro / "inputs.npz").files) == 3
    command = [sys.executable, str(repro / "repro.py"), "--optimizer", f"{FAKE}:optimize"]
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 1 and "sample 1" in proc.stdout, proc.stdout + proc.stderr


def test_the_wide_sample_s_index_follows_the_recorded_data_sets_not_samples(tmp_path: Path) -> None:
    """One recorded data set and --samples 3: the wide-range sample is sample 1, the second fed."""
    model = _relu_model("recorded_relu")
    folder = tmp_path / "recorded"
    write_recorded_inputs(folder, model, [{"x": np.full((4, 8), 0.25, np.float32)}])
    ref = ModelRef("recorded", "t", str(folder / "model.onnx"), inputs_dir=str(folder))
    context = prepare(ref, EvalSettings(samples=3))
    # the second fed: one data set, then the wide one (Draw.feeds appends it after the samples)
    assert len(context.feeds) == 3 and context.draw is not None and context.draw.samples == 3
    assert context.draw.wide_scales == {} and np.abs(context.feeds[1]["x"]).max() > 100
