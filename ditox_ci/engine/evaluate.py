"""Original vs optimized for one model: the oracles that turn an optimizer call into an Outcome.

Runs inside a worker process (`worker.py`): the optimizer and ONNX Runtime are native code that
can crash, and this module assumes nothing survives that. The original model is prepared once
(`original.py`: parsed, run on every sample) and its outputs are reused by every step; an optimized
model whose bytes were already judged is not run again. What its graph shows before it runs is read
in `structure.py`, the original's noise floor in `noise.py`, saturated samples in `saturation.py`.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import onnx

from ditox_ci.compare import COMPARATORS, Comparison
from ditox_ci.compare.tasks import CompareContext, needs_context
from ditox_ci.corpus.inputs import Feed
from ditox_ci.engine import fp64, runner
from ditox_ci.engine.interface import fed, interface_change, outputs_unchanged
from ditox_ci.engine.original import (
    RUNNER_TITLES,
    EvalSettings,
    ModelContext,
    SkipModel,
    prepare,
    run_original,
)
from ditox_ci.engine.outcome import Outcome, Verdict
from ditox_ci.engine.plan import Step
from ditox_ci.engine.saturation import finite_version, precision_warning, saturated_tensors
from ditox_ci.engine.structure import (
    CONTRIB_DOMAIN,
    checker_error,
    contrib_ops,
    info_notes,
    model_size,
    op_changes,
    unused_initializers,
)
from ditox_ci.optimizers import LoadedOptimizer, optimizer_error
from ditox_ci.report.kinds import (
    INTERFACE_CHANGE,
    INVALID_MODEL,
    OPTIMIZER_ERROR,
    RUNTIME_ERROR,
    RUNTIME_LOAD_ERROR,
    TIERS,
    VALUES_KIND,
    WARNING,
    WRONG_RESULT_SCALE,
    Tier,
)

# A model's whole evaluation is imported from here (the worker, the sweep, `ditox-ci reduce`, the
# tests): preparing the original once (original.py) and judging each step (below).
__all__ = [
    "RUNNER_TITLES",
    "EvalSettings",
    "ModelContext",
    "PhaseCallback",
    "SkipModel",
    "judge",
    "judge_bytes",
    "optimizer_call",
    "optimizer_input",
    "prepare",
    "result_digest",
    "run_step",
]

PhaseCallback = Callable[[str], None]

# How many bytes of judged optimized models a context keeps to find repeats by comparison (the
# first ones judged): sha256 took a fifth of the jobs' time on the overhead bench's slice, where most
# of the 40-odd steps of a model give a result judged before. Beyond it, results are hashed; a large
# model's copies would not fit its memory allowance. The first result judged (the nop control's) is
# kept whatever its size: on light/vgg19 (548 MB) every step but a few gives its bytes, hashed at
# 0.3 s each, and one copy more peaked at 4.7 GiB of its 5.9 GiB allowance (engine/messages.py).
JUDGED_KEPT_MAX_BYTES = 64 * 2**20


def judge(
    context: ModelContext,
    optimized: onnx.ModelProto,
    comparators: Sequence[str] = ("tensor",),
    settings: EvalSettings | None = None,
    on_phase: PhaseCallback | None = None,
) -> Outcome:
    """Run the oracles on an optimized model the optimizer already produced."""
    return judge_bytes(context, optimized.SerializeToString(), comparators, settings, on_phase, optimized)


def judge_bytes(
    context: ModelContext,
    data: bytes,
    comparators: Sequence[str] = ("tensor",),
    settings: EvalSettings | None = None,
    on_phase: PhaseCallback | None = None,
    optimized: onnx.ModelProto | None = None,
) -> Outcome:
    """`judge` for a serialized model: unchanged or already judged bytes are never parsed, others
    are, if only for their size (a verdict reused with its evidence)."""
    settings = settings or EvalSettings()
    digest = result_digest(context, data)
    context.result_sizes[digest] = len(data)
    if digest == context.digest:
        return Outcome(kind=None, digest=context.digest, changed=False)
    if digest in context.judged:
        context.cache_hits += 1
        return context.judged[digest]
    before = context.reuse.outcome(context.judged_as, digest) if context.reuse is not None else None
    # an outcome that brings its evidence (a stored failure, the head's own on the base build):
    # nothing of the result to read; a stored pass is a digest alone, its op changes read below
    if optimized is None:
        optimized = onnx.ModelProto()
        optimized.ParseFromString(data)
    if before is not None and before.evidence:
        outcome = replace(before, reused=True)
    elif before is not None:
        outcome = _reused(context, optimized, before)
    else:
        run_original(context, settings)
        outcome = _judge_changed(context, optimized, data, comparators, settings, on_phase)
    outcome = replace(outcome, digest=digest, changed=True, size=model_size(optimized, len(data)))
    context.judged[digest] = outcome
    if not context.judged_bytes or context.kept_bytes + len(data) <= JUDGED_KEPT_MAX_BYTES:
        context.judged_bytes.setdefault(len(data), []).append((data, digest))
        context.kept_bytes += len(data)
    return outcome


def _reused(context: ModelContext, optimized: onnx.ModelProto, before: Outcome) -> Outcome:
    """A pass judged before for these bytes (`engine.reuse`), with what the result's graph shows
    (its op changes and notes: a fingerprint keys on what a culprit's result removed and added)
    read again from the bytes: a report stores a pass as its digest alone."""
    return replace(before, evidence=_graph_evidence(context, optimized), reused=True)


def _graph_evidence(context: ModelContext, optimized: onnx.ModelProto) -> dict[str, Any]:
    """What the result's graph shows beside the original's: the op types removed and added, and
    notes (`structure.info_notes`)."""
    evidence: dict[str, Any] = op_changes(context.model.graph, optimized.graph)
    info = info_notes(context.model, optimized)
    if info:
        evidence["info"] = info
    return evidence


def result_digest(context: ModelContext, data: bytes) -> str:
    """The sha256 of an optimizer's result, found without hashing where it can be."""
    if data == context.data:
        return context.digest
    return _judged_before(context, data) or hashlib.sha256(data).hexdigest()


def _judged_before(context: ModelContext, data: bytes) -> str | None:
    """The digest of a kept optimized model with exactly these bytes: comparing bytes of the same
    length is many times cheaper than hashing them, and most steps give a result judged before."""
    return next((digest for kept, digest in context.judged_bytes.get(len(data), ()) if kept == data), None)


def _judge_changed(
    context: ModelContext,
    optimized: onnx.ModelProto,
    data: bytes,
    comparators: Sequence[str],
    settings: EvalSettings,
    on_phase: PhaseCallback | None,
) -> Outcome:
    """Every verdict on the result: the checker, the interface, then, as far as the interface lets
    it be fed and compared, ONNX Runtime loading and running it and its values. The outcome is the
    set (`Outcome.of`): an invalid model is still run, so a pass that also miscompiles shows its
    mismatch; a retyped one is still checked, so a pass whose retyping is by design cannot hide an
    invalid model behind it."""
    evidence = _graph_evidence(context, optimized)
    verdicts: list[Verdict] = []
    if context.checker_error is None:
        error = checker_error(data)
        if error is not None:
            evidence["checker"] = error
            verdicts.append(Verdict(INVALID_MODEL, error))
    change = interface_change(context.model, optimized)
    if change is not None:
        verdicts.append(Verdict(INTERFACE_CHANGE, change))
    feeds = fed(context.feeds, context.model, optimized)
    if feeds is None:  # other inputs: nothing the original ran on can be fed by position
        return Outcome.of(verdicts, evidence)
    if on_phase:
        on_phase("run")
    runner_name = context.runner
    contrib = contrib_ops(optimized)
    if contrib:
        # ONNX Runtime's own fusions (FusedConv, Gelu…): the reference runner has none of them
        runner_name = "onnxruntime"
        evidence.setdefault("info", []).append(
            f"holds {CONTRIB_DOMAIN} ops ({', '.join(contrib[:5])}): run in ONNX Runtime only"
        )
    try:
        session = runner.load_session(data, settings.threads, runner_name)
    except runner.RuntimeLoadError as exc:
        return Outcome.of([*verdicts, Verdict(RUNTIME_LOAD_ERROR, str(exc))], evidence)
    try:
        outputs = runner.run_all(session, feeds)
    except runner.RuntimeRunError as exc:
        return Outcome.of([*verdicts, Verdict(RUNTIME_ERROR, str(exc))], evidence)
    if not outputs_unchanged(context.model, optimized):  # the interface change says how they differ
        return Outcome.of(verdicts, evidence)
    values = _comparisons(context, session, outputs, comparators, settings, evidence)
    if values is not None:
        values = _unless_saturated(context, optimized, session, outputs, values, settings)
        if values.kind is not None and (values.kind is VALUES_KIND or not verdicts):
            evidence = values.evidence
            verdicts.append(Verdict(values.kind, values.message))
    if verdicts:
        return Outcome.of(verdicts, evidence)
    introduced = unused_initializers(optimized.graph) - unused_initializers(context.model.graph)
    if introduced:
        message = f"optimizer introduced {len(introduced)} unused initializer(s)"
        return Outcome(
            WARNING,
            message,
            {**evidence, "message": message, "initializers": sorted(introduced)[:20]},
        )
    return Outcome(None, "", evidence)


def _saturated(context: ModelContext, sample: int) -> list[str]:
    if sample not in context.saturated:
        context.saturated[sample] = saturated_tensors(context.model, context.feeds[sample], context.runner)
    return context.saturated[sample]


def _unless_saturated(
    context: ModelContext,
    optimized: onnx.ModelProto,
    session: Any,
    outputs: list[list[Any]],
    mismatch: Outcome,
    settings: EvalSettings,
) -> Outcome:
    """A tensor-oracle mismatch on a sample that drives the original's intermediates to NaN/Inf is
    a precision warning (`saturation.precision_warning`) unless a sample that keeps them finite
    shows a difference too: one of the other samples, or that sample scaled back."""
    sample = mismatch.evidence.get("sample")
    if mismatch.evidence.get("comparator") != "tensor" or not isinstance(sample, int):
        return mismatch
    saturated = _saturated(context, sample)
    if not saturated:
        return mismatch

    def agrees(
        samples: Sequence[int], feeds: Sequence[Feed], expected: list[list[Any]], actual: list[list[Any]]
    ) -> bool:
        noise = [context.noise[i] for i in samples] if context.noise else []
        subset = replace(context, feeds=list(feeds), outputs=expected, noise=noise)
        return _compare("tensor", subset, session, actual, settings).passed

    clean = [i for i in range(len(context.feeds)) if i != sample and not _saturated(context, i)]
    picked = [context.outputs[i] for i in clean]
    if clean and not agrees(clean, [context.feeds[i] for i in clean], picked, [outputs[i] for i in clean]):
        return mismatch
    found = finite_version(context.model, context.feeds[sample], context.runner)
    if found is None:
        return precision_warning(mismatch, sample, saturated, None)
    scale, feed = found
    if context.session is None:
        context.session = runner.load_session(context.data, settings.threads, context.runner)
    try:
        expected = runner.run(context.session, feed)
        actual = runner.run(session, (fed([feed], context.model, optimized) or [feed])[0])
    except runner.RuntimeRunError:
        return mismatch
    if not agrees([sample], [feed], [expected], [actual]):
        return mismatch
    return precision_warning(mismatch, sample, saturated, scale)


def _comparisons(
    context: ModelContext,
    session: Any,
    outputs: list[list[Any]],
    comparators: Sequence[str],
    settings: EvalSettings,
    evidence: dict[str, Any],
) -> Outcome | None:
    """Every comparator runs, even after one failed: the evidence keeps each one's verdict and
    numbers under `comparators` (when there are several) and names the first failing one, which
    gates, as `comparator`, and how wrong the result is (`tier`). None when all pass. What the
    tensor oracle flags is judged again against the float64 reference where one runs (and the
    sweep calibrates): the evidence says which rule judged (`rule`) and, when there is no
    reference, why (`fp64`)."""
    results = [_compare(name, context, session, outputs, settings) for name in comparators]
    if not results[0].passed and results[0].comparator == "tensor" and settings.calibrate:
        reference = _reference(context, settings)
        if reference.available:
            results[0] = _compare("tensor", context, session, outputs, settings, reference.values)
        else:
            evidence["fp64"] = reference.why_not
    if len(results) > 1:
        evidence["comparators"] = {
            r.comparator: {"passed": r.passed, "message": r.message, **r.metrics} for r in results
        }
    gate = next((r for r in results if not r.passed), None)
    if gate is None:
        return None
    return Outcome(
        VALUES_KIND,
        gate.message,
        {
            **evidence,
            **gate.metrics,
            "message": gate.message,
            "output": gate.output,
            "comparator": gate.comparator,
            "tier": tier_of([r for r in results if not r.passed]),
        },
    )


def tier_of(failed: Sequence[Comparison]) -> str:
    """How wrong a result is (`report.kinds.Tier`): the most severe tier of its failed comparisons."""
    return min((_tier(comparison) for comparison in failed), key=TIERS.index)


def _tier(comparison: Comparison) -> str:
    """A failed comparison's tier, from its worst output."""
    metrics = comparison.metrics
    if (
        comparison.comparator != "tensor"
        or metrics.get("reason") != "values"
        or metrics.get("rule") == "exact"
    ):
        return Tier.WRONG_RESULT.value
    if "unexplained" in metrics:
        return Tier.TIES.value if metrics["unexplained"] == 0 else Tier.WRONG_RESULT.value
    scale = float(metrics.get("error_scale", math.inf))
    return Tier.PRECISION.value if scale < WRONG_RESULT_SCALE else Tier.WRONG_RESULT.value


def _reference(context: ModelContext, settings: EvalSettings) -> fp64.Reference:
    """The original's float64 reference on the judged samples, computed on first need."""
    if context.fp64 is None:
        context.fp64 = fp64.reference(
            context.model, context.feeds, context.outputs, settings.threads, settings.seed
        )
    return context.fp64


def _compare(
    name: str,
    context: ModelContext,
    session: Any,
    outputs: list[list[Any]],
    settings: EvalSettings,
    reference: Any = None,
) -> Comparison:
    """The tensor oracle takes the sweep's tolerances (and a float64 reference, when it has one);
    a task comparator its manifest options."""
    if name == "tensor":
        options: Mapping[str, Any] = {
            **settings.tolerances.oracle_options(),
            "noise": context.noise,
            "reference": reference,
            "quanta": context.quanta,
        }
    else:
        options = context.ref.meta.get("comparator_options", {})
    compare = COMPARATORS[name](options)
    if not needs_context(compare):
        return compare(context.outputs, outputs, context.output_names)
    if context.session is None:
        context.session = runner.load_session(context.data, settings.threads, context.runner)
    original = context.session
    task_context = CompareContext(
        lambda feed: runner.run(original, feed), lambda feed: runner.run(session, feed), context.feeds
    )
    return compare(context.outputs, outputs, context.output_names, context=task_context)  # type: ignore[call-arg]


_Result = TypeVar("_Result")


def optimizer_call(context: ModelContext, call: Callable[[], _Result]) -> _Result:
    """`call()`, an optimizer call on the context's model, its time added to `optimizer_s`."""
    started = time.perf_counter()
    try:
        return call()
    finally:
        context.optimizer_s += time.perf_counter() - started


def optimizer_input(context: ModelContext, optimizer: LoadedOptimizer) -> onnx.ModelProto:
    """The original as `optimizer` may take it: a private copy when it may edit its input."""
    if not optimizer.mutates_input:
        return context.model
    model = onnx.ModelProto()
    model.ParseFromString(context.data)
    return model


def run_step(
    context: ModelContext,
    optimizer: LoadedOptimizer,
    step: Step,
    comparators: Sequence[str] = ("tensor",),
    settings: EvalSettings | None = None,
    on_phase: PhaseCallback | None = None,
) -> Outcome:
    """Optimize the original with the step's passes and judge the result."""
    return _optimized_outcome(context, optimizer, step, comparators, settings, on_phase)


def _optimized_outcome(
    context: ModelContext,
    optimizer: LoadedOptimizer,
    step: Step,
    comparators: Sequence[str],
    settings: EvalSettings | None,
    on_phase: PhaseCallback | None,
) -> Outcome:
    if on_phase:
        on_phase("optimize")
    optimize_bytes = optimizer.optimize_bytes
    if optimize_bytes is not None:
        try:
            data = optimizer_call(
                context, lambda: optimize_bytes(context.data, step.passes, step.fixed_point)
            )
        except ValueError:
            pass  # over protobuf's 2 GiB: the ModelProto path below goes through external data
        except Exception as exc:
            return Outcome(OPTIMIZER_ERROR, *optimizer_error(exc))
        else:
            return judge_bytes(context, data, comparators, settings, on_phase)
    model = optimizer_input(context, optimizer)
    try:
        passes = list(step.passes)
        optimized = optimizer_call(context, lambda: optimizer.optimize(model, passes, step.fixed_point))
        if isinstance(optimized, onnx.ModelProto) and optimizer.normalize is not None:
            optimized = optimizer.normalize(optimized)
    except Exception as exc:
        # keyed on the root cause: one bug, one message, whatever wrapped it on the way out
        return Outcome(OPTIMIZER_ERROR, *optimizer_error(exc))
    if not isinstance(optimized, onnx.ModelProto):
        message = f"optimizer returned {type(optimized).__name__}, not ModelProto"
        return Outcome(OPTIMIZER_ERROR, message, {"message": message})
    return judge(context, optimized, comparators, settings, on_phase)
