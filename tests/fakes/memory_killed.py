"""A planted optimizer that dies the way the kernel's OOM killer kills a process: on models named
`oom*` it adds one to the OOM-kill counter whose path the model's `oom_counter` metadata names (what
the kernel does in the cgroup's memory.events) and sends itself SIGKILL; on `killed*` it is SIGKILLed
without the counter moving (someone else killed it); on `starved*` it optimizes, but the worker's
comparison of the outputs then raises MemoryError (a planted fault in this worker process alone,
which exits after it). The path travels in the model, not in the
environment: workers fork from a forkserver that an earlier test may have started."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path

import onnx
import onnxoptimizer


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False) -> onnx.ModelProto:
    name = model.graph.name
    if name.startswith("oom") and "nop" not in passes:
        counter = Path(next(p.value for p in model.metadata_props if p.key == "oom_counter"))
        kills = int(counter.read_text().split()[-1])
        counter.write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills + 1}\n")
        os.kill(os.getpid(), signal.SIGKILL)
    if name.startswith("killed") and "nop" not in passes:
        os.kill(os.getpid(), signal.SIGKILL)
    if name.startswith("starved") and "nop" not in passes:
        from ditox_ci.engine import evaluate

        def starved(*args: object, **kwargs: object) -> None:
            raise MemoryError

        evaluate._compare = starved  # type: ignore[assignment]
    return onnxoptimizer.optimize(model, list(passes), fixed_point)
