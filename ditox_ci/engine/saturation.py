"""Saturated intermediates: a difference the original's own overflow explains is not a bug.

When a sample drives an intermediate value of the original to NaN/Inf (Exp∘Exp from |x| ≈ 4.5 in
float32), its final outputs may still be finite (an ArgMax over ties of inf) and differ from an
optimized model that computes the mathematically right answer (eliminate_nop_monotone_argmax drops
the Exps). NNSmith searches for inputs that keep every intermediate finite for this reason. Here the
search runs only where it matters: once an output mismatch shows, on the sample it showed on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ditox_ci.corpus.inputs import wide_inputs
from ditox_ci.engine import runner
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.values import record_values
from ditox_ci.report.kinds import WARNING

# how far a saturated sample's float inputs are scaled back, step by step, to find one that keeps
# every intermediate finite
SATURATION_SCALES = (0.1, 0.01, 0.001)
# saturated tensors named in the evidence
TENSORS_SHOWN = 5


def _nonfinite(value: Any) -> bool:
    array = np.asarray(value)
    if "float" in array.dtype.name and array.dtype.kind not in "fc":  # bfloat16, float8…
        array = array.astype(np.float32)
    return array.dtype.kind in "fc" and not np.isfinite(array).all()


def saturated_tensors(model: onnx.ModelProto, feed: Mapping[str, Any], runner_name: str) -> list[str]:
    """The intermediates of `model` (neither inputs nor outputs: the oracle compares an output's
    NaN/Inf itself) that hold NaN/Inf on `feed`, in graph order. [] when none do, when the feed
    holds NaN/Inf itself (recorded inputs that test how NaN propagates), or when the model cannot
    be run with its values exposed (nothing is then known to be saturated)."""
    if any(_nonfinite(value) for value in feed.values() if not isinstance(value, list)):
        return []
    try:
        [values] = record_values(model, [dict(feed)], runner_name)
    except (runner.RuntimeLoadError, runner.RuntimeRunError):
        return []
    outputs = {value.name for value in model.graph.output}
    return [
        name
        for name, value in values.items()
        if name not in feed and name not in outputs and _nonfinite(value)
    ]


def scaled_feed(model: onnx.ModelProto, feed: Mapping[str, Any], scale: float) -> dict[str, Any] | None:
    """`feed` with its float tensor inputs × `scale`; None when it has none."""
    names = wide_inputs(model, dict(feed))
    if not names:
        return None
    return {**feed, **{name: (feed[name] * scale).astype(feed[name].dtype) for name in names}}


def finite_version(
    model: onnx.ModelProto, feed: Mapping[str, Any], runner_name: str
) -> tuple[float, dict[str, Any]] | None:
    """The first scale of SATURATION_SCALES at which `feed` keeps every intermediate finite, and the
    feed at it; None when none does."""
    for scale in SATURATION_SCALES:
        scaled = scaled_feed(model, feed, scale)
        if scaled is None:
            return None
        if not saturated_tensors(model, scaled, runner_name):
            return scale, scaled
    return None


def precision_warning(mismatch: Outcome, sample: int, tensors: Sequence[str], scale: float | None) -> Outcome:
    """The warning a mismatch becomes when it shows only on a sample with saturated intermediates;
    `scale` is the one at which that sample kept them finite and the outputs agreed (None: no
    scale did)."""
    message = (
        "precision: the outputs differ only on a sample that drives intermediates of the original to NaN/Inf"
    )
    evidence = {
        **mismatch.evidence,
        "message": message,
        "mismatch": mismatch.message,
        "saturated": {"sample": sample, "tensors": list(tensors[:TENSORS_SHOWN]), "finite_scale": scale},
    }
    return Outcome(WARNING, message, evidence, mismatch.digest, mismatch.changed)
