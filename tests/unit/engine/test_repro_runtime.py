"""The runtime a repro bundle runs: its samples file, its verdicts (1 bug present, 0 fixed, 2 cannot
tell), and that it can travel: nothing of ditox-ci but the runner beside it."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.compare.calibration import NOISE_MARGIN
from ditox_ci.engine import repro_runtime
from ditox_ci.engine.repro_runtime import (
    BUG_PRESENT,
    CANNOT_TELL,
    FIXED,
    Repro,
    check,
    read_samples,
    write_samples,
)
from ditox_ci.pinpoint.repro import RUNTIME_MODULES

ADD_TO_SUB = (
    "import onnxoptimizer\n\n"
    "def optimize(model, passes, fixed_point):\n"
    "    out = onnxoptimizer.optimize(model, passes, fixed_point)\n"
    "    for node in out.graph.node:\n"
    "        node.op_type = 'Sub' if node.op_type == 'Add' else node.op_type\n"
    "    return out\n"
)
REPRO = Repro(("eliminate_identity",), False, "adapter.py:optimize", 1e-4, 1e-5, 60.0)


def _bundle(folder: Path, expected_sum: float = 3.0) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Add", ["i", "y"], ["z"])],
        "g",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in ("x", "y")],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(folder / "model.onnx"))
    feed = {"x": np.array([1.0, 2.0], np.float32), "y": np.ones(2, np.float32)}
    write_samples(folder / "inputs.npz", [feed])
    write_samples(folder / "expected.npz", [{"z": np.array([2.0, expected_sum], np.float32)}])
    (folder / "adapter.py").write_text(ADD_TO_SUB)
    return folder


def _with_adapter(bundle: Path, *lines: str) -> Path:
    """`bundle` with an adapter.py whose optimize runs onnxoptimizer, then `lines` on its result `out`."""
    body = "".join(f"    {line}\n" for line in lines)
    (bundle / "adapter.py").write_text(
        "import onnx, onnxoptimizer\n\n"
        "def optimize(model, passes, fixed_point):\n"
        "    out = onnxoptimizer.optimize(model, passes, fixed_point)\n"
        f"{body}"
        "    return out\n"
    )
    return bundle


def test_samples_keep_names_order_and_element_types_numpy_lacks(tmp_path: Path) -> None:
    samples = [
        {"a/b": np.arange(3, dtype=np.float32), "h": np.ones(2, ml_dtypes.bfloat16)},
        {"a/b": np.zeros(3, np.float32), "h": np.zeros(2, ml_dtypes.bfloat16)},
    ]
    write_samples(tmp_path / "s.npz", samples)
    read = read_samples(tmp_path / "s.npz")
    assert [sorted(sample) for sample in read] == [["a/b", "h"], ["a/b", "h"]]
    for got, want in zip(read, samples, strict=True):
        for name, array in want.items():
            assert got[name].dtype == array.dtype and np.array_equal(got[name], array)


@pytest.mark.parametrize(
    ("optimizer", "expected_sum", "code", "says"),
    [
        ("adapter.py:optimize", 3.0, BUG_PRESENT, "BUG PRESENT: sample 0, output z: max abs difference 2"),
        ("onnxoptimizer", 3.0, FIXED, "OK: the optimized model gives what the unoptimized one gives"),
        ("no_such_module:optimize", 3.0, CANNOT_TELL, "cannot tell: the optimizer no_such_module:optimize"),
        ("onnxoptimizer", 4.0, CANNOT_TELL, "cannot tell: the unoptimized model no longer gives"),
    ],
)
def test_the_verdict_and_what_it_says(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    optimizer: str,
    expected_sum: float,
    code: int,
    says: str,
) -> None:
    assert check(REPRO, _bundle(tmp_path, expected_sum), optimizer) == code
    assert says in capsys.readouterr().out


def test_samples_round_trip_sequences_of_unequal_shapes_and_absent_optionals(tmp_path: Path) -> None:
    samples = [
        {"x": np.ones((2, 3), np.float32), "seq": [np.zeros(2), np.ones((3, 1))], "none": None, "empty": []},
        {"x": np.arange(3, dtype=np.int64), "seq": [np.full(1, 2.0, ml_dtypes.bfloat16)]},
    ]
    write_samples(tmp_path / "s.npz", samples)
    back = read_samples(tmp_path / "s.npz")
    assert back[0]["none"] is None and back[0]["empty"] == []
    for want, got in zip(samples, back, strict=True):
        assert sorted(want) == sorted(got)
        for name, value in want.items():
            values = value if isinstance(value, list) else [value] if value is not None else []
            gots = got[name] if isinstance(value, list) else [got[name]] if value is not None else []
            assert [(v.dtype, v.shape) for v in values] == [(g.dtype, g.shape) for g in gots]
            assert all(np.array_equal(v, g) for v, g in zip(values, gots, strict=True))


def _ditox_imports(module: object) -> set[str]:
    """The modules of ditox-ci `module` imports: a relative import's module names, an absolute
    import of ditox_ci as written."""
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ditox_ci"):
            found.add(str(node.module))
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("ditox_ci")}
    return found


def test_a_bundle_carries_every_module_of_ditox_ci_its_runtime_imports() -> None:
    """A bundle holds RUNTIME_MODULES as ditox_repro/ and nothing else of ditox-ci: whatever they
    import of it, relatively, is among them (the runtime imports the runner and the interface)."""
    carried = {Path(str(module.__file__)).stem for module in RUNTIME_MODULES}
    for module in RUNTIME_MODULES:
        assert _ditox_imports(module) <= carried, module.__name__
    assert {"runner", "interface"} <= _ditox_imports(repro_runtime)


@pytest.mark.parametrize(
    ("judging", "code", "says"),
    [
        # a per-output tolerance replaces the scalar one: float64's would call 1e-5 of 3.0 the bug
        ({"tolerances": {"z": (1e-6, 1e-8)}}, BUG_PRESENT, "beyond rtol=1e-06 atol=1e-08"),
        ({"tolerances": {"z": (1e-3, 1e-4)}}, FIXED, "OK"),
        # within the tolerances, over the noise limit: what a calibrated sweep calls the bug
        ({"noise_limits": {"z": (1e-6,)}}, BUG_PRESENT, "within rtol=0.001 atol=0.0001 but 300 times"),
        ({"noise_limits": {"z": (1e-4,)}}, FIXED, "OK"),
    ],
)
def test_each_output_is_judged_with_the_sweeps_tolerance_and_noise_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], judging: dict[str, Any], code: int, says: str
) -> None:
    bundle = _with_adapter(
        _bundle(tmp_path),
        "scale = onnx.helper.make_tensor('s', onnx.TensorProto.FLOAT, [], [1.00001])",
        "out.graph.initializer.append(scale)",
        "out.graph.node[-1].output[0] = 'unscaled'",
        "out.graph.node.append(onnx.helper.make_node('Mul', ['unscaled', 's'], ['z']))",
    )
    repro = replace(REPRO, rtol=1e-3, atol=1e-4, **judging)
    assert check(repro, bundle, "adapter.py:optimize") == code
    assert says in capsys.readouterr().out


def test_a_noise_limit_is_as_many_floors_as_the_tensor_oracle_lets_through() -> None:
    assert repro_runtime.NOISE_MARGIN == NOISE_MARGIN


def _graph_bundle(folder: Path, nodes: list[onnx.NodeProto], dtype: int, expected: np.ndarray) -> Path:
    """model.onnx of `nodes` from input x to output z (of `dtype`, shape [2]), fed x = [1, 2]."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", dtype, [2])],
        [helper.make_tensor_value_info("z", dtype, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(folder / "model.onnx"))
    numpy_type = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    write_samples(folder / "inputs.npz", [{"x": np.array([1, 2], numpy_type)}])
    write_samples(folder / "expected.npz", [{"z": expected.astype(numpy_type)}])
    return folder


def test_an_integer_output_is_judged_exactly_as_the_oracle_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """np.allclose let 5001 pass for 5000 (rtol 1e-3): an integer bug read as fixed."""
    offset = helper.make_tensor("c", TensorProto.INT64, [], [4999])
    nodes = [helper.make_node("Add", ["x", "c"], ["z"])]
    bundle = _graph_bundle(tmp_path, nodes, TensorProto.INT64, np.array([5000, 5001]))
    _with_adapter(
        bundle,
        "c = onnx.helper.make_tensor('c', onnx.TensorProto.INT64, [], [5000])",
        "out.graph.initializer[0].CopyFrom(c)",
    )
    model = onnx.load(str(bundle / "model.onnx"))
    model.graph.initializer.append(offset)
    onnx.save(model, str(bundle / "model.onnx"))
    loose = replace(REPRO, rtol=1e-3, atol=1e-4)  # float32's defaults, within which 5001 is 5000
    assert check(loose, bundle, "adapter.py:optimize") == BUG_PRESENT
    assert "output z: 2 of 2 elements differ" in capsys.readouterr().out
    assert check(loose, bundle, "onnxoptimizer") == FIXED


def test_a_drawn_output_is_judged_by_its_shape_and_dtype_alone(tmp_path: Path) -> None:
    """A random op's output differs from expected.npz on every run: judged by value, the
    unoptimized model itself 'no longer gave expected.npz' and no verdict was ever reached."""
    nodes = [helper.make_node("RandomUniformLike", ["x"], ["z"])]
    bundle = _graph_bundle(tmp_path, nodes, TensorProto.FLOAT, np.array([0.25, 0.75]))
    assert check(REPRO, bundle, "onnxoptimizer") == CANNOT_TELL
    assert check(replace(REPRO, drawn=("z",)), bundle, "onnxoptimizer") == FIXED


def test_the_optimized_model_is_judged_against_the_unoptimized_one_run_here(tmp_path: Path) -> None:
    """expected.npz within the tolerances but beyond the noise limit of what this runtime gives
    (another ONNX Runtime rounds otherwise): the original still stands, and the optimized model
    is judged against it, not against expected.npz's rounding."""
    bundle = _bundle(tmp_path, expected_sum=3.00001)
    repro = replace(REPRO, rtol=1e-3, atol=1e-4, noise_limits={"z": (1e-7,)})
    assert check(repro, bundle, "onnxoptimizer") == FIXED
    assert check(repro, bundle, "adapter.py:optimize") == BUG_PRESENT


WRONG_SHAPE = (
    "out.graph.node.append(onnx.helper.make_node('Identity', ['x'], ['d'])); "
    "out.graph.value_info.append(onnx.helper.make_tensor_value_info('d', 1, [3]))"
)


@pytest.mark.parametrize(
    ("change", "full_check", "code", "says"),
    [
        # a value's shape the full check refuses and ONNX Runtime runs (as onnxoptimizer 0.4.2's
        # round trip, the nop control's bug, gives): not the finding's unless it is an invalid model
        (WRONG_SHAPE, False, FIXED, "the bug is fixed"),
        (WRONG_SHAPE, True, BUG_PRESENT, "the optimized model is invalid: [ShapeInferenceError]"),
        # the interface, judged before anything runs, as the sweep judges it
        (
            "out.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE",
            False,
            BUG_PRESENT,
            "the interface changed: graph output #0 ('z') element type changed: FLOAT -> DOUBLE",
        ),
    ],
)
def test_the_verdict_follows_the_sweeps_order_of_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str, full_check: bool, code: int, says: str
) -> None:
    bundle = _with_adapter(_bundle(tmp_path), change)
    assert check(replace(REPRO, full_check=full_check), bundle, "adapter.py:optimize") == code
    assert says in capsys.readouterr().out
