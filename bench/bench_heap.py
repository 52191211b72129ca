"""A worker's optimizer calls on a large model, with glibc's default malloc (the naive baseline) and
with the freed memory kept for the job's next call (engine/heap.py), measured in the same run: wall
and kernel time per call, and page faults, each in a fresh process as a worker is.

python bench/bench_heap.py [SRC]   (default: onnx-data:light/bvlc_alexnet, 233 MB; onnxoptimizer,
one pass that changes nothing, the first call apart: the one that faults the memory in either way)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from ditox_ci.corpus import CorpusContext, default_cache_dir, resolve_sources

SOURCE = "onnx-data:light/bvlc_alexnet"
CALLS = 4

_CALLS = """
import json, resource, sys, time
from ditox_ci.engine.heap import keep_freed_memory
from ditox_ci.optimizers import load_optimizer
path, keep, calls = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
if keep:
    assert keep_freed_memory(), "this C library is not glibc"
optimize = load_optimizer("onnxoptimizer").optimize_bytes
data = open(path, "rb").read()
measured = []
for _ in range(calls + 1):
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    optimize(data, ["eliminate_nop_pad"], False)
    after = resource.getrusage(resource.RUSAGE_SELF)
    kernel, faults = after.ru_stime - before.ru_stime, after.ru_minflt - before.ru_minflt
    measured.append((time.perf_counter() - start, kernel, faults))
print(json.dumps({"calls": measured[1:], "max_rss_mb": after.ru_maxrss / 1024}))
"""


def _calls(path: str, keep: bool) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CALLS, path, "1" if keep else "0", str(CALLS)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONSAFEPATH": "1"},
    )
    if done.returncode != 0:
        sys.exit(f"the optimizer calls failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    source = sys.argv[1] if len(sys.argv) > 1 else SOURCE
    (ref,) = resolve_sources((source,), CorpusContext(default_cache_dir(os.environ)))
    size_mb = os.path.getsize(ref.path) / 2**20
    print(f"{source} ({size_mb:.0f} MiB), onnxoptimizer, {CALLS} calls after the first, a fresh process each")
    measured = {}
    for keep, label in ((False, "glibc's default malloc"), (True, "freed memory kept (workers)")):
        result = _calls(ref.path, keep)
        wall, kernel, faults = (statistics.median(call[i] for call in result["calls"]) for i in range(3))
        measured[keep] = wall
        print(
            f"  {label:<30} {wall:6.2f}s a call ({kernel:5.2f}s of it in the kernel, "
            f"{faults:>9,.0f} page faults), peak {result['max_rss_mb']:,.0f} MiB"
        )
    print(f"kept / default: {measured[True] / measured[False]:.2f}× the time of a call")


if __name__ == "__main__":
    main()
