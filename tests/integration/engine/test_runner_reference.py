"""The reference runner judges what ONNX Runtime cannot run, and finds a pass bug there too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.engine import runner
from tests.helpers import FAKES

FAULTY = FAKES / "faulty_optimizers.py"


def _model(name: str, op: str, domain: str = "") -> onnx.ModelProto:
    """x → Identity → `op` → Add(w) → y in double: ONNX Runtime's CPU provider has no double Erf."""
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 3])
    weight = onnx.numpy_helper.from_array(np.linspace(-1, 1, 6).reshape(2, 3), "w")
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node(op, ["i"], ["e"], domain=domain),
        helper.make_node("Add", ["e", "w"], ["y"]),
    ]
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(helper.make_graph(nodes, name, [x], [y], [weight]), opset_imports=opsets)
    model.ir_version = 8
    return model


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    onnx.save(_model("wrong_erf", "Erf"), folder / "wrong_erf.onnx")  # the planted pass bug
    onnx.save(_model("good_erf", "Erf"), folder / "good_erf.onnx")
    onnx.save(_model("good_tanh", "Tanh"), folder / "good_tanh.onnx")  # ONNX Runtime runs this one
    onnx.save(_model("alien", "Frobnicate", "com.example"), folder / "alien.onnx")  # nobody runs this
    return folder


def _sweep(corpus: Path, out: Path, *args: str) -> dict:
    command = [sys.executable, "-m", "ditox_ci", "sweep", "--models", str(corpus), "--out", str(out)]
    command += ["--optimizer", f"{FAULTY}:optimize", "--configs", "pass:eliminate_identity", "--quiet", *args]
    subprocess.run(command, capture_output=True, text=True, timeout=300)
    return json.loads((out / "report.json").read_text())


def test_auto_judges_with_the_reference_runner_what_onnx_runtime_cannot_run(corpus: Path, tmp_path: Path):
    report = _sweep(corpus, tmp_path / "out", "--localize", "off")
    models = {entry["id"]: entry for entry in report["models"]}
    assert {name: models[name].get("runner") for name in models} == {
        "alien.onnx": None,
        "good_erf.onnx": "reference",
        "good_tanh.onnx": "onnxruntime",
        "wrong_erf.onnx": "reference",
    }
    assert report["stats"]["runners"] == {"reference": 2, "onnxruntime": 1}
    alien = models["alien.onnx"]
    assert alien["status"] == "skipped"
    assert "ONNX Runtime cannot load the original" in alien["reason"]
    assert "the reference runner cannot load the original" in alien["reason"]
    (finding,) = report["findings"]
    assert (finding["model"], finding["kind"], finding["culprit"]["passes"]) == (
        "wrong_erf.onnx",
        "output-mismatch",
        ["eliminate_identity"],
    )
    assert "judged by" in (tmp_path / "out" / "summary.md").read_text()


def test_runner_onnxruntime_skips_what_it_cannot_run(corpus: Path, tmp_path: Path):
    report = _sweep(corpus, tmp_path / "out", "--localize", "off", "--runner", "onnxruntime")
    skipped = {entry["id"]: entry["reason"] for entry in report["models"] if entry["status"] == "skipped"}
    assert sorted(skipped) == ["alien.onnx", "good_erf.onnx", "wrong_erf.onnx"]
    assert "Erf" in skipped["wrong_erf.onnx"] and "reference" not in skipped["wrong_erf.onnx"]
    assert report["findings"] == []


def test_a_bug_the_reference_runner_judged_is_pinpointed_and_its_bundle_reproduces_it(
    corpus: Path, tmp_path: Path
):
    out = tmp_path / "out"
    report = _sweep(corpus, out)
    (finding,) = report["findings"]
    assert finding["culprit"]["passes"] == ["eliminate_identity"] and finding["repro"]
    # the reference runner recorded the values the reduction cuts the graph at
    reduction = finding["evidence"]["reduction"]
    assert (reduction["reason"], reduction["nodes_before"], reduction["nodes_after"]) == ("minimal", 3, 1)
    repro = out / finding["repro"] / "repro.py"
    assert 'runner="reference",' in repro.read_text()
    proc = subprocess.run(
        [sys.executable, str(repro), "--optimizer", f"{FAULTY}:optimize"], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "BUG PRESENT" in proc.stdout, proc.stdout + proc.stderr


def test_an_optional_output_without_a_value_is_none_from_onnx_runtime_too():
    """ONNX Runtime hands an empty optional back as None; the runner made it np.asarray(None), a 0-d
    object array, which the oracle took for a tensor and a bundle could only store pickled."""
    tensor = helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    graph = helper.make_graph(
        [helper.make_node("Optional", [], ["y"], type=tensor), helper.make_node("Identity", ["x"], ["z"])],
        "empty_optional",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [
            helper.make_value_info("y", helper.make_optional_type_proto(tensor)),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [2]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    session = runner.load_session(model.SerializeToString(), runner="onnxruntime")
    absent, present = runner.run(session, {"x": np.ones(2, np.float32)})
    assert absent is None and present.tolist() == [1.0, 1.0]
