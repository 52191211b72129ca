"""`ditox-ci bisect` over onnx/optimizer's real history (`make bisect-history`): the default sweep
finds bugs in 0.4.2 that commits since fixed (#271 the round trip's lost value types, #277, #293,
#314); bisecting from the 0.4.2 tag (which has them) to main (which has not) names a fix.

Its commits build from source with their `third_party/onnx` submodule, which only a clone with
submodules has: OPTIMIZER_CHECKOUT names one. Without it the test is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ditox_ci.report.since import FIXED, Since

CHECKOUT = Path(os.environ.get("OPTIMIZER_CHECKOUT", "/nonexistent"))
FIXES = ("(#271)", "(#277)", "(#293)", "(#314)")


# each commit is built from source (minutes each, more the first time): beyond the suite's limit
@pytest.mark.timeout(6 * 3600)
@pytest.mark.skipif(
    not (CHECKOUT / "third_party" / "onnx" / "CMakeLists.txt").is_file(),
    reason=(
        "needs OPTIMIZER_CHECKOUT, a clone of onnx/optimizer with its submodules: its commits are "
        "built from source with third_party/onnx, fetched from github.com (`make bisect-history`)"
    ),
)
def test_a_fix_in_onnx_optimizers_history_is_named(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ditox_ci", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=6 * 3600,
        )

    # the round trip drops the ZipMap's sequence-of-maps type in 0.4.2 (one model, the nop control)
    swept = cli(
        "sweep", "--models", "exported:sklearn-scaler-logistic-zipmap", "--configs", "nop", "--out", "swept"
    )
    assert swept.returncode == 1, swept.stderr[-3000:]
    done = cli(
        "bisect", "--report", "swept", "--checkout", str(CHECKOUT), "--bad", "v0.4.2", "--good", "origin/main"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "swept" / "report.json").read_text())
    found = [Since.from_json(f["since"]) for f in report["findings"] if f.get("since")]
    assert any(s.change == FIXED and s.after and s.after.label.endswith(FIXES) for s in found), found
