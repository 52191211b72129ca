"""The bundle README says what the bundle holds: a reduced or an unreduced model, and a diverging
tensor only when one was found."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.engine import runner
from ditox_ci.engine.divergence import Divergence
from ditox_ci.engine.noise import PlainRun
from ditox_ci.engine.original import EvalSettings
from ditox_ci.pinpoint import repro
from ditox_ci.pinpoint.repro import write_bundle
from ditox_ci.report.model import Culprit, Finding


def _chain(nodes: int) -> onnx.ModelProto:
    names = ["x", *(f"v{i}" for i in range(nodes))]
    graph = helper.make_graph(
        [helper.make_node("Neg", [a], [b]) for a, b in pairwise(names)],
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _readme(tmp_path: Path, model: onnx.ModelProto, original: onnx.ModelProto,
            divergence: Divergence | None) -> str:
    finding = Finding(
        fingerprint="0123456789abcdef0123",
        kind="output-mismatch",
        model="chain.onnx",
        config="default",
        culprit=Culprit("pass", ("eliminate_identity",), "bisect+ddmin", 3),
        measured={"message": "output 'y' differs"},
    )
    feeds = [{"x": np.ones(2, np.float32)}]
    output = model.graph.output[0].name
    bundle = write_bundle(
        tmp_path, finding=finding, model=model, original_model=original, feeds=feeds,
        expected=[{output: np.ones(2, np.float32)}], optimizer_spec="onnxoptimizer",
        passes=("eliminate_identity",), fixed_point=False, rtol=1e-3, atol=1e-4,
        divergence=divergence,
    )
    return (bundle / "README.md").read_text()


def test_a_reduced_model_says_how_far_and_names_the_diverging_tensor(tmp_path: Path) -> None:
    divergence = Divergence(tensor="v1", producer="Neg -> v1", rewritten=("Neg -> v1",))
    readme = _readme(tmp_path, _chain(2), _chain(9), divergence)
    assert "reduced to 2 of 9 nodes" in readme
    assert "`model.onnx` (reduced)" in readme
    assert "First diverging intermediate tensor: v1" in readme


def test_an_unreduced_model_is_not_called_reduced_and_no_tensor_is_not_named(tmp_path: Path) -> None:
    readme = _readme(tmp_path, _chain(4), _chain(4), Divergence(tensor=None, compared=4))
    assert "reduced to" not in readme
    assert "not reduced" in readme
    assert "diverging" not in readme
    assert "(reduced)" not in readme


def test_a_bundle_loads_the_optimizer_once(tmp_path: Path, monkeypatch) -> None:
    # each load imports the optimizer under test's module; a bundle needs its info only once
    loads: list[str] = []
    real = repro.load_optimizer

    def counted(spec: str, search_path: str | None = None):
        loads.append(spec)
        return real(spec, search_path)

    monkeypatch.setattr(repro, "load_optimizer", counted)
    _readme(tmp_path, _chain(2), _chain(3), None)
    assert loads == ["onnxoptimizer"]


def test_an_adapter_declaring_a_distribution_that_is_not_installed_still_gets_its_bundle(
    tmp_path: Path,
) -> None:
    """A custom adapter may import its optimizer from a checkout: the bundle says the distribution is
    not installed instead of losing the finding's repro to a PackageNotFoundError."""
    adapter = tmp_path / "adapter.py"
    adapter.write_text(
        "import onnxoptimizer\n"
        "DISTRIBUTIONS = ['my-optimizer-from-a-checkout']\n"
        "def get_available_passes():\n    return onnxoptimizer.get_available_passes()\n"
        "def get_fuse_and_elimination_passes():\n"
        "    return onnxoptimizer.get_fuse_and_elimination_passes()\n"
        "def optimize(model, passes, fixed_point=False):\n"
        "    return onnxoptimizer.optimize(model, list(passes), fixed_point)\n"
    )
    finding = Finding("0123456789abcdef0123", "output-mismatch", "chain.onnx", "default",
                      Culprit("pass", ("eliminate_identity",)), measured={"message": "differs"})
    bundle = write_bundle(
        tmp_path / "repro", finding=finding, model=_chain(2), original_model=_chain(2),
        feeds=[{"x": np.ones(2, np.float32)}], expected=[{"v1": np.ones(2, np.float32)}],
        optimizer_spec=f"{adapter}:optimize", passes=("eliminate_identity",), fixed_point=False,
        rtol=1e-3, atol=1e-4, divergence=None,
    )
    assert "# my-optimizer-from-a-checkout: not installed as a distribution" in (
        bundle / "requirements.txt"
    ).read_text()
    assert (bundle / "repro.py").exists()


def test_each_output_is_judged_as_the_sweeps_oracle_would_judge_it() -> None:
    """Tolerances by each output's dtype, noise limits where calibrated, and a random op's output
    by its shape alone: what repro.py is handed (`JudgedAs`)."""
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["x"], ["wide"], to=TensorProto.DOUBLE),
            helper.make_node("Neg", ["wide"], ["y64"]),
            helper.make_node("RandomUniformLike", ["x"], ["drawn"]),
        ],
        "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [
            helper.make_tensor_value_info("y64", TensorProto.DOUBLE, [2]),
            helper.make_tensor_value_info("drawn", TensorProto.FLOAT, [2]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = model.SerializeToString()
    feeds = [{"x": np.array([1.0, -2.0], np.float32)}]
    outputs = runner.run_all(runner.load_session(data), feeds)
    plain = PlainRun(data, feeds, outputs, 1, "onnxruntime")
    judged = repro.judged_as_the_sweep(model, plain, EvalSettings())
    assert judged.tolerances == {"y64": (1e-6, 1e-8), "drawn": (1e-3, 1e-4)}
    assert judged.drawn == ("drawn",)
    (limit,) = judged.noise_limits["y64"]  # no noise: ten floors of 8 ulps of its largest value, 2
    assert limit == pytest.approx(10 * 8 * np.finfo(np.float64).eps * 2)
    assert repro.judged_as_the_sweep(model, plain, EvalSettings(calibrate=False)).noise_limits == {}
