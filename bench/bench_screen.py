"""Screening (engine/screen.py) against running every single pass on its own, measured in the same
run on the same large models: the sweep's wall time and optimizer calls with `--screen on` and
`--screen off`, and whether both reports hold the same verdicts.

python bench/bench_screen.py [SRC ...]   (default: the light networks over 64 MiB that sweep fastest,
bvlc_alexnet and resnet50; configs as the default sweep's, 2 workers)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ditox_ci.log import Log
from ditox_ci.report.model import write_report
from ditox_ci.sweep.run import sweep
from ditox_ci.sweep.setup import SweepOptions

SOURCES = ("onnx-data:light/bvlc_alexnet", "onnx-data:light/resnet50")
WORKERS = 2
SAME_REPORT = Path(__file__).resolve().parents[1] / "scripts" / "same_report.py"


def _timed(sources: Sequence[str], out: Path, screen: bool) -> tuple[float, dict]:
    options = SweepOptions(models=tuple(sources), jobs=WORKERS, localize="off", out=str(out), screen=screen)
    start = time.perf_counter()
    report = sweep(options, Log({}, quiet=True))
    seconds = time.perf_counter() - start
    # sweep() returns the report; the command line's finish writes it, so the comparison needs it here
    out.mkdir(parents=True, exist_ok=True)
    write_report(report, out / "report.json")
    return seconds, report.stats.to_json()


def _same_verdicts(first: Path, second: Path) -> str:
    """scripts/same_report.py's word (it masks the counters screening changes by design): exit 0
    the same, 1 what differs, anything else the comparison itself failed."""
    done = subprocess.run(
        [sys.executable, str(SAME_REPORT), str(first / "report.json"), str(second / "report.json")],
        capture_output=True,
        text=True,
    )
    if done.returncode == 0:
        return "the same verdicts"
    if done.returncode == 1:
        keys = [line.rstrip(":") for line in done.stdout.splitlines() if line.endswith(":")]
        return "DIFFERENT: " + "; ".join(keys[:5])
    sys.exit(f"scripts/same_report.py failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")

def main() -> None:
    sources = tuple(sys.argv[1:]) or SOURCES
    with tempfile.TemporaryDirectory(prefix="ditox-bench-screen-") as tmp:
        # screened first: what a first sweep in the process pays (the workers' forkserver) is its
        screened_s, screened = _timed(sources, Path(tmp, "screened"), screen=True)
        alone_s, alone = _timed(sources, Path(tmp, "alone"), screen=False)
        verdicts = _same_verdicts(Path(tmp, "alone"), Path(tmp, "screened"))
    print(f"screening: {' '.join(sources)}, default configs, {WORKERS} workers")
    calls, cleared = screened["optimizer_runs"], screened.get("screened_steps", 0)
    print(f"each pass alone (--screen off): {alone_s:7.1f}s  optimizer calls {alone['optimizer_runs']}")
    print(f"screened (--screen on):         {screened_s:7.1f}s  optimizer calls {calls}, cleared {cleared}")
    print(f"speed-up: {alone_s / screened_s:.1f}×; reports: {verdicts}")


if __name__ == "__main__":
    main()
