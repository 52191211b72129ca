"""The core loop, engine vs naive, measured in the same run on the same models and configs.

Naive (the research prototype's loop): for each config, load the model, optimize, build a session
for the original and run it, build a session for the optimized model and run it, compare. The engine:
the original runs once per sample and is reused by every config; an optimized model byte-identical to
the original or to one already judged is not run again; the model is parsed once per worker; work
spreads over the worker processes.

python bench/bench_engine.py [SRC ...]   (default: onnx-node and the shipped onnx-data models except
the multi-hundred-MB `light` ones; every STRIDE-th model; configs nop + default + every single pass)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence

import numpy as np
import onnx

from ditox_ci.compare.tensor import compare_arrays
from ditox_ci.corpus import CorpusContext, ModelRef, default_cache_dir, resolve_sources
from ditox_ci.corpus.inputs import make_feeds
from ditox_ci.engine import runner
from ditox_ci.engine.plan import Step, build_steps
from ditox_ci.log import Log
from ditox_ci.optimizers import load_optimizer
from ditox_ci.report.stats import SweepStats
from ditox_ci.sweep.run import sweep
from ditox_ci.sweep.setup import SweepOptions

DEFAULT_SOURCES = ("onnx-node", "onnx-data:[sp]*")
STRIDE = int(os.environ.get("BENCH_STRIDE", "3"))
CONFIGS = ("nop", "default", "single")


def naive(refs: Sequence[ModelRef], steps: Sequence[Step]) -> tuple[float, int, int]:
    """Returns seconds, optimizer runs, runtime runs."""
    optimizer = load_optimizer("onnxoptimizer")
    optimizer_runs = runtime_runs = 0
    start = time.perf_counter()
    for ref in refs:
        for step in steps:
            model = onnx.load(ref.path)
            try:
                feeds = make_feeds(model, ref, 1, 0)
                original = runner.run_all(runner.load_session(model.SerializeToString()), feeds)
                runtime_runs += 1
                optimized = optimizer.optimize(model, list(step.passes), step.fixed_point)
                optimizer_runs += 1
                outputs = runner.run_all(runner.load_session(optimized.SerializeToString()), feeds)
                runtime_runs += 1
            except Exception:
                continue  # the naive loop judges nothing it cannot run; neither does the engine
            for want, got in zip(original[0], outputs[0]):
                if not isinstance(want, list):
                    compare_arrays(np.asarray(want), np.asarray(got), 1e-3, 1e-4)
    return time.perf_counter() - start, optimizer_runs, runtime_runs


def engine(sources: Sequence[str], out: str, jobs: int) -> tuple[float, SweepStats, set[str]]:
    # the core loop only: localization and reduction are measured by bench_localize
    options = SweepOptions(models=tuple(sources), configs=CONFIGS, out=out, jobs=jobs, localize="off")
    start = time.perf_counter()
    report = sweep(options, Log({}, quiet=True))
    crashed = {f.model for f in report.findings if f.kind in ("optimizer-crash", "optimizer-timeout")}
    return time.perf_counter() - start, report.stats, crashed


def main() -> None:
    sources = tuple(sys.argv[1:]) or DEFAULT_SOURCES
    context = CorpusContext(default_cache_dir(os.environ))
    refs = resolve_sources(sources, context)[::STRIDE]
    with tempfile.TemporaryDirectory() as tmp:
        subset = os.path.join(tmp, "subset")
        os.makedirs(subset)
        for ref in refs:  # the same models, with their recorded inputs, for both loops
            target = os.path.join(subset, ref.id.replace(":", "_").replace("/", "_"))
            shutil.copytree(os.path.dirname(ref.path), target)
        info = load_optimizer("onnxoptimizer").info
        steps = build_steps(CONFIGS, (), info)
        print(f"engine vs naive: {len(refs)} models × {len(steps)} configs ({', '.join(CONFIGS)})")
        jobs = os.cpu_count() or 1
        engine_1, stats_1, crashed = engine([subset], os.path.join(tmp, "e1"), 1)
        engine_n, _, _ = engine([subset], os.path.join(tmp, "en"), jobs)
        safe = [r for r in resolve_sources([subset], context) if r.id not in crashed]
        naive_s, naive_opt, naive_rt = naive(safe, steps)
    print(f"naive loop (1 process):  {naive_s:8.1f}s  optimizer runs {naive_opt}, runtime runs {naive_rt}")
    print(
        f"engine --jobs 1:         {engine_1:8.1f}s  optimizer runs {stats_1.optimizer_runs}, "
        f"runtime runs {stats_1.runtime_runs}, cache hits {stats_1.cache_hits}"
    )
    print(f"engine --jobs {jobs}:         {engine_n:8.1f}s")
    print(f"speed-up, same core count:  {naive_s / engine_1:5.1f}×")
    print(f"speed-up, all {jobs} cores:     {naive_s / engine_n:5.1f}×   (target ≥ 10×)")


if __name__ == "__main__":
    main()
