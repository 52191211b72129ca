"""A crash in code every pass of a custom optimizer goes through, not in its control, found by a
real sweep: one bug in the optimizer's shared code, not one per pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from shared_crash import PASSES

from tests.helpers import FAKES, sweep


def _model(folder: Path, name: str, weight: str) -> None:
    """y = x + w, w an initializer named as an exporter would: the crash message names it."""
    w = numpy_helper.from_array(np.ones(4, np.float32), weight)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", weight], ["y"])],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / f"{name}.onnx")


def test_a_crash_under_every_pass_but_not_the_control_is_one_shared_code_bug(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    _model(folder, "first", "conv1.weight_3")
    _model(folder, "second", "onnx::Add_12")

    code, report, stderr = sweep(
        "--models",
        str(folder),
        "--optimizer",
        f"{FAKES / 'shared_crash.py'}:optimize",
        "--configs",
        "default,nop,single",
        "--reduce-budget",
        "5",
        out=tmp_path / "r",
    )

    assert code == 1, stderr
    findings = report["findings"]
    # default and every single pass, on each model: still one finding each, for the record …
    assert len(findings) == 2 * (1 + len(PASSES))
    assert {f["culprit"]["scope"] for f in findings} == {"shared"}
    # … and one bug
    assert len({f["fingerprint"] for f in findings}) == 1
    assert {tuple(f["culprit"]["seen_under"]) for f in findings} == {tuple(PASSES)}
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert "**1 new bug (12 findings on 2 models)**" in summary
    assert f"the optimizer's shared code, seen under {len(PASSES)} passes" in summary
    assert sum(1 for f in findings if f["repro"]) == len(findings)  # one bundle shared by all
    assert len({f["repro"] for f in findings}) == 1
