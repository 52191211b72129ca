"""What the tolerances let through and what they flag, calibrated (`--calibrate on`) against fixed
(`--calibrate off`), measured in the same run on the same models.

Planted: an optimizer that scales the weight initializer of the first Conv or Gemm by 0.2 %
(tests/fakes/faulty_optimizers.py: optimize_scaled_weight) under one pass; every model that has
such a weight should be found. Clean: the real onnxoptimizer over every config; every output
mismatch the calibrated run adds to the fixed one is a false positive unless it is a real bug.

python bench/bench_calibration.py [SRC ...]   (default: the shipped onnx-data models and the
packaged ones; BENCH_CLEAN=0 skips the clean sweeps)
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ditox_ci.corpus import CorpusContext, ModelRef, default_cache_dir, resolve_sources
from ditox_ci.corpus.loading import ModelLoadError, load_model
from ditox_ci.log import Log
from ditox_ci.report import Report
from ditox_ci.sweep import run as sweeping
from ditox_ci.sweep.setup import SweepOptions

FAKES = Path(__file__).resolve().parents[1] / "tests" / "fakes"
os.environ["PYTHONPATH"] = os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])
sys.path.insert(0, str(FAKES))

import faulty_optimizers  # noqa: E402  (from tests/fakes, put on the path just above)

DEFAULT_SOURCES = ("onnx-data", "packaged")
PLANTED_PASS = "eliminate_deadend"


def planted_models(refs: Sequence[ModelRef]) -> set[str]:
    """The models with a float Conv or Gemm weight initializer: where the planted error lands."""
    found = set()
    for ref in refs:
        try:
            model = load_model(ref)
        except (ModelLoadError, OSError):
            continue
        if faulty_optimizers.scale_first_weight(model, faulty_optimizers.PLANTED_SCALE):
            found.add(ref.id)
    return found


def sweep(models: Sequence[str], calibrate: bool, planted: bool, out: str) -> Report:
    options = SweepOptions(
        models=tuple(models),
        optimizer="faulty_optimizers:optimize_scaled_weight" if planted else "onnxoptimizer",
        configs=(f"pass:{PLANTED_PASS}",) if planted else SweepOptions().configs,
        localize="off",
        calibrate=calibrate,
        jobs=int(os.environ.get("BENCH_JOBS", "2")),
        out=out,
    )
    return sweeping.sweep(options, Log({}, quiet=True))


def mismatches(report: Report) -> set[tuple[str, str]]:
    return {(f.model, f.config) for f in report.findings if f.kind == "output-mismatch"}


def main(argv: Sequence[str] = ()) -> None:
    models = tuple(argv) or DEFAULT_SOURCES
    refs = resolve_sources(models, CorpusContext(default_cache_dir(os.environ), 0), None)
    eligible = planted_models(refs)
    with tempfile.TemporaryDirectory(prefix="ditox-bench-") as scratch:
        for calibrate in (False, True):
            report = sweep(models, calibrate, True, scratch)
            ran = {m.id for m in report.models if m.status == "ok"} & eligible
            found = {model for model, _ in mismatches(report)} & ran
            missed = sorted(ran - found)
            print(
                f"planted 0.2 % weight error, calibrate {'on ' if calibrate else 'off'}: found in "
                f"{len(found)} of {len(ran)} models with a Conv/Gemm weight"
                + (f"; missed: {', '.join(missed[:8])}{' …' if len(missed) > 8 else ''}" if missed else "")
            )
        if os.environ.get("BENCH_CLEAN", "1") == "0":
            return
        fixed = mismatches(sweep(models, False, False, scratch))
        calibrated = mismatches(sweep(models, True, False, scratch))
        added = sorted(calibrated - fixed)
        print(
            f"real onnxoptimizer, every config: {len(fixed)} output mismatches with fixed tolerances, "
            f"{len(calibrated)} calibrated; added by calibration: {len(added)}"
            + (f" ({', '.join(f'{m} [{c}]' for m, c in added[:8])})" if added else "")
        )


if __name__ == "__main__":
    main(sys.argv[1:])
