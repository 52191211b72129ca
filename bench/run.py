"""`make bench`: every benchmark, each printing ratios against a baseline measured in the same run."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

BENCHES = (
    "bench_engine",
    "bench_overhead",
    "bench_heap",
    "bench_screen",
    "bench_localize",
    "bench_shard",
    "bench_reuse",
    "bench_fuzz",
)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for name in BENCHES:
        print(f"\n=== {name}", flush=True)
        importlib.import_module(name).main()


if __name__ == "__main__":
    main()
