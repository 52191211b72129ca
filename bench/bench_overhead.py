"""The sweep against the work it cannot avoid, measured in one run: the ratio to the makespan bound,
where the time goes, and what a shard job pays before and after its models (target: the median of
three sweeps within 1.15× the bound).

The unavoidable work is the oracle's own, done here in one process and timed piece by piece, for
every model of the slice (the onnx wheel's data models and three light networks) and the sweep's
configs (nop, default, every single pass): the original run on each of the oracle's samples plus
its noise-floor run, each optimizer call once, and each distinct optimized model (neither the
original's bytes nor a model judged before) run on the same samples. The makespan bound is the
larger of that work divided by the sweep's workers and, for the model where it is largest, the
model's serial part (its original's runs, which every config waits for) plus the rest of its work
divided by the workers: no schedule ends sooner. The sweep is `sweep` over the same models with as
many workers and no localization, timed from call to report, three times. The fixed cost per shard
job is a fresh `ditox-ci sweep` process over one two-node model: interpreter, imports, plan,
workers' start, report. Printed too: the CPU the sweep's own process spends (plan, pool, report,
beside its workers), the sweep's jobs run in this one process without the pool (what the pool adds
is the difference to the time inside jobs), the same jobs in two processes at once, split by their
cost (what two cores here give: where it is above half the one process's time, the machine's cores
slow each other, a floor no pool goes below), and the costliest model's own unavoidable work, and the
floor of any engine that makes the oracle's checks: the work and the checks alone, spread over the
workers (the costliest model split at no cost) or with that model on one worker.
Loading, feeding, serializing, hashing, checking and comparing are the oracle's too but not
counted in the limit: they are what the sweep may still shave.

python bench/bench_overhead.py [SRC ...]
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto, helper

from ditox_ci.compare.tensor import compare_arrays
from ditox_ci.corpus import CorpusContext, ModelRef, default_cache_dir, resolve_sources
from ditox_ci.engine import runner
from ditox_ci.engine.evaluate import EvalSettings, SkipModel, prepare, run_step
from ditox_ci.engine.heap import keep_freed_memory
from ditox_ci.engine.plan import Step, build_steps
from ditox_ci.log import Log
from ditox_ci.optimizers import LoadedOptimizer, load_optimizer

# the wheel's data models and three of its light networks (random weights, 5-27 MB): models whose
# work outweighs the fixed cost of starting on them
LIGHT = ("squeezenet", "shufflenet", "inception_v1")
SOURCES = ("onnx-data:[sp]*", *(f"onnx-data:light/{name}" for name in LIGHT))
CONFIGS = ("nop", "default", "single")
WORKERS = 2
TARGET = 1.15
RUNS = 3
SERIAL = ("runtime: originals", "runtime: noise floor")


class Clock:
    """Seconds per kind of work, summed."""

    def __init__(self) -> None:
        self.spent: defaultdict[str, float] = defaultdict(float)

    @contextmanager
    def timing(self, kind: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.spent[kind] += time.perf_counter() - start


def _spent(clock: Clock, checks: bool = False) -> float:
    """The unavoidable work so far, or (`checks`) the oracle's other work."""
    return sum(seconds for kind, seconds in clock.spent.items() if kind.startswith("oracle") == checks)


def _in_one_process(refs: Sequence[ModelRef], optimizer: LoadedOptimizer, settings: EvalSettings) -> float:
    """Seconds of the sweep's own jobs (prepare, then every step judged) run here, without the pool."""
    steps = build_steps(CONFIGS, (), optimizer.info)
    start = time.perf_counter()
    for ref in refs:
        try:
            context = prepare(ref, settings)
        except SkipModel:
            continue
        for step in steps:
            run_step(context, optimizer, step, ("tensor",), settings)
    return time.perf_counter() - start


def _half_in_a_process(sources: Sequence[str], ids: Sequence[str], barrier: Any) -> float:
    """`_in_one_process` for the models `ids`, in a process of its own, started with the other half's
    at the barrier."""
    keep_freed_memory()
    wanted = set(ids)
    found = resolve_sources(sources, CorpusContext(default_cache_dir(os.environ)))
    refs = [ref for ref in found if ref.id in wanted]
    optimizer = load_optimizer("onnxoptimizer")
    barrier.wait()
    return _in_one_process(refs, optimizer, EvalSettings())


def _in_two_processes(sources: Sequence[str], cost: Mapping[str, float]) -> float:
    """The sweep's jobs in two processes at once, without the pool: the models dealt by their own
    cost (largest first, each to the lighter half), each process timing its half. What two cores
    here give work that one core does in `_in_one_process`: the machine's own floor for the pool."""
    halves: list[list[str]] = [[], []]
    loads = [0.0, 0.0]
    for model in sorted(cost, key=cost.__getitem__, reverse=True):
        lighter = loads.index(min(loads))
        halves[lighter].append(model)
        loads[lighter] += cost[model]
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(WORKERS, mp_context=context) as pool:
        barrier = manager.Barrier(WORKERS)
        walls = list(pool.map(_half_in_a_process, [sources] * WORKERS, halves, [barrier] * WORKERS))
    return max(walls)


