"""The terminal's last line tallies bugs in the summary's words; each new bug is logged once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ditox_ci.cli.sweep import finish
from ditox_ci.log import Log
from ditox_ci.optimizers import load_optimizer
from ditox_ci.optimizers.install import Installation
from ditox_ci.options import resolve
from ditox_ci.report.model import Culprit, Finding, ModelEntry
from ditox_ci.sweep.setup import SweepOptions, SweepSetup, worker_config
from ditox_ci.triage.baseline import load_baseline
from tests.helpers import minimal_report


def test_one_error_per_bug_and_the_summary_s_tally_last(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # one bug seen under three configs: three findings, one bug
    findings = [
        Finding(
            "a" * 20,
            "output-mismatch",
            "m0",
            config,
            Culprit("pass", ("fuse_pad_into_pool",)),
            measured={"message": "output 'y' differs"},
        )
        for config in ("default", "fixed-point", "pass:fuse_pad_into_pool")
    ]
    report = replace(minimal_report(*findings), models=(ModelEntry("m0", "t", ""),))
    options = resolve(SweepOptions, flags={"out": str(tmp_path)}, env={})
    build = Installation("onnxoptimizer", "onnxoptimizer", None, load_optimizer("onnxoptimizer").info)
    config = worker_config(options, build)
    setup = SweepSetup(options, build, load_baseline(None), None, 0.0, config)
    assert finish(report, setup, Log({})) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith(
        "error: new bug aaaaaaaaaaaaaaaaaaaa: output-mismatch in fuse_pad_into_pool "
        "on m0 [default] and 2 more"
    )
    tally = "1 new bug (3 findings on 1 model), 0 known findings, 0 fixed bugs"
    assert lines[-1].startswith(f"notice: {tally}; 1 models (0 skipped, 0.0%), 3 findings in all; report: ")
    summary = (tmp_path / "summary.md").read_text()
    assert "**1 new bug (3 findings on 1 model)** · 0 known findings · 0 fixed bugs" in summary
