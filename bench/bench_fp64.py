"""Where the float64 rule's ratio and floor come from (`compare.tensor.FP64_RATIO`, `FP64_FLOOR_ULPS`).

For every float output an optimizer changed, with the original's float64 reference at hand
(`engine/fp64.py`), the ratio a result needs to pass: (its largest error against float64 less the
floor) over the original's own largest error there. Measured on
- rewrites that keep the meaning: the real onnxoptimizer over every config of a corpus slice
  (results the sweep does not report as bugs), and the four rewrites of tests/fakes/numerics.py;
- miscompilations: the same rewrites off by 1e-4 (numerics.py), and onnxoptimizer with the first
  Conv or Gemm weight scaled by 0.2 % (faulty_optimizers.optimize_scaled_weight) over the slice.
The ratio must sit above the first group's largest need and below the second's smallest.

python bench/bench_fp64.py [SRC ...]   (default: onnx-node:test_* models with a float output and
the shipped onnx-data models; one process)
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from ditox_ci.compare.tensor import FP64_FLOOR_ULPS, FP64_RATIO
from ditox_ci.corpus import CorpusContext, ModelRef, default_cache_dir, resolve_sources
from ditox_ci.engine import fp64, runner
from ditox_ci.engine.evaluate import EvalSettings, SkipModel, judge, prepare
from ditox_ci.engine.interface import fed, outputs_unchanged
from ditox_ci.engine.plan import build_steps
from ditox_ci.optimizers import load_optimizer

FAKES = Path(__file__).resolve().parents[1] / "tests" / "fakes"
sys.path.insert(0, str(FAKES))

import faulty_optimizers  # noqa: E402  (from tests/fakes, put on the path just above)
import numerics  # noqa: E402

DEFAULT_SOURCES = ("onnx-node", "onnx-data")


@dataclass(frozen=True)
class Need:
    """What one changed float output needs to pass: `ratio` (negative: the floor alone covers it)."""

    where: str
    ratio: float
    error_scale: float


def needs(
    model: onnx.ModelProto, optimized: onnx.ModelProto, feeds, outputs, reference, where: str
) -> list[Need]:
    """Each float output's need, for an optimized model whose outputs keep the original's interface."""
    fed_feeds = fed(feeds, model, optimized)
    if fed_feeds is None or not outputs_unchanged(model, optimized):
        return []
    try:
        got = runner.run_all(runner.load_session(optimized.SerializeToString()), fed_feeds)
    except (runner.RuntimeLoadError, runner.RuntimeRunError):
        return []
    found = []
    for sample, (want, have, exact_row) in enumerate(zip(outputs, got, reference.values)):
        for position, (a, b, exact) in enumerate(zip(want, have, exact_row)):
            if exact is None or not isinstance(b, np.ndarray) or b.dtype.kind != "f" or a.shape != b.shape:
                continue
            r = exact[0]
            judged = np.isfinite(r) & np.isfinite(a) & np.isfinite(b)
            if not judged.any() or np.array_equal(a, b):
                continue
            own = float(np.abs(a[judged] - r[judged]).max())
            error = float(np.abs(b[judged] - r[judged]).max())
            scale = max(float(np.abs(r[judged]).max()), np.finfo(np.float64).tiny)
            floor = FP64_FLOOR_ULPS * float(np.finfo(a.dtype).eps) * scale
            ratio = (error - floor) / own if own > 0 else (np.inf if error > floor else -np.inf)
            found.append(Need(f"{where} #{position} sample {sample}", ratio, error / scale))
    return found


def model_needs(ref: ModelRef, spec: str, configs: Sequence[str]) -> list[Need] | None:
    """The needs of every changed float output of `spec` on `ref`, of results the oracle passes
    (`spec` onnxoptimizer) or fails (a planted miscompilation); None when the model has no
    float64 reference."""
    optimizer = load_optimizer(spec)
    try:
        context = prepare(ref, EvalSettings(samples=1))
    except SkipModel:
        return None
    reference = fp64.reference(context.model, context.feeds, context.outputs, 1, 0)
    if not reference.available:
        return None
    found: list[Need] = []
    seen: set[bytes] = set()
    for step in build_steps(configs, (), optimizer.info):
        try:
            optimized = optimizer.optimize(context.model, list(step.passes), step.fixed_point)
        except Exception:
            continue
        data = optimized.SerializeToString()
        if data == context.data or data in seen:
            continue
        seen.add(data)
        if (judge(context, optimized).kind is None) == (spec == "onnxoptimizer"):
            where = f"{ref.id} [{step.label}]"
            found += needs(context.model, optimized, context.feeds, context.outputs, reference, where)
    return found


def _in_child(ref: ModelRef, spec: str, configs: Sequence[str], conn) -> None:
    conn.send(model_needs(ref, spec, configs))


def corpus_needs(refs: Sequence[ModelRef], spec: str, configs: Sequence[str]) -> tuple[list[Need], int, int]:
    """`model_needs` over `refs`, each model in a process of its own (the optimizer may crash on
    one: it does on test_shape_start_greater_than_end); the needs, the models with a reference and
    the models whose process died."""
    context = multiprocessing.get_context("fork")
    found: list[Need] = []
    with_reference = died = 0
    for ref in refs:
        mine, theirs = context.Pipe(duplex=False)
        child = context.Process(target=_in_child, args=(ref, spec, configs, theirs))
        child.start()
        theirs.close()
        try:
            result = mine.recv()
        except EOFError:
            died += 1
            result = None
        child.join()
        if result is not None:
            with_reference += 1
            found += result
    return found, with_reference, died


def numerics_needs() -> tuple[list[Need], list[Need]]:
    """The legitimate rewrites of tests/fakes/numerics.py, and the same off by 1e-4."""
    good: list[Need] = []
    bad: list[Need] = []
    for case, (build, pass_name) in numerics.CASES.items():
        model = build(case)
        feeds = [numerics.inputs(model)]
        outputs = [runner.run(runner.load_session(model.SerializeToString()), feeds[0])]
        reference = fp64.reference(model, feeds, outputs, 1, 0)
        passes = [pass_name or "eliminate_identity"]
        if pass_name:
            import onnxoptimizer

            legit, wrong = (
                onnxoptimizer.optimize(model, passes),
                numerics.optimize_folded_off_by(model, passes),
            )
        else:
            legit = getattr(numerics, f"optimize_{case}")(model, passes)
            wrong = getattr(numerics, f"optimize_{case}_off_by")(model, passes)
        good += needs(model, legit, feeds, outputs, reference, case)
        bad += needs(model, wrong, feeds, outputs, reference, f"{case} off by {numerics.OFF_BY:g}")
    return good, bad


def _show(label: str, found: Sequence[Need], largest: bool) -> None:
    ordered = sorted(found, key=lambda need: need.ratio, reverse=largest)
    if not ordered:
        print(f"{label}: none")
        return
    print(f"{label}: {len(found)} outputs; {'largest' if largest else 'smallest'} needs:")
    for need in ordered[:5]:
        print(
            f"  {need.ratio:>12.3g}  (error {need.error_scale:.2g} of the output's magnitude)  {need.where}"
        )


def main(argv: Sequence[str] = ()) -> None:
    sources = tuple(argv) or DEFAULT_SOURCES
    refs = resolve_sources(sources, CorpusContext(default_cache_dir(os.environ), 0), None)
    configs = ("default", "fixed-point", "single")
    clean, models, died = corpus_needs(refs, "onnxoptimizer", configs)
    planted, _, _ = corpus_needs(refs, "faulty_optimizers:optimize_scaled_weight", ("single",))
    good, bad = numerics_needs()
    print(f"float64 rule: ratio {FP64_RATIO:g}, floor {FP64_FLOOR_ULPS} ulps of the output's magnitude")
    print(
        f"{models} models with a float64 reference, of {len(refs)} ({', '.join(sources)}); "
        f"{died} crashed the optimizer"
    )
    _show("onnxoptimizer's results the oracle passes", clean, largest=True)
    _show("numerics.py's meaning-keeping rewrites", good, largest=True)
    _show("numerics.py's rewrites off by 1e-4", bad, largest=False)
    _show(
        f"a 0.2 % weight error ({faulty_optimizers.__name__}.optimize_scaled_weight)", planted, largest=False
    )
    keeping = max((need.ratio for need in (*clean, *good)), default=-np.inf)
    breaking = min((need.ratio for need in (*bad, *planted)), default=np.inf)
    holds = "holds" if keeping < FP64_RATIO < breaking else "DOES NOT HOLD"
    print(
        f"largest need of a meaning-keeping rewrite {keeping:.3g} < ratio {FP64_RATIO:g} < smallest "
        f"need of a miscompilation {breaking:.3g}: {holds}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