def _limit_of_model(ref: ModelRef, optimizer: LoadedOptimizer, settings: EvalSettings, clock: Clock) -> None:
    """The unavoidable work of one model, timed by kind; what the oracle adds, timed apart."""
    try:
        # the feeds the sweep uses (random, recorded, wide and sign-structured samples, re-drawn
        # where the original gives NaN/Inf); making them is not timed
        context = prepare(ref, settings)
    except SkipModel:
        return
    name = context.runner
    with clock.timing("runtime: originals"):
        outputs = runner.run_all(runner.load_session(context.data, settings.threads, name), context.feeds)
    if settings.calibrate and name == "onnxruntime":
        with clock.timing("runtime: noise floor"):
            runner.run_all(runner.load_noise_session(context.data, settings.threads), context.feeds)
    seen: set[str] = set()
    kept: dict[int, list[bytes]] = {}
    for step in build_steps(CONFIGS, (), optimizer.info):
        try:
            with clock.timing("optimizer"):
                data = _optimized(optimizer, context.data, step)
        except Exception:
            continue
        with clock.timing("oracle: compare bytes, hash"):
            # as the sweep finds a result judged before (engine/evaluate.judge_bytes): by its bytes
            # among those kept, a new one hashed
            repeat = data == context.data or data in kept.get(len(data), ())
            if not repeat:
                digest = hashlib.sha256(data).hexdigest()
                repeat = digest in seen
                seen.add(digest)
                kept.setdefault(len(data), []).append(data)
        if repeat:
            continue
        with clock.timing("oracle: parse, checker"):
            _checked(data)
        try:
            with clock.timing("runtime: optimized"):
                got = runner.run_all(runner.load_session(data, settings.threads, name), context.feeds)
        except (runner.RuntimeLoadError, runner.RuntimeRunError):
            continue
        with clock.timing("oracle: compare outputs"):
            for want_sample, got_sample in zip(outputs, got, strict=False):
                for want, value in zip(want_sample, got_sample, strict=False):
                    if hasattr(want, "dtype") and hasattr(value, "dtype") and want.dtype.kind == "f":
                        compare_arrays(want, value, 1e-3, 1e-4)


def _optimized(optimizer: LoadedOptimizer, data: bytes, step: Step) -> bytes:
    """One optimizer call as the sweep makes it: bytes in and out where the adapter can."""
    if optimizer.optimize_bytes is not None:
        return bytes(optimizer.optimize_bytes(data, step.passes, step.fixed_point))
    model = onnx.ModelProto()
    model.ParseFromString(data)
    return bytes(optimizer.optimize(model, list(step.passes), step.fixed_point).SerializeToString())


def _checked(data: bytes) -> None:
    model = onnx.ModelProto()
    model.ParseFromString(data)
    with contextlib.suppress(onnx.checker.ValidationError):
        onnx.checker.check_model(model)


