"""A worker keeps what a call freed for the job's next call and gives it back when the job ends:
glibc's real malloc in a fresh process, as a worker is (the image and CI run Debian's glibc), and
a worker's jobs with the real onnxoptimizer and ONNX Runtime."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest

from ditox_ci.engine import worker
from ditox_ci.engine.heap import KEPT_FREE_MAX_BYTES
from ditox_ci.engine.messages import Job, WorkerConfig, WorkerState
from ditox_ci.engine.plan import Step
from ditox_ci.optimizers import load_optimizer
from tests.integration.engine.test_pool import _ref

MIB = 2**20

_FREED = """
import json, sys
from ditox_ci.engine.heap import keep_freed_memory, release_freed_memory

def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

kept = keep_freed_memory()
base = rss_mb()
block = bytearray(int(sys.argv[1]) * 2**20)
block[::4096] = b"x" * len(block[::4096])  # every page touched
del block
freed = rss_mb()
release_freed_memory()
print(json.dumps({"kept": kept, "freed": freed - base, "released": rss_mb() - base}))
"""


def _freed(size_mb: int) -> dict:
    """A block of `size_mb` freed in a fresh process that keeps freed memory, then released."""
    command = [sys.executable, "-c", _FREED, str(size_mb)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_large_block_freed_stays_until_the_job_ends_then_goes_back() -> None:
    measured = _freed(256)
    assert measured["kept"] is True, "this C library is not glibc: workers would fault every call in"
    assert measured["freed"] > 200  # kept for the next call: no page faults on it
    assert measured["released"] < 32  # the job's end gave it back


def test_a_little_free_memory_is_kept_past_the_job_s_end() -> None:
    """malloc_trim walks the whole heap (about 2 ms), too much for each of thousands of small models."""
    size_mb = KEPT_FREE_MAX_BYTES // MIB // 4
    measured = _freed(size_mb)
    assert measured["freed"] > size_mb * 0.8
    assert measured["released"] > size_mb * 0.8


def test_a_dropped_context_is_gone_when_the_memory_it_held_goes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker drops a large model's prepared original when the next model comes: if anything of
    the last job still held it (its screen did), the trim gave nothing back and the next model's
    memory limit was charged with it."""
    monkeypatch.setattr(worker, "CONTEXT_KEPT_MAX_BYTES", 0)  # every model counts as large
    prepared: list[weakref.ref[Any]] = []
    alive_at_release: list[list[bool]] = []
    real_prepare = worker.prepare

    def prepare(*args: Any) -> Any:
        context = real_prepare(*args)
        prepared.append(weakref.ref(context))
        return context

    monkeypatch.setattr(worker, "prepare", prepare)
    monkeypatch.setattr(
        worker, "release_freed_memory", lambda: alive_at_release.append([r() is not None for r in prepared])
    )
    receiver, conn = multiprocessing.Pipe(duplex=False)
    config = WorkerConfig()
    jobs = worker._Jobs(
        conn, WorkerState(multiprocessing.get_context()), config, load_optimizer(config.optimizer)
    )
    steps = (Step("nop", ()),)
    for name in ("first", "second"):
        jobs.run(Job(_ref(tmp_path, name), steps))
    # the first job's end; the first model dropped as the second comes; the second job's end
    assert alive_at_release == [[True], [False], [False, True]]
    assert receiver.poll()
