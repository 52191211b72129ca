"""An issue reproduces its bug from its body alone, and the docs' sample comment and issue are
what ditox-ci renders for a real run.

The real bug: onnxoptimizer 0.4.2's eliminate_consecutive_idempotent_ops drops the first of two
Reshapes although the second's shape has `0` (copy-from-input) entries, in the expanded
GroupNormalization backend-test model.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx.parser
import pytest
from onnx import TensorProto, helper

from ditox_ci.compare.tensor import Tolerances
from ditox_ci.github.text import Texts
from ditox_ci.pinpoint.standalone import checked_standalone, one_tolerance
from ditox_ci.report.bugs import group_bugs
from ditox_ci.report.header import Environment
from ditox_ci.report.model import Culprit, Finding, Report, read_report
from tests.helpers import ROOT, minimal_report

DOCS = ROOT / "docs" / "baseline-and-bot.md"
RUN_URL = "https://github.com/octo/optimizer/actions/runs/42"
SHA = "5" * 40
# DITOX_UPDATE_SAMPLES=1 rewrites the samples in the docs from this run instead of comparing
UPDATE = os.environ.get("DITOX_UPDATE_SAMPLES") == "1"
SAMPLES = {"comment": "### Sample pull-request comment", "issue": "### Sample issue"}
# ONNX Runtime's last digits depend on the CPU's instruction set: the samples are compared with every
# number of four or more decimals masked, so another machine gives the same text
LONG_NUMBER = re.compile(r"-?\d+\.\d{4,}(?:e[-+]?\d+)?")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    # run as the example workflows run it: from the workspace, with a relative --out (an absolute
    # one hid that the standalone check doubled the path and every issue said "did not reproduce")
    workspace = tmp_path_factory.mktemp("workspace")
    out = workspace / "ditox-report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ditox_ci",
            "sweep",
            "--quiet",
            "--jobs",
            "1",
            "--out",
            "ditox-report",
            "--models",
            "onnx-node:test_group_normalization_example_expanded",
            "--configs",
            "default,pass:eliminate_consecutive_idempotent_ops,pass:split_init",
            # reduction stops at its time budget, which a loaded machine reaches: the sample must not
            # depend on the load, so the search always runs to its minimal model
            "--reduce-budget",
            "600",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=workspace,
    )
    assert done.returncode == 1, done.stderr
    real = read_report(out / "report.json")
    [bundle] = {f.repro for f in real.findings if f.repro}
    assert (out / bundle / "standalone.py").is_file()
    # Python's and the platform's versions differ between machines; the lock pins the rest
    environment = Environment(onnx=real.environment.onnx, onnxruntime=real.environment.onnxruntime)
    return dataclasses.replace(real, environment=environment)


def _fenced(text: str, language: str) -> str:
    match = re.search(rf"^(`{{3,}}){language}\n(.*?)\n\1$", text, re.MULTILINE | re.DOTALL)
    assert match, f"no ```{language} block"
    return match.group(2)


def _issue(report: Report) -> str:
    [bug] = [b for b in group_bugs(report.findings) if b.status == "new"]
    texts = Texts(report, SHA, "ditox-report", RUN_URL)
    return texts.issue(bug.first, others=[f.model for f in bug.findings[1:]])


def test_the_issue_opens_with_what_happened_in_the_models_own_terms(report: Report):
    body = _issue(report)
    first_screen = body[: body.index("<details>")]
    # after the hidden markers: the rewrite, constants inline, and what the output became
    opening = next(line for line in first_screen.splitlines() if not line.startswith("<!--"))
    assert opening == (
        "**`eliminate_consecutive_idempotent_ops` rewrote "
        "`Reshape(Reshape(X0, [3, 4, 2, 2]), [0, 0, -1])` into `Reshape(X0, [0, 0, -1])`; "
        "a `0` in Reshape's shape copies its input's dim at that position, "
        "so output `Y0` became float32[3, 2, 8] instead of float32[3, 4, 4].**"
    )
    assert (
        "[source](https://github.com/onnx/optimizer/blob/v0.4.2/onnxoptimizer/passes/"
        "eliminate_consecutive_idempotent_ops.h)" in first_screen
    )
    assert "| Reduced to | 2 of 34 nodes |" in first_screen
    assert "python standalone.py" in first_screen and "commit 555555555555" in first_screen
    # two screens at most before the collapsed blocks, and no raw evidence keys on them
    assert len(first_screen.splitlines()) <= 30 and len(first_screen) <= 3000
    assert "noise_ratio" not in first_screen and "np.float32(" not in body
    assert "GroupNormalization_test" not in body.split("What the sweep measured")[0]


def test_the_issue_body_alone_reproduces_the_reshape_miscompilation(report: Report, tmp_path: Path):
    body = _issue(report)
    script = _fenced(body, "python")
    parsed = onnx.parser.parse_model(script.split('MODEL = r"""')[1].split('"""')[0])
    ops = [node.op_type for node in parsed.graph.node]
    assert ops.count("Reshape") == 2 and len(ops) <= 4  # reduced from 34 nodes
    assert [v.name for v in parsed.graph.input] == ["X0", "C0", "C1"]
    assert [v.name for v in parsed.graph.output] == ["Y0"]
    diagram = _fenced(body, "mermaid")
    assert diagram.startswith("flowchart LR")
    assert 'subgraph after["after eliminate_consecutive_idempotent_ops"]' in diagram
    assert '(["C1 = #91;0, 0, -1#93;"])' in diagram
    # what the sweep saw when it ran the script, in the issue's words
    assert "it did show the bug when ditox-ci ran it" in body and "did not show the bug" not in body

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "standalone.py").write_text(_fenced(body, "python"))
    ran = subprocess.run(
        [sys.executable, "standalone.py"], cwd=fresh, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 1 and ran.stdout.startswith("BUG PRESENT: output Y0 has shape [3, 2, 8]"), (
        ran.stdout + ran.stderr
    )

    # the same script says so once the optimizer no longer breaks the model (no passes: a fixed build)
    fixed = (
        (fresh / "standalone.py")
        .read_text()
        .replace('PASSES = ["eliminate_consecutive_idempotent_ops"]', "PASSES = []")
    )
    (fresh / "fixed.py").write_text(fixed)
    ran = subprocess.run([sys.executable, "fixed.py"], cwd=fresh, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.startswith("OK: "), ran.stdout + ran.stderr


# the imports of onnx/optimizer's onnxoptimizer/test/optimizer_test.py that the method uses
UPSTREAM_FILE = """import unittest

