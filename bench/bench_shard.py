"""Shard balance on the default corpus, measured: 4 shard jobs run for real (target max/mean <= 1.25).

python bench/bench_shard.py              # the 4 shards one after another (~10-13 min on 2 cores), merge
python bench/bench_shard.py --estimate   # only the plan's estimated balance (seconds)

Each shard runs exactly as a CI job would (`ditox-ci sweep --shard I/4 --jobs 2 --localize off`,
default corpus) and its wall time is the whole process, start-up included. The naive baseline is
the same corpus cut in corpus order into 4 equal-count chunks of whole models; it is not run, but
computed from the per-model cost_s that these very shard runs measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ditox_ci.corpus import CorpusContext, ModelRef, default_cache_dir, resolve_sources
from ditox_ci.engine.plan import DEFAULT_CONFIGS, build_steps
from ditox_ci.engine.screen import SCREEN_MIN_MB, screened_from
from ditox_ci.engine.shard import estimate_cost, makespan, plan_jobs, shard_walls
from ditox_ci.optimizers import load_optimizer

SHARDS = 4
WORKERS = 2
TARGET = 1.25


def _line(label: str, loads: Sequence[float]) -> str:
    mean = sum(loads) / len(loads)
    ratio = max(loads) / mean if mean else 1.0
    verdict = "ok" if ratio <= TARGET else f"ABOVE TARGET {TARGET}"
    shards = " ".join(f"{load:.1f}" for load in loads)
    return f"{label:<44} max/mean {ratio:.3f} ({verdict})  shards [{shards}] s"


def _estimated(models: Sequence[ModelRef]) -> None:
    info = load_optimizer("onnxoptimizer", None).info
    steps = build_steps(DEFAULT_CONFIGS, (), info)
    # as the sweep plans: the large models' single passes screened
    from_mb = screened_from(info, steps, SCREEN_MIN_MB)
    costs = {ref.id: estimate_cost(ref, None, from_mb) for ref in models}
    plan = plan_jobs(models, steps, SHARDS, WORKERS, lambda ref: costs[ref.id])
    parts = Counter(job.ref.id for shard in plan for job in shard)
    split = ", ".join(f"{model} ×{count}" for model, count in sorted(parts.items()) if count > 1)
    print(f"plan: {sum(parts.values())} jobs; split by config: {split or 'none'}")
    walls = shard_walls(plan, lambda ref: costs[ref.id], steps, WORKERS)
    print(_line("estimated (size, nodes)", walls), flush=True)


def _run(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ditox_ci", *args], capture_output=True, text=True)


def _measured(models: Sequence[ModelRef], folder: Path) -> None:
    walls: list[float] = []
    for index in range(SHARDS):
        out = folder / f"shard-{index}"
        args = ["sweep", "--shard", f"{index}/{SHARDS}", "--jobs", str(WORKERS), "--localize", "off"]
        started = time.monotonic()
        process = _run([*args, "--quiet", "--out", str(out)])
        walls.append(time.monotonic() - started)
        if process.returncode not in (0, 1):
            sys.exit(f"shard {index}/{SHARDS} failed (exit {process.returncode}): {process.stderr[-2000:]}")
        count = len(json.loads((out / "report.json").read_text())["models"])
        print(f"shard {index}/{SHARDS}: {walls[-1]:.1f} s wall, {count} models", flush=True)
    print(_line(f"measured shard wall time ({SHARDS} real runs)", walls))

    merged = folder / "merged"
    process = _run(["merge", *(str(folder / f"shard-{i}") for i in range(SHARDS)), "--out", str(merged)])
    if process.returncode not in (0, 1):
        sys.exit(f"merge failed (exit {process.returncode}): {process.stderr[-2000:]}")
    report = json.loads((merged / "report.json").read_text())
    entries = {entry["id"]: entry for entry in report["models"]}
    missing = sorted({ref.id for ref in models} - set(entries))
    partial = sorted(model for model, entry in entries.items() if entry.get("configs"))
    verdict = "ok" if not missing and not partial and len(entries) == len(models) else "INCOMPLETE"
    print(f"merged report: {len(entries)} of {len(models)} models, every config of each ({verdict})")
    if missing or partial:
        print(f"  missing: {missing[:5]}  partial: {partial[:5]}")

    # the naive split: corpus order, equal model counts, whole models run by id as the sweep used to
    cost = {model: float(entry.get("cost_s", 0.0)) for model, entry in entries.items()}
    size = -(-len(models) // SHARDS)
    chunks = [models[start : start + size] for start in range(0, len(models), size)]
    naive = [
        makespan([cost.get(ref.id, 0.0) for ref in sorted(chunk, key=lambda ref: ref.id)], WORKERS)
        for chunk in chunks
    ]
    print(_line("naive (computed from measured cost_s)", naive))
    print(
        "  naive: corpus order cut into equal-count chunks, whole models, each chunk's makespan on "
        f"{WORKERS} workers from the cost_s these runs measured (split models: parts summed); "
        "not run, start-up not included"
    )


def main() -> None:
    models = resolve_sources([], CorpusContext(default_cache_dir(os.environ)))
    print(f"default corpus: {len(models)} models, {SHARDS} shards × {WORKERS} workers", flush=True)
    _estimated(models)
    if "--estimate" in sys.argv[1:]:
        return
    with tempfile.TemporaryDirectory(prefix="ditox-bench-shard-") as folder:
        _measured(models, Path(folder))


if __name__ == "__main__":
    main()
