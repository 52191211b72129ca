"""The float64 rule on rewrites that keep a model's meaning and change its numerics, each on a model of
its own (tests/fakes/numerics.py), and on the same rewrites off by 1e-4: real onnxoptimizer passes
(BatchNorm folded into a Conv, MatMul + Add into a Gemm) and planted ones (a division made a
multiplication by the reciprocal, a reassociated sum).

Each model is judged with tolerances tight enough that the fixed rule (`--calibrate off`) flags the
rewrite: the float64 reference is what clears it, and what still catches the wrong one."""

from __future__ import annotations

import os
from pathlib import Path

import numerics
import pytest

from ditox_ci.corpus.inputs import write_recorded_inputs
from tests import helpers
from tests.helpers import FAKES

TIGHT = ("--rtol", "1e-7", "--atol", "1e-7")


def sweep(tmp_path: Path, case: str, optimizer: str, *args: str, out: str) -> tuple[int, dict, str]:
    build, pass_name = numerics.CASES[case]
    model = build(case)
    folder = tmp_path / case
    if not folder.exists():
        write_recorded_inputs(folder, model, [numerics.inputs(model)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])}
    config = f"pass:{pass_name or 'eliminate_identity'}"
    flags = ("--models", str(folder), "--optimizer", optimizer, "--configs", config, "--localize", "off")
    return helpers.sweep(*flags, "--jobs", "1", *args, out=tmp_path / out, env=env)


def _optimizers(case: str) -> tuple[str, str]:
    """The rewrite as it keeps the meaning, and off by numerics.OFF_BY."""
    if numerics.CASES[case][1] is not None:
        return "onnxoptimizer", "numerics:optimize_folded_off_by"
    return f"numerics:optimize_{case}", f"numerics:optimize_{case}_off_by"


@pytest.mark.parametrize("case", numerics.CASES)
def test_a_rewrite_that_only_rounds_differently_is_no_bug_and_one_off_by_1e_4_is(case: str, tmp_path: Path):
    keeping, wrong = _optimizers(case)
    code, report, stderr = sweep(tmp_path, case, keeping, *TIGHT, "--calibrate", "off", out="fixed")
    assert code == 1, stderr
    [flagged] = report["findings"]
    assert flagged["kind"] == "output-mismatch" and flagged["evidence"]["rule"] == "tolerance"

    code, report, stderr = sweep(tmp_path, case, keeping, *TIGHT, out="fp64")
    assert (code, report["findings"]) == (0, []), stderr

    code, report, stderr = sweep(tmp_path, case, wrong, out="wrong")
    assert code == 1, stderr
    [caught] = report["findings"]
    evidence = caught["evidence"]
    assert caught["kind"] == "output-mismatch" and evidence["rule"] == "fp64"
    assert evidence["error_ratio"] > 100 and evidence["fp64_error"] > evidence["fp64_bound"]
    # 1e-4 of the output's magnitude: worse than float32 rounding, below a wrong result
    assert caught["tier"] == "precision"
