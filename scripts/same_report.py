"""Whether two report.json files say the same apart from timings: the check for a refactor.

    python scripts/same_report.py before/report.json after/report.json

Prints every path at which they differ (at most --most of them, with both values) and exits 1,
or says they are the same and exits 0; a missing or unreadable report is one line and exit 2.
Timings are every number under a key ending in `_s` (wall_s, elapsed_s, cost_s, ...) and the
figures that follow from how work fell on the workers (`stats.cache_hits`,
`stats.worker_restarts`, and with screening `stats.optimizer_runs` and `stats.screened_steps`: a
worker runs alone the passes that changed the models it screened before); the `baseline.sources`
paths are compared by file name, so two checkouts compare equal.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SCHEDULING = {
    ("stats", "cache_hits"),
    ("stats", "worker_restarts"),
    ("stats", "optimizer_runs"),
    ("stats", "screened_steps"),
}


def _masked(path: tuple[str, ...], value: Any) -> Any:
    if path and path[-1].endswith("_s") and isinstance(value, int | float):
        return "<timing>"
    if path[-2:] in SCHEDULING:
        return "<scheduling>"
    if path[-2:] == ("baseline", "sources") and isinstance(value, list):
        return [Path(str(source)).name for source in value]
    return value


def differences(a: Any, b: Any, path: tuple[str, ...] = ()) -> list[tuple[str, Any, Any]]:
    """Every (path, a's value, b's value) where the two differ, timings masked."""
    a, b = _masked(path, a), _masked(path, b)
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(set(a) | set(b)):
            found += differences(a.get(key, "<absent>"), b.get(key, "<absent>"), (*path, key))
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, (*path, str(i)))]
    return [] if a == b else [("/".join(path), a, b)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--most", type=int, default=40, help="differences printed at most")
    args = parser.parse_args(argv)
    try:
        reports = [json.loads(path.read_text(encoding="utf-8")) for path in (args.before, args.after)]
    except (OSError, ValueError) as exc:
        print(f"same_report: {exc}", file=sys.stderr)
        return 2
    found = differences(*reports)
    for where, x, y in found[: args.most]:
        print(f"{where}:\n  - {json.dumps(x)[:300]}\n  + {json.dumps(y)[:300]}")
    if found:
        print(f"{len(found)} differences" + (f" ({args.most} shown)" if len(found) > args.most else ""))
        return 1
    print("the same apart from timings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