def fixed_cost(folder: Path) -> float:
    """Wall seconds of a fresh `ditox-ci sweep` process over one model of two nodes."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = folder / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    command = [sys.executable, "-m", "ditox_ci", "sweep", "--models", str(model), "--jobs", str(WORKERS)]
    command += ["--localize", "off", "--quiet", "--cache-dir", str(folder / "cache")]
    command += ["--out", str(folder / "out")]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"the one-model sweep failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return wall


def _table(spent: Mapping[str, float], total: float, rows: Sequence[str]) -> None:
    for kind in rows:
        share = spent[kind] / total if total else 0.0
        print(f"  {kind:<28} {spent[kind]:8.1f}s  {share:6.1%}")


def main() -> None:
    # imported here, not above: each worker imports the main module again (multiprocessing's spawn
    # preparation, from the forkserver), and this module is the bench's; the sweep's own modules
    # are not among the workers' preloaded ones (0.4 s a worker, 15 % of a sweep of the slice).
    # `ditox-ci` and `python -m ditox_ci` have no such main module to import again.
    from ditox_ci.sweep.run import sweep
    from ditox_ci.sweep.setup import SweepOptions

    sources = tuple(sys.argv[1:]) or SOURCES
    refs = resolve_sources(sources, CorpusContext(default_cache_dir(os.environ)))
    # the limit's calls are made as a worker makes them, with the memory freed kept (engine/heap.py)
    keep_freed_memory()
    settings, optimizer, clock = EvalSettings(), load_optimizer("onnxoptimizer"), Clock()
    own_checks: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="ditox-bench-overhead-") as tmp:
        walls = []
        for run in range(RUNS):
            out = f"{tmp}/out-{run}"
            options = SweepOptions(models=sources, configs=CONFIGS, jobs=WORKERS, localize="off", out=out)
            start, cpu_start = time.perf_counter(), time.process_time()
            report = sweep(options, Log({}, quiet=True))
            walls.append(time.perf_counter() - start)
            parent_cpu_s = time.process_time() - cpu_start
        sweep_s = sorted(walls)[RUNS // 2]
        # each model's own unavoidable work, its serial part and its checks
        own: dict[str, float] = {}
        serial: dict[str, float] = {}
        for ref in refs:
            before, checks_before = _spent(clock), _spent(clock, checks=True)
            serial_before = sum(clock.spent[kind] for kind in SERIAL)
            _limit_of_model(ref, optimizer, settings, clock)
            own[ref.id] = _spent(clock) - before
            serial[ref.id] = sum(clock.spent[kind] for kind in SERIAL) - serial_before
            own_checks[ref.id] = _spent(clock, checks=True) - checks_before
        fixed_s = fixed_cost(Path(tmp))
        one_process_s = _in_one_process(refs, optimizer, settings)
        two_processes_s = _in_two_processes(sources, {ref: own[ref] + own_checks[ref] for ref in own})
    work = _spent(clock)
    oracle = _spent(clock, checks=True)
    limit = work / WORKERS
    in_jobs = sum(entry.cost_s for entry in report.models)
    print(f"slice: {' '.join(sources)}, {len(refs)} models × configs {', '.join(CONFIGS)}, {WORKERS} workers")
    print(f"unavoidable work {work:.1f}s in one process (the oracle's other work: {oracle:.1f}s more):")
    unavoidable = ["optimizer", "runtime: originals", "runtime: noise floor", "runtime: optimized"]
    _table(clock.spent, work, unavoidable)
    _table(clock.spent, work, sorted(kind for kind in clock.spent if kind.startswith("oracle")))
    critical = max(own, key=lambda model: serial[model] + (own[model] - serial[model]) / WORKERS)
    path_s = serial[critical] + (own[critical] - serial[critical]) / WORKERS
    bound = max(limit, path_s)
    print(
        f"makespan bound {bound:.1f}s: the larger of work / {WORKERS} workers {limit:.1f}s and the "
        f"critical model's serial part + the rest of its work / {WORKERS}: {serial[critical]:.1f}s + "
        f"{own[critical] - serial[critical]:.1f}s / {WORKERS} = {path_s:.1f}s ({critical})"
    )
    ratios = ", ".join(f"{wall / bound:.2f}×" for wall in walls)
    verdict = "ok" if sweep_s / bound <= TARGET else f"ABOVE TARGET {TARGET}"
    print(f"sweep / bound, {RUNS} runs: {ratios}; median {sweep_s / bound:.2f}× ({verdict})")
    per_worker_s = in_jobs / WORKERS
    last_s = walls[-1]
    print(
        f"the last sweep: {in_jobs:.1f}s inside jobs over {WORKERS} workers ({per_worker_s / last_s:.0%} "
        f"busy), {last_s - per_worker_s:.1f}s of wall outside them (plan, workers' start, waits, report)"
    )
    print(f"(the last sweep - its wall outside jobs) / bound: {per_worker_s / bound:.2f}×")
    print(f"fixed cost per shard job (a fresh sweep of one two-node model): {fixed_s:.2f}s")
    print(f"the sweep's own process (plan, pool, report; not its workers): {parent_cpu_s:.2f}s of CPU")
    print(f"the same jobs in this one process, without the pool: {one_process_s:.1f}s")
    print(
        f"the same jobs in two processes at once, without the pool (split by their cost): "
        f"{two_processes_s:.1f}s of wall, {two_processes_s / bound:.2f}× the bound; "
        f"{one_process_s / 2:.1f}s, {one_process_s / 2 / bound:.2f}×, if two cores did what one does alone"
    )
    costliest = max(own, key=own.__getitem__)
    print(
        f"the costliest model's own unavoidable work: {own[costliest]:.1f}s ({costliest}), "
        f"{own[costliest] / limit:.2f}× the limit: no schedule that runs it on one worker ends sooner"
    )
    # what no engine with today's oracle goes below: the work and its checks spread perfectly, or
    # the model costliest with its checks on one worker, with no preparation, IPC or wall outside jobs
    split = (work + oracle) / WORKERS
    heaviest = max(own, key=lambda model: own[model] + own_checks[model])
    whole = max(split, own[heaviest] + own_checks[heaviest])
    print(
        f"floor with the oracle's checks and nothing else: {split / limit:.2f}× the limit with every "
        f"model split over the workers at no cost, {whole / limit:.2f}× with {heaviest} (the model "
        "costliest with its checks) on one worker"
    )


if __name__ == "__main__":
    main()
