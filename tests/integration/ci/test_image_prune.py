"""The image drops its packages' test suites and nothing it runs: the Dockerfile's `find`, run here
as a dry run over this environment's site-packages (the same locked wheels)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sysconfig
from pathlib import Path

from tests.helpers import ROOT


def _pruned() -> list[Path]:
    """What the Dockerfile's find would delete below this environment's site-packages."""
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    match = re.search(r"find /opt/venv/lib (.+?) -exec rm -rf \{\} \+", dockerfile)
    assert match, "the Dockerfile no longer prunes with find … -exec rm -rf {} +"
    site = Path(sysconfig.get_paths()["purelib"])
    found = subprocess.run(
        ["find", str(site), *shlex.split(match.group(1)), "-print"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [Path(line).relative_to(site) for line in found.stdout.splitlines()]


def test_numpy_and_scipy_lose_their_test_suites_and_onnx_keeps_its_corpora() -> None:
    pruned = _pruned()
    tops = {path.parts[0] for path in pruned}
    assert {"numpy", "scipy"} <= tops
    assert Path("numpy/_core/tests") in pruned and Path("scipy/stats/tests") in pruned
    assert all(path.name == "tests" for path in pruned)
    assert not {"onnx", "onnxruntime", "onnxoptimizer", "pip", "ditox_ci"} & tops
    # what importing numpy, scipy and the runtime's test helpers needs is not a `tests` folder
    assert Path("numpy/testing") not in pruned
