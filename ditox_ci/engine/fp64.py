"""The float64 reference: the original model computed in float64, what a values difference is
judged against where it can run.

torch.compile's accuracy check (`torch/_dynamo/utils.py`, `same()`) judges a compiled result
against an fp64 run of the eager model: the result passes when its error against fp64 is within a
multiple of the eager float32 result's own error. The tensor oracle does the same with the
original as "eager" (`compare.tensor.fp64_check`): an optimized output is wrong when its error
against float64 exceeds FP64_RATIO times the original's own plus a floor. A rewrite that only
rounds differently (BatchNorm folded into a Conv, a reassociated sum, a division by a constant
made a multiplication by its reciprocal) is then no bug, however ill-conditioned the model.

The model is widened, not re-derived: every float32, float16 and bfloat16 tensor type (graph
inputs, outputs, value_info, initializers, Constant values, Cast and dtype attributes, subgraphs
and functions) becomes float64, and the float inputs are fed widened. It runs in ONNX Runtime with
its own optimizations off, else (many CPU kernels have no float64 version) in ONNX's reference
implementation when the model is small enough for it. Where neither runs, or the widened model's
result is too far from the original's to be its exact version (a widening that changed what the
model means, e.g. a bit-level trick on float16), that output keeps the noise-floor rule.

For integer and boolean outputs (an ArgMax, a comparison) the reference is also run on inputs
moved by a few units in the last place of float32, to tell a decision that float32's rounding can
flip (a tie) from one it cannot.

Runs inside a worker process (`evaluate.py`), computed once per model and only when a difference
needs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from ditox_ci.engine import runner

# the element types widened; float8/float4 are quantization formats, not precisions of one value
WIDENED = frozenset((TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16))
_WIDENED_NUMPY = frozenset(("float32", "float16", "bfloat16"))
# attributes that name an element type a node makes (Cast's `to`, the random ops' and EyeLike's
# `dtype`, DequantizeLinear's `output_dtype`)
TYPE_ATTRIBUTES = frozenset(("to", "dtype", "output_dtype"))
# the reference implementation is numpy op by op: beyond this the reference is not run there
REFERENCE_MAX_BYTES = 16 * 2**20
# a model this large is not widened at all (its float64 copy doubles its weights)
WIDEN_MAX_BYTES = 512 * 2**20
# an output is trusted as the original's exact version only when the original is this close to
# it, relative to its largest magnitude: float16's rounding is ~1e-3, so a model with float16
# islands keeps its reference, and a widening that changed the model's meaning does not
TRUSTED_SCALE = 1e-2
# integer and boolean outputs: the reference is run again on the inputs times (1 + δ), δ drawn
# uniformly within ± TIE_ULPS units in the last place of float32, this many times per sample
TIE_ULPS = 16
TIE_DRAWS = 3


class NotWidened(Exception):
    """The model cannot be widened (too large, or a float tensor it cannot convert)."""


@dataclass(frozen=True)
class Reference:
    """The float64 reference of one model: per sample, per output, the reference value(s) the
    tensor oracle takes (`compare.tensor`'s `reference` option: the exact value, then the values
    under moved inputs for an integer or boolean output), None where there is none to trust; the
    runner that computed it; why there is none at all (`why_not`)."""

    values: Sequence[Sequence[tuple[np.ndarray, ...] | None]] = ()
    runner_name: str = ""
    why_not: str = ""

    @property
    def available(self) -> bool:
        return not self.why_not


def _widen_type(value_type: onnx.TypeProto) -> None:
    which = value_type.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        holder = getattr(value_type, which)
        if holder.elem_type in WIDENED:
            holder.elem_type = TensorProto.DOUBLE
    elif which in ("sequence_type", "optional_type"):
        _widen_type(getattr(value_type, which).elem_type)
    elif which == "map_type":
        _widen_type(value_type.map_type.value_type)


def _widen_tensor(tensor: TensorProto) -> None:
    if tensor.data_type not in WIDENED:
        return
    if tensor.data_location == TensorProto.EXTERNAL:
        raise NotWidened(f"tensor {tensor.name!r} still lives in external data")
    widened = numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float64), tensor.name)
    tensor.CopyFrom(widened)


def _widen_nodes(nodes: Sequence[onnx.NodeProto]) -> None:
    for node in nodes:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.INT and attribute.name in TYPE_ATTRIBUTES:
                if attribute.i in WIDENED:
                    attribute.i = TensorProto.DOUBLE
            elif attribute.type == onnx.AttributeProto.TENSOR:
                _widen_tensor(attribute.t)
            elif attribute.type == onnx.AttributeProto.TENSORS:
                for tensor in attribute.tensors:
                    _widen_tensor(tensor)
            elif attribute.type == onnx.AttributeProto.SPARSE_TENSOR:
                _widen_tensor(attribute.sparse_tensor.values)
            elif attribute.type == onnx.AttributeProto.GRAPH:
                _widen_graph(attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for graph in attribute.graphs:
                    _widen_graph(graph)


def _widen_graph(graph: onnx.GraphProto) -> None:
    for value in (*graph.input, *graph.output, *graph.value_info):
        _widen_type(value.type)
    for tensor in graph.initializer:
        _widen_tensor(tensor)
    for sparse in graph.sparse_initializer:
        _widen_tensor(sparse.values)
    _widen_nodes(graph.node)


def widened(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every float32, float16 and bfloat16 tensor made float64; NotWidened when it
    cannot be."""
    if model.ByteSize() > WIDEN_MAX_BYTES:
        raise NotWidened(f"the model is over {WIDEN_MAX_BYTES // 2**20} MiB")
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    _widen_graph(wide.graph)
    for function in wide.functions:
        _widen_nodes(function.node)
    return wide


