"""Fuzz throughput: generated models per second, how a fuzz run splits its time between
generating models and sweeping them, and a whole `ditox-ci fuzz` run: models judged per second,
wall time against its budget, and the bytes it leaves per model.
Run: `python bench/bench_fuzz.py` (from `make bench`)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ditox_ci.fuzz import GENERATORS, generate_within, write_corpus
from ditox_ci.log import Log
from ditox_ci.sweep.run import sweep
from ditox_ci.sweep.setup import SweepOptions

GENERATE_S = 5.0
FUZZ_BUDGET_S = 20.0
SWEEP_PASSES = ("fuse_bn_into_conv", "eliminate_nop_transpose", "fuse_consecutive_squeezes")


def main() -> None:
    start = time.monotonic()
    generated = generate_within(GENERATE_S, seed=0)
    generate_s = time.monotonic() - start
    print(f"generate: {len(generated)} models from {len(GENERATORS)} generators in "
          f"{generate_s:.2f}s = {len(generated) / generate_s:.1f} models/s")

    subset = [item for item in generated if item.target_pass in SWEEP_PASSES][:60]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        write_corpus(Path(tmp) / "corpus", subset)
        write_s = time.monotonic() - start
        options = SweepOptions(
            models=(str(Path(tmp) / "corpus"),),
            configs=("nop", *(f"pass:{name}" for name in SWEEP_PASSES)),
            jobs=1, out=str(Path(tmp) / "out"), cache_dir=str(Path(tmp) / "cache"),
        )
        start = time.monotonic()
        sweep(options, Log({}, quiet=True))
        sweep_s = time.monotonic() - start
    per_model_generate = generate_s / len(generated)
    per_model_sweep = sweep_s / max(len(subset), 1)
    share = per_model_generate / (per_model_generate + per_model_sweep)
    print(f"write: {len(subset)} models in {write_s:.2f}s; "
          f"sweep ({len(SWEEP_PASSES)} passes + nop, 1 job): {sweep_s:.2f}s = "
          f"{per_model_sweep * 1000:.1f} ms/model")
    print(f"split per model: generate {per_model_generate * 1000:.1f} ms, "
          f"sweep {per_model_sweep * 1000:.1f} ms -> generation is {share:.0%} of the time")

    fuzz_run()


def fuzz_run() -> None:
    """`ditox-ci fuzz --budget 20 --jobs 2`, every generator, as a user runs it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "fuzz"
        start = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "ditox_ci", "fuzz", "--budget", str(FUZZ_BUDGET_S), "--jobs", "2",
             "--quiet", "--out", str(out)],
            capture_output=True, check=False,
        )
        wall_s = time.monotonic() - start
        fuzz = json.loads((out / "report.json").read_text())["stats"]["fuzz"]
        left = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
        report_bytes = (out / "report.json").stat().st_size
    models = fuzz["models"]
    share = wall_s / FUZZ_BUDGET_S
    print(f"fuzz run (--budget {FUZZ_BUDGET_S:.0f}, 2 jobs): {wall_s:.1f}s wall = {share:.0%} of the budget; "
          f"{models} models = {models / wall_s:.1f} models/s made and judged")
    print(f"output: {left / 1e6:.2f} MB left = {left / max(models, 1):.0f} bytes/model "
          f"({fuzz['models_kept']} models kept; report.json {report_bytes / max(models, 1):.0f} bytes/model)")


if __name__ == "__main__":
    main()
