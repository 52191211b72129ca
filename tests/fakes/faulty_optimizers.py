"""Planted faulty optimizers: the true culprit is known, so tests can check the verdict.

Each wraps the real onnxoptimizer and misbehaves only for models whose graph name says so, so one
sweep mixes healthy and broken models and must keep going past the broken ones.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections import Counter
from collections.abc import Sequence

import onnx
import onnx.numpy_helper
import onnxoptimizer

BROKEN_PASS = "eliminate_identity"
# how ONNX Runtime starts a log line: a colour, then a timestamp
LOG_STAMP = "\x1b[1;31m2026-01-02 03:04:05.678901234 "

# per worker process: how often it optimized each (model, passes)
_calls: Counter[tuple[bytes, tuple[str, ...]]] = Counter()


def _flip_add_to_sub(model: onnx.ModelProto) -> onnx.ModelProto:
    for node in model.graph.node:
        if node.op_type == "Add":
            node.op_type = "Sub"
            break
    return model


def optimize(
    model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False
) -> onnx.ModelProto:
    """segv*: segfaults on any rewriting pass; hang*: hangs; wrong*: BROKEN_PASS flips an Add;
    wrong_then_segv*: also segfaults when one process optimizes the same model with the same passes
    a second time, as a worker does when a Job asks where the mismatch it just found starts.
    noisy*: writes a line to stderr the way ONNX Runtime logs (colour, timestamp), then optimizes.
    retype*: BROKEN_PASS declares the first graph output double instead of float.
    orphan*: kills the process its worker was forked from (the forkserver), then segfaults, as an
    optimizer that kills its parent (or the OOM killer picking the forkserver) would."""
    name = model.graph.name
    if name.startswith("noisy"):
        os.write(2, f"{LOG_STAMP}[E:fake] noise from {name}\x1b[m\n".encode())
    rewriting = [p for p in passes if p != "nop"]
    if name.startswith("wrong_then_segv"):
        _calls[model.SerializeToString(), tuple(passes)] += 1
        if _calls[model.SerializeToString(), tuple(passes)] > 1:
            ctypes.string_at(0)
    if name.startswith("orphan") and rewriting:
        os.kill(os.getppid(), signal.SIGKILL)
        ctypes.string_at(0)
    if name.startswith("segv") and rewriting:
        os.write(2, f"{LOG_STAMP}[E:fake] {name} is about to crash\x1b[m\n".encode())
        ctypes.string_at(0)
    if name.startswith("hang") and rewriting:
        time.sleep(3600)
    result = onnxoptimizer.optimize(model, list(passes), fixed_point)
    if name.startswith("wrong") and BROKEN_PASS in passes:
        result = _flip_add_to_sub(result)
    if name.startswith("retype") and BROKEN_PASS in passes:
        result.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    return result


def optimize_always_broken(
    model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False
) -> onnx.ModelProto:
    """Breaks every run, the nop control included: an infrastructure fault."""
    return _flip_add_to_sub(onnxoptimizer.optimize(model, list(passes), fixed_point))


PLANTED_SCALE = 1.002


def scale_first_weight(model: onnx.ModelProto, factor: float) -> bool:
    """Scale the weight initializer of the first Conv or Gemm by `factor`; False when none has one."""
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type in ("Conv", "Gemm") and len(node.input) > 1 and node.input[1] in initializers:
            weight = initializers[node.input[1]]
            values = onnx.numpy_helper.to_array(weight)
            if values.dtype.kind != "f":
                continue
            weight.CopyFrom(onnx.numpy_helper.from_array((values * factor).astype(values.dtype), weight.name))
            return True
    return False


def optimize_scaled_weight(
    model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False
) -> onnx.ModelProto:
    """A small miscompilation: every rewriting pass list scales the first Conv or Gemm weight by
    0.2 %, to measure what the tolerances let through."""
    result = onnxoptimizer.optimize(model, list(passes), fixed_point)
    if any(name != "nop" for name in passes):
        scale_first_weight(result, PLANTED_SCALE)
    return result


def optimize_nudged_add(
    model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False
) -> onnx.ModelProto:
    """A drift, not a miscompilation: every rewriting pass list scales the initializer the first
    Add reads by 1 + 1e-4, so whether it is found depends on the tolerances alone."""
    result = onnxoptimizer.optimize(model, list(passes), fixed_point)
    if any(name != "nop" for name in passes):
        initializers = {tensor.name: tensor for tensor in result.graph.initializer}
        add = next(node for node in result.graph.node if node.op_type == "Add")
        weight = initializers[next(name for name in add.input if name in initializers)]
        values = onnx.numpy_helper.to_array(weight)
        weight.CopyFrom(onnx.numpy_helper.from_array((values * 1.0001).astype(values.dtype), weight.name))
    return result


def get_available_passes() -> list[str]:
    return ["nop", "eliminate_identity", "eliminate_deadend", "fuse_bn_into_conv"]


def get_fuse_and_elimination_passes() -> list[str]:
    return ["eliminate_identity", "eliminate_deadend", "fuse_bn_into_conv"]
