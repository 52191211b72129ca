"""Two builds of one planted optimizer, a pull request's head and its base, that call themselves
the same version (as a head wheel built from a checkout of 0.4.2-and-more does):

- both: the real onnxoptimizer 0.4.2, so the round trip (the nop control) drops the type of a
  sequence output and fails the checker; `retype*` models: BROKEN_PASS declares the first
  output double, the same output on both builds; `flaky*` models: FLAKY_PASS crashes (SIGSEGV)
  on the calls numbered in $PLANTED_FLAKY_CRASHES (counted in the file $PLANTED_FLAKY_COUNT, over
  every process of a run), a heap-dependent read made countable;
- the head (`planted_head`) also restores the sequence output types its round trip dropped (the
  fix of onnx/optimizer#271), and has two passes the base lacks: NEW_PASS (the real
  fuse_consecutive_squeezes under a new name, so only a model with two Squeezes makes it fire) and
  IDLE_PASS (the real nop: it never changes a model).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

import onnx
import onnxoptimizer
from call_counter import next_call

VERSION = "0.4.2"
BROKEN_PASS = "eliminate_identity"
FLAKY_PASS = "eliminate_deadend"
NEW_PASS = "fuse_consecutive_squeezes_v2"
IDLE_PASS = "eliminate_nop_squeeze"


def _restore_output_types(original: onnx.ModelProto, result: onnx.ModelProto) -> None:
    declared = {output.name: output.type for output in original.graph.output}
    for output in result.graph.output:
        if output.type.WhichOneof("value") is None and output.name in declared:
            output.type.CopyFrom(declared[output.name])


def optimize(
    model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False, *, head: bool = False
) -> onnx.ModelProto:
    name = model.graph.name
    if name.startswith("flaky") and FLAKY_PASS in passes:
        crashes = {int(n) for n in os.environ.get("PLANTED_FLAKY_CRASHES", "").split(",") if n}
        if next_call("PLANTED_FLAKY_COUNT") in crashes:
            ctypes.string_at(0)
    renamed = {NEW_PASS: "fuse_consecutive_squeezes", IDLE_PASS: "nop"}
    real = [renamed.get(p, p) for p in passes]
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = onnxoptimizer.optimize(model, real, fixed_point)
    if head:
        _restore_output_types(original, result)
    if name.startswith("retype") and BROKEN_PASS in passes:
        result.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    return result
