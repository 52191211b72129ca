"""An optimizer whose miscompilation applies on every other call (tests/fakes/sometimes_wrong.py),
swept for real: every finding is pinned on the culprit pass or called nondeterministic, on a pass
list that holds it, and never blamed on a pass that has nothing to do with it."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from sometimes_wrong import CULPRIT

from tests import helpers
from tests.helpers import FAKES
from tests.integration.sequence_models import plain_model


def test_a_miscompilation_on_every_other_call_is_never_blamed_on_bystanders(tmp_path: Path) -> None:
    corpus = tmp_path / "models"
    corpus.mkdir()
    for index in range(3):
        onnx.save(plain_model(f"plain{index}"), corpus / f"plain{index}.onnx")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]),
        "SOMETIMES_WRONG": "alternate",
        "SOMETIMES_WRONG_COUNT": str(tmp_path / "calls"),
    }
    configs = f"default,fixed-point,pass:{CULPRIT}"
    args = ("--models", str(corpus), "--optimizer", "sometimes_wrong:optimize", "--configs", configs)
    code, report, stderr = helpers.sweep(
        *args, "--jobs", "1", "--reduce-budget", "2", out=tmp_path / "r", env=env
    )
    assert code == 1, stderr
    culprits = [f["culprit"] for f in report["findings"]]
    assert culprits and {f["kind"] for f in report["findings"]} == {"output-mismatch"}
    for culprit in culprits:
        if culprit["scope"] in ("pass", "interaction"):
            assert culprit["passes"] == [CULPRIT], culprit
        elif culprit["scope"] == "nondeterministic":
            assert CULPRIT in culprit["passes"] and "comes and goes" in culprit["method"], culprit
        else:
            assert culprit["passes"] == [], culprit
    # the multi-pass configs' failures were searched with repeats, and said so
    nondeterministic = [c for c in culprits if c["scope"] == "nondeterministic"]
    assert nondeterministic and all(c["passes"] == [CULPRIT] for c in nondeterministic)
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert f"nondeterministic: {CULPRIT}" in summary.replace("\\_", "_")