import numpy as np
import onnxoptimizer
import onnxruntime as rt
from onnx import TensorProto, checker, helper, numpy_helper


class TestOptimizer(unittest.TestCase):
{method}

if __name__ == "__main__":
    unittest.main()
"""


def test_the_issue_s_regression_test_fails_on_the_installed_onnxoptimizer_in_a_fresh_folder(
    report: Report, tmp_path: Path
):
    assert importlib.metadata.version("onnxoptimizer") == "0.4.2"
    body = _issue(report)
    method = _fenced(body.split("A regression test for onnxoptimizer/test/optimizer\\_test.py")[1], "python")
    assert method.startswith("    def test_eliminate_consecutive_idempotent_ops_output_mismatch(self):")
    ran = _run_upstream_test(tmp_path, method)
    # it fails on the assertion about the output, not on a name the method lacks
    assert ran.returncode == 1 and "FAILED (failures=1)" in ran.stderr, ran.stderr
    assert "AssertionError" in ran.stderr and "(3, 4, 4)" in ran.stderr, ran.stderr

    # and passes once the optimizer leaves the model alone (no passes: a fixed build)
    fixed = method.replace('["eliminate_consecutive_idempotent_ops"]', "[]")
    ran = _run_upstream_test(tmp_path, fixed)
    assert ran.returncode == 0 and ran.stderr.rstrip().endswith("OK"), ran.stderr


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_the_docs_samples_are_rendered_from_a_real_run(report: Report, sample: str):
    texts = Texts(report, SHA, "ditox-report", RUN_URL)
    rendered = texts.comment("default") if sample == "comment" else _issue(report)
    docs = DOCS.read_text()
    heading = SAMPLES[sample]
    start = docs.index("`````markdown\n", docs.index(heading)) + len("`````markdown\n")
    end = docs.index("\n`````", start)
    if UPDATE:
        DOCS.write_text(docs[:start] + rendered.rstrip("\n") + docs[end:])
    else:
        assert _masked(docs[start:end]) == _masked(rendered.rstrip("\n")), (
            f"the {sample} sample in {DOCS.name} is not what ditox-ci renders now; "
            "re-run with DITOX_UPDATE_SAMPLES=1 to rewrite it"
        )


def _masked(text: str) -> str:
    return LONG_NUMBER.sub("<number>", text)


def _reshapes(x: str, s5: str, s3: str, r: str, y: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Reshape(Reshape(x, [3, 2, 2, 2, 2]), [0, 0, -1]) under these names, which
    eliminate_consecutive_idempotent_ops folds wrongly (the 0 copies a dim of the wrong input), and a feed."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", [x, s5], [r]), helper.make_node("Reshape", [r, s3], [y])],
        "reshapes",
        [
            helper.make_tensor_value_info(x, TensorProto.FLOAT, [3, 4, 2, 2]),
            helper.make_tensor_value_info(s5, TensorProto.INT64, [5]),
            helper.make_tensor_value_info(s3, TensorProto.INT64, [3]),
        ],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [3, 2, 8])],
    )
    feed = {
        x: np.arange(48, dtype=np.float32).reshape(3, 4, 2, 2),
        s5: np.array([3, 2, 2, 2, 2], np.int64),
        s3: np.array([0, 0, -1], np.int64),
    }
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), feed


def test_a_standalone_check_survives_output_that_is_not_utf8(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The child's stdout is read back; bytes that are not UTF-8 (here a Latin-1 child printing a
    non-ASCII output name) must not raise and cost the finding its pinpoint result."""
    model, feed = _reshapes("x", "s5", "s3", "r", "yé")
    feeds = [feed]
    passes = ["eliminate_consecutive_idempotent_ops"]
    finding = Finding("0" * 20, "output-mismatch", "m", "pass:x", Culprit("pass", tuple(passes)))
    monkeypatch.setenv("PYTHONIOENCODING", "latin-1")  # the child is a direct subprocess: it inherits
    record = checked_standalone(
        finding, model, feeds, passes, False, "onnxoptimizer", Tolerances(), tmp_path, 60.0
    )
    assert record is not None and record["reproduces"] is True


