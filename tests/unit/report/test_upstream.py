"""What upstream needs: the culprit pass's source at the tested version and a regression test in
the optimizer's own style (tests/integration/pinpoint/test_standalone.py runs one against 0.4.2)."""

from __future__ import annotations

import ast
import dataclasses

import onnx.parser

from ditox_ci.report.model import Culprit, Finding
from ditox_ci.report.upstream import regression_test, source_url
from tests.helpers import minimal_report

FINDING = Finding(
    "f" * 20, "invalid-model", "m", "default", Culprit("pass", ("fuse_consecutive_transposes",))
)
MODEL = """<ir_version: 10, opset_import: ["" : 21]>
g (float[2,3,4] X0) => (float[2,3,4] Y0)
<int64[1] C0 = {1}>
{
   t0 = Transpose <perm = [0, 2, 1]> (X0)
   t1 = Transpose <perm = [0, 2, 1]> (t0)
   Y0 = Unsqueeze (t1, C0)
}"""
RECORD = {
    "model": MODEL,
    "inputs": {"X0": {"dtype": "float32", "shape": [2, 3, 4], "seed": 0, "low": -1.0, "high": 1.0}},
    "passes": ["fuse_consecutive_transposes"],
    "fixed_point": True,
    "rtol": 0.001,
    "atol": 0.0001,
}


def _report(version: str = "0.4.2", describe: str = ""):
    report = minimal_report(FINDING)
    optimizer = dataclasses.replace(report.optimizer, version=version, build={"git_describe": describe})
    return dataclasses.replace(report, optimizer=optimizer)


def test_the_source_link_points_at_the_tested_version():
    header = "onnxoptimizer/passes/fuse_consecutive_transposes.h"
    assert source_url(_report(), FINDING) == f"https://github.com/onnx/optimizer/blob/v0.4.2/{header}"
    checkout = _report("0.4.3.dev0", "v0.4.2-7-g1a2b3c4d")
    assert source_url(checkout, FINDING) == f"https://github.com/onnx/optimizer/blob/1a2b3c4d/{header}"
    assert source_url(_report("unknown"), FINDING) == f"https://github.com/onnx/optimizer/blob/HEAD/{header}"
    shared = dataclasses.replace(FINDING, culprit=Culprit("shared", ()))
    assert source_url(_report(), shared) is None
    other = dataclasses.replace(_report(), optimizer={"name": "onnxslim", "version": "0.1"})
    assert source_url(other, FINDING) is None


def test_the_regression_test_is_a_method_that_builds_checks_and_compares():
    method = regression_test(_report(), RECORD, FINDING)
    assert method is not None
    tree = ast.parse("class TestOptimizer:\n" + method)
    [function] = tree.body[0].body  # type: ignore[attr-defined]
    assert function.name == "test_fuse_consecutive_transposes_invalid_model"
    assert 'helper.make_node("Transpose", ["X0"], ["t0"], perm=[0, 2, 1])' in method
    assert 'numpy_helper.from_array(np.array([1], dtype=np.int64).reshape([1]), "C0")' in method
    assert 'onnxoptimizer.optimize(model, ["fuse_consecutive_transposes"], True)' in method
    # the kind decides what fails: an invalid model fails ONNX's full check
    assert "checker.check_model(optimized_model, full_check=True)" in method
    assert "rng = np.random.default_rng(0)" in method and "np.testing.assert_allclose" in method


def test_a_model_beyond_plain_helper_code_gets_no_regression_test():
    branch = """<ir_version: 10, opset_import: ["" : 21]>
g (float[2,3,4] X0) => (float[2,3,4] Y0)
<bool C0 = {1}>
{
   Y0 = If (C0) <then_branch = g1 () => (float[2,3,4] t1) { t1 = Identity(X0) },
                 else_branch = g2 () => (float[2,3,4] t2) { t2 = Identity(X0) }>
}"""
    assert onnx.parser.parse_model(branch).graph.node[0].op_type == "If"  # a subgraph, not a parse error
    assert regression_test(_report(), {**RECORD, "model": branch}, FINDING) is None
    assert regression_test(_report(), None, FINDING) is None
