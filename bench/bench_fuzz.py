"""Fuzz throughput: generated models per second, and how a fuzz run splits its time between
generating models and sweeping them. Run: `python bench/bench_fuzz.py` (from `make bench`)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from ditox_ci.fuzz import GENERATORS, generate_within, write_corpus
from ditox_ci.log import Log
from ditox_ci.sweep import SweepOptions, run_sweep

GENERATE_S = 5.0
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
        run_sweep(options, Log({}, quiet=True))
        sweep_s = time.monotonic() - start
    per_model_generate = generate_s / len(generated)
    per_model_sweep = sweep_s / max(len(subset), 1)
    share = per_model_generate / (per_model_generate + per_model_sweep)
    print(f"write: {len(subset)} models in {write_s:.2f}s; "
          f"sweep ({len(SWEEP_PASSES)} passes + nop, 1 job): {sweep_s:.2f}s = "
          f"{per_model_sweep * 1000:.1f} ms/model")
    print(f"split per model: generate {per_model_generate * 1000:.1f} ms, "
          f"sweep {per_model_sweep * 1000:.1f} ms -> generation is {share:.0%} of the time")


if __name__ == "__main__":
    main()
