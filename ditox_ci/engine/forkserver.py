"""How the workers are started: forked from a forkserver that imported their modules once.

Light on purpose (multiprocessing alone): the command line starts the forkserver from here before
it imports anything heavy itself, so that the workers' imports (onnx, ONNX Runtime, numpy) run
beside the command line's own instead of after them.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import multiprocessing.forkserver
import time
from typing import Any

from ditox_ci.errors import InternalError

# what every worker needs imported: the forkserver imports it once, each worker forks with it
PRELOAD = ["ditox_ci.engine.worker"]


def mp_context() -> multiprocessing.context.BaseContext:
    """The forkserver context with the workers' modules preloaded; spawn where there is none."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        return context
    return multiprocessing.get_context("spawn")


def warm_up() -> None:
    """Start the forkserver now: its imports (about 0.3 s) then run beside what the caller does
    next (its own imports, the install, the planning) instead of after them."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        mp_context()
        multiprocessing.forkserver.ensure_running()


# how often a worker's start is tried again when the forkserver it comes from died: the optimizer
# may kill its worker's parent (or the OOM killer may pick it), and the next start then reads a
# closed pipe until multiprocessing has found it dead and started another
START_ATTEMPTS = 5
START_BACKOFF_S = 0.2


def start_worker(process: Any) -> None:
    """Start a worker, through a new forkserver when the old one died under it."""
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            process.start()
            return
        except (EOFError, ConnectionError) as exc:
            if attempt == START_ATTEMPTS:
                raise InternalError(f"cannot start a worker process ({type(exc).__name__}: {exc})") from exc
            time.sleep(START_BACKOFF_S * attempt)
