"""A miscompilation that applies on some of the optimizer's calls only: the real onnxoptimizer, but
whenever its pass list holds CULPRIT the first Add of the result becomes a Sub on the calls
$SOMETIMES_WRONG picks: `alternate`, every other call of the run (counted in the file
$SOMETIMES_WRONG_COUNT over every process, so a run with one worker is the same every time), or
`random`, each call with probability one half (an optimizer that reads memory it does not own).
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence

import onnx
import onnxoptimizer
from call_counter import next_call

CULPRIT = "fuse_bn_into_conv"


def _wrong_this_time() -> bool:
    if os.environ.get("SOMETIMES_WRONG") == "random":
        return random.SystemRandom().random() < 0.5
    return next_call("SOMETIMES_WRONG_COUNT") % 2 == 1


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False) -> onnx.ModelProto:
    result = onnxoptimizer.optimize(model, list(passes), fixed_point)
    if CULPRIT in passes and _wrong_this_time():
        add = next((node for node in result.graph.node if node.op_type == "Add"), None)
        if add is not None:
            add.op_type = "Sub"
    return result


def get_available_passes() -> list[str]:
    return onnxoptimizer.get_available_passes()


def get_fuse_and_elimination_passes() -> list[str]:
    return onnxoptimizer.get_fuse_and_elimination_passes()