def _run_upstream_test(folder: Path, method: str) -> subprocess.CompletedProcess[str]:
    """The method pasted into upstream's test file, run as a script in a fresh folder."""
    (folder / "optimizer_test.py").write_text(UPSTREAM_FILE.format(method=method))
    command = [sys.executable, "optimizer_test.py"]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)


def test_the_script_compares_with_the_tolerance_of_its_outputs_element_type() -> None:
    """float32's for every model made a float16 result's rounding the bug, and a float64 drift none."""

    def outputs(*types: int) -> onnx.ModelProto:
        values = [onnx.helper.make_tensor_value_info(f"y{k}", t, [1]) for k, t in enumerate(types)]
        return onnx.helper.make_model(onnx.helper.make_graph([], "g", [], values))

    assert one_tolerance(outputs(TensorProto.FLOAT16), Tolerances()) == (1e-2, 1e-3)
    assert one_tolerance(outputs(TensorProto.DOUBLE), Tolerances()) == (1e-6, 1e-8)
    assert one_tolerance(outputs(TensorProto.DOUBLE, TensorProto.FLOAT), Tolerances()) == (1e-3, 1e-4)
    # an integer output compares exactly under any tolerance: it does not loosen float64's
    assert one_tolerance(outputs(TensorProto.DOUBLE, TensorProto.INT64), Tolerances()) == (1e-6, 1e-8)
    assert one_tolerance(outputs(TensorProto.DOUBLE), Tolerances(rtol=0.5)) == (0.5, 1e-8)


def test_an_issue_maps_its_short_names_to_the_bundles_when_the_bundle_kept_its_own(tmp_path: Path):
    """A reduction that could not rename (the renamed model failed with another message) leaves the
    bundle's model.onnx with the original names; the issue and its script say X0, C0, Y0 all the
    same, and nothing said which was which."""
    model, feed = _reshapes("/model/input", "/model/shape5", "/model/shape3", "/model/r", "/model/out")
    passes = ["eliminate_consecutive_idempotent_ops"]
    finding = Finding("1" * 20, "output-mismatch", "m", "pass:x", Culprit("pass", tuple(passes)))
    record = checked_standalone(
        finding, model, [feed], passes, False, "onnxoptimizer", Tolerances(), tmp_path, 60.0
    )
    assert record is not None
    short = {"X0": "/model/input", "C0": "/model/shape5", "C1": "/model/shape3", "Y0": "/model/out"}
    assert record["names"] == {**short, "t0": "/model/r"}
    standalone = dataclasses.replace(finding.pinpointing, standalone=record)
    found = dataclasses.replace(finding, pinpointing=standalone)
    issue = Texts(minimal_report(found), "f" * 40, "ditox-report", None).issue(found)
    assert "| `X0` | `/model/input` |" in issue and "| `Y0` | `/model/out` |" in issue