def _widen_value(value: Any) -> Any:
    if isinstance(value, list):
        return [_widen_value(item) for item in value]
    if isinstance(value, np.ndarray) and value.dtype.name in _WIDENED_NUMPY:
        return value.astype(np.float64)
    return value


def widened_feed(feed: Mapping[str, Any]) -> dict[str, Any]:
    """`feed` with its float32, float16 and bfloat16 tensors (and sequences of them) as float64."""
    return {name: _widen_value(value) for name, value in feed.items()}


def moved_feed(feed: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """A widened feed with every float tensor × (1 + δ), |δ| ≤ TIE_ULPS units in float32's last place."""
    bound = TIE_ULPS * float(np.finfo(np.float32).eps)
    return {
        name: value * (1.0 + rng.uniform(-bound, bound, value.shape))
        if isinstance(value, np.ndarray) and value.dtype == np.float64
        else value
        for name, value in feed.items()
    }


def _discrete(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in "iub"


def _floating(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.name in _WIDENED_NUMPY


def _trusted(original: np.ndarray, exact: Any) -> bool:
    """Whether `exact` can be the exact version of the float output `original`: the same shape, and
    the original within TRUSTED_SCALE of its largest magnitude wherever both are finite."""
    if not isinstance(exact, np.ndarray) or exact.shape != original.shape:
        return False
    a, b = original.astype(np.float64), exact.astype(np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    if not both.any():
        return False
    scale = float(np.abs(b[both]).max())
    return float(np.abs(a[both] - b[both]).max()) <= TRUSTED_SCALE * max(scale, np.finfo(np.float64).tiny)


def _session(wide: bytes, threads: int) -> tuple[Any, str]:
    """A session of the widened model: ONNX Runtime, else the reference implementation."""
    try:
        return runner.load_session(wide, threads, "onnxruntime"), "onnxruntime"
    except runner.RuntimeLoadError as exc:
        if len(wide) > REFERENCE_MAX_BYTES:
            raise runner.RuntimeLoadError(f"ONNX Runtime cannot load it in float64 ({exc})") from None
    return runner.load_session(wide, threads, "reference"), "reference"


def reference(
    model: onnx.ModelProto,
    feeds: Sequence[Mapping[str, Any]],
    outputs: Sequence[Sequence[Any]],
    threads: int,
    seed: int,
) -> Reference:
    """The float64 reference of `model` on `feeds`, whose original `outputs` decide which of its
    values are trusted (see the module docstring)."""
    try:
        wide = widened(model).SerializeToString()
        session, runner_name = _session(wide, threads)
        with np.errstate(all="ignore"):  # the reference implementation's overflows are the model's
            exact = [runner.run(session, widened_feed(feed)) for feed in feeds]
    except NotWidened as exc:
        return Reference(why_not=f"not widened: {exc}")
    except (runner.RuntimeLoadError, runner.RuntimeRunError) as exc:
        return Reference(why_not=f"float64 does not run: {str(exc)[:300]}")
    rng = np.random.default_rng(seed)
    values: list[list[tuple[np.ndarray, ...] | None]] = []
    for feed, original, wanted in zip(feeds, outputs, exact):
        row: list[tuple[np.ndarray, ...] | None] = []
        moved: list[list[Any]] | None = None
        for position, (mine, theirs) in enumerate(zip(original, wanted)):
            if _floating(mine) and _trusted(mine, theirs):
                row.append((np.asarray(theirs, dtype=np.float64),))
            elif _discrete(mine) and isinstance(theirs, np.ndarray) and theirs.shape == mine.shape:
                if moved is None:
                    moved = _moved_runs(session, widened_feed(feed), rng)
                draws = [run[position] for run in moved if isinstance(run[position], np.ndarray)]
                row.append((theirs, *(draw for draw in draws if draw.shape == mine.shape)))
            else:
                row.append(None)
        values.append(row)
    return Reference(values, runner_name)


def _moved_runs(session: Any, feed: Mapping[str, Any], rng: np.random.Generator) -> list[list[Any]]:
    runs = []
    for _ in range(TIE_DRAWS):
        try:
            with np.errstate(all="ignore"):
                runs.append(runner.run(session, moved_feed(feed, rng)))
        except runner.RuntimeRunError:
            continue
    return runs
