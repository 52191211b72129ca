"""A PR check's cost against a full sweep of the default corpus, measured in one run (target: the
PR check at most 30 % of the full sweep's CPU).

The head is a wheel of the installed onnxoptimizer with one pass changed (tests/fakes/wheels.py
`changed_pass_onnxoptimizer`: where fuse_bn_into_conv fires, its result also doubles the first
output; every other result is the release's, byte for byte). First the base branch's
report is made, as its nightly would: `sweep` of onnxoptimizer (not counted). Then, each a fresh
`ditox-ci sweep --localize off` of the default corpus with 2 workers:

  full sweep  the head, every result judged (`--no-reuse`);
  PR check, reuse only
              the head with `--base-optimizer onnxoptimizer --reuse-from <base report> --no-carry`:
              results byte-identical to ones judged in the base report are not run or compared,
              and each finding is re-run on the base build (whose results identical to the head's
              take the head's outcome);
  PR check    the same with what the PR changed (`--changed-since`, in a checkout whose
              fuse_bn_into_conv.h changed since the base commit: `changed_pass_checkout`): a config
              without fuse_bn_into_conv whose result on a model the base report knows (the
              control's bytes, or its own judged there) is carried, not called, and so are
              `default` and `fixed-point` on a model where each of their passes alone leaves it as
              the control does (fuse_bn_into_conv called alone first: engine/reuse.py).
              Both PR checks run with `--exercise-budget 0`: the models a PR check makes for the
              passes it changes cost their budget (60 s of wall time on shard 0 by default)
              whatever the corpus, and a full sweep makes none.

CPU is every process of the sweep's tree (the sweep, its forkserver, the workers), read from /proc
every POLL_S seconds. Each PR check's findings must be the full sweep's (model, config, kind,
fingerprint), else the bench says so.

The same again for a head that changes a pass outside the default list (`replace_einsum_with_matmul`,
with its own full sweep): `default` and `fixed-point` are then carried too, and the PR's pass alone
is called on each model.

Then, from each run's per-model costs (`cost_s`), the wall time N shard jobs of 2 workers would
take (N = 1, 2, 4, 8): the planner's own plan (`engine.shard.plan_jobs`, as `--previous` costs
it), its slowest shard's makespan, plus the fixed cost of a shard job (a fresh sweep of one
two-node model, measured here).

python bench/bench_reuse.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_overhead import fixed_cost

from ditox_ci.corpus import CorpusContext, ModelRef, default_cache_dir, resolve_sources
from ditox_ci.engine.plan import DEFAULT_CONFIGS, build_steps
from ditox_ci.engine.shard import plan_jobs, shard_walls
from ditox_ci.optimizers import load_optimizer

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.30
WORKERS = 2
SHARD_COUNTS = (1, 2, 4, 8)
POLL_S = 0.2
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """utime + stime of one process, 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _tree(pid: int) -> list[int]:
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        queue += _children(current)
    return pids


@dataclass(frozen=True)
class Run:
    """A sweep's wall and CPU seconds, and its report."""

    wall: float
    cpu: float
    report: dict


def _sweep(args: Sequence[str], out: Path, cwd: Path | None = None) -> Run:
    """Wall and CPU seconds of `ditox-ci sweep ARGS` (in `cwd`), and its report."""
    command = [sys.executable, "-m", "ditox_ci", "sweep", "--localize", "off", "--jobs", "2", "--quiet"]
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    argv = [*command, *args, "--out", str(out)]
    process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
    last: dict[int, float] = {}
    while process.poll() is None:
        for pid in _tree(process.pid):
            last[pid] = max(last.get(pid, 0.0), _cpu_s(pid))
        time.sleep(POLL_S)
    wall = time.monotonic() - started
    stderr = process.stderr.read() if process.stderr else ""
    if process.returncode not in (0, 1):
        sys.exit(f"sweep {' '.join(args)} failed (exit {process.returncode}): {stderr[-2000:]}")
    return Run(wall, sum(last.values()), json.loads((out / "report.json").read_text()))


def _findings(report: dict) -> set[tuple[str, str, str, str]]:
    return {
        (f["model"], f["config"], f["kind"], f["fingerprint"])
        for f in report["findings"]
        if f["status"] != "fixed"
    }


def _largest(report: dict, count: int = 3) -> str:
    """The job time (`cost_s`) of the report's `count` costliest models, against all models'."""
    costs = sorted(((float(e.get("cost_s", 0.0)), e["id"]) for e in report["models"]), reverse=True)
    named = ", ".join(f"{model} {cost:.1f} s" for cost, model in costs[:count])
    total, largest = sum(cost for cost, _ in costs), sum(cost for cost, _ in costs[:count])
    return f"{total:.1f} s, of which {largest:.1f} s the largest ({named})"


def _carry_share(report: dict) -> float:
    """The share of report.json's JSON that what carrying reads (`verdicts.control`, `.own`,
    `.results`) takes."""
    kept = ("control", "own", "results")
    models = [
        {**entry, "verdicts": {k: v for k, v in entry["verdicts"].items() if k not in kept}}
        if entry.get("verdicts")
        else entry
        for entry in report["models"]
    ]
    return 1 - len(json.dumps({**report, "models": models})) / len(json.dumps(report))


def _predicted(report: dict, start_s: float) -> str:
    """The slowest of N shard jobs' predicted wall time, for each N of SHARD_COUNTS."""
    models = resolve_sources([], CorpusContext(default_cache_dir(os.environ)))
    steps = build_steps(DEFAULT_CONFIGS, (), load_optimizer("onnxoptimizer").info)
    costs = {entry["id"]: float(entry.get("cost_s", 0.0)) for entry in report["models"]}

    def cost(ref: ModelRef) -> float:
        return costs.get(ref.id, 0.0)

    walls = []
    for count in SHARD_COUNTS:
        slowest = max(shard_walls(plan_jobs(models, steps, count, WORKERS, cost), cost, steps, WORKERS))
        walls.append(f"{count}: {start_s + slowest:6.1f} s")
    return ", ".join(walls)


def _outside_default(tmp: Path, cache: list[str], reuse: list[str]) -> None:
    """A full sweep and a PR check of a head that changes a pass outside the default list, printed."""
    from wheels import OUTSIDE_DEFAULT, changed_pass_checkout, changed_pass_onnxoptimizer

    head = str(changed_pass_onnxoptimizer(tmp / "outside-wheel", "0.4.2+outside", OUTSIDE_DEFAULT))
    # its install, not counted
    _sweep([*cache, "--optimizer", head, "--no-reuse", "--models", "onnx-node:test_abs"], tmp / "installed")
    full = _sweep([*cache, "--optimizer", head, "--no-reuse"], tmp / "full-outside")
    checkout, since = changed_pass_checkout(tmp / "outside", OUTSIDE_DEFAULT)
    changed = [*cache, "--optimizer", head, *reuse, "--changed-since", since]
    pr = _sweep(changed, tmp / "pr-outside", cwd=checkout)
    stats = pr.report["stats"]
    print(f"a pass outside the default list changed ({OUTSIDE_DEFAULT}):")
    print(f"  full sweep of that head: {full.wall:7.1f} s wall {full.cpu:7.1f} s CPU")
    print(
        f"  PR check of that head:   {pr.wall:7.1f} s wall {pr.cpu:7.1f} s CPU, runtime runs "
        f"{stats['runtime_runs']}, optimizer calls {stats['optimizer_runs']}, carried "
        f"{stats.get('carried_steps', 0)}; {pr.cpu / full.cpu:6.1%} of its full sweep's CPU"
    )
    found, full_found = _findings(pr.report), _findings(full.report)
    same = "yes" if found == full_found else "NO"
    print(f"  the PR check's findings are the full sweep's: {same} ({len(found)} findings)")
    for where, only in (("PR check", found - full_found), ("full sweep", full_found - found)):
        for finding in sorted(only)[:5]:
            print(f"    only in the {where}: {' '.join(finding)}")


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "fakes"))
    from wheels import changed_pass_checkout, changed_pass_onnxoptimizer

    with tempfile.TemporaryDirectory(prefix="ditox-bench-reuse-") as folder:
        tmp = Path(folder)
        head = str(changed_pass_onnxoptimizer(tmp / "wheel", "0.4.2+changed"))
        cache = ["--cache-dir", str(tmp / "cache")]
        base_run = _sweep(cache, tmp / "base")
        base = base_run.report
        size_mb = (tmp / "base" / "report.json").stat().st_size / 2**20
        print(
            f"base report (onnxoptimizer, not counted): {len(base['models'])} models, "
            f"{base_run.wall:.1f} s wall, report.json {size_mb:.1f} MiB, of which {_carry_share(base):.0%} "
            "for carrying"
        )
        _sweep([*cache, "--optimizer", head, "--no-reuse", "--models", "onnx-node:test_abs"], tmp / "install")
        full = _sweep([*cache, "--optimizer", head, "--no-reuse"], tmp / "full")
        reuse = ["--base-optimizer", "onnxoptimizer", "--reuse-from", str(tmp / "base" / "report.json")]
        reuse += ["--exercise-budget", "0"]
        no_carry = [*cache, "--optimizer", head, *reuse, "--no-carry"]
        reused = _sweep(no_carry, tmp / "reused")
        checkout, since = changed_pass_checkout(tmp)
        changed = [*cache, "--optimizer", head, *reuse, "--changed-since", since]
        pr = _sweep(changed, tmp / "pr", cwd=checkout)
        start_s = fixed_cost(tmp)
        _report_default_list(full, reused, pr, start_s)
        _outside_default(tmp, cache, reuse)


def _report_default_list(full_run: Run, reused_run: Run, pr_run: Run, start_s: float) -> None:
    """The figures of the head that changes a pass of the default list."""
    full_wall, full_cpu, full = full_run.wall, full_run.cpu, full_run.report
    reused_wall, reused_cpu, reused = reused_run.wall, reused_run.cpu, reused_run.report
    pr_wall, pr_cpu, pr = pr_run.wall, pr_run.cpu, pr_run.report
    stats, full_runs = pr["stats"], full["stats"]["runtime_runs"]
    results = len(stats["configs"]) * stats["models_total"]
    checked = stats.get("base_optimizer", {})
    on_base, base_checked = checked.get("reused", 0), checked.get("findings_checked", 0)
    known_by_baseline = checked.get("known_by_baseline", 0)
    print(f"full sweep of the head: {full_wall:7.1f} s wall {full_cpu:7.1f} s CPU, runtime runs {full_runs}")
    optimizer_s = full["stats"].get("optimizer_s", 0.0)
    print(
        f"  of which the head's optimizer calls: {optimizer_s:.1f} s ({optimizer_s / full_cpu:.0%}), which a "
        "PR check makes too: every result's bytes come from the head"
    )
    print(
        f"PR check, reuse only:   {reused_wall:7.1f} s wall {reused_cpu:7.1f} s CPU, "
        f"runtime runs {reused['stats']['runtime_runs']}, {reused_cpu / full_cpu:6.1%} of the full "
        "sweep's CPU"
    )
    print(
        f"PR check of the head:   {pr_wall:7.1f} s wall {pr_cpu:7.1f} s CPU, "
        f"runtime runs {stats['runtime_runs']}, optimizer calls {stats['optimizer_runs']} "
        f"(full sweep {full['stats']['optimizer_runs']})"
    )
    print(
        f"  carried: {stats.get('carried_steps', 0)} of {results} results (what changed: "
        f"{stats.get('impact', {}).get('passes')}); verdicts reused: {stats.get('reused_verdicts', 0)}; "
        f"on the base build, {on_base}; the base build re-ran {base_checked} findings "
        f"({known_by_baseline} more the baseline knows are not re-run)"
    )
    ratio = pr_cpu / full_cpu
    verdict = "ok" if ratio <= TARGET else f"ABOVE TARGET {TARGET:.0%}"
    print(
        f"PR check / full sweep: {ratio:6.1%} of the CPU ({verdict}), "
        f"{pr_wall / full_wall:6.1%} of the wall time"
    )
    full_found = _findings(full)
    for name, report in (("PR check, reuse only", reused), ("PR check", pr)):
        found = _findings(report)
        same = "yes" if found == full_found else "NO"
        print(f"the {name}'s findings are the full sweep's: {same} ({len(found)} findings)")
        for where, only in ((name, found - full_found), ("full sweep", full_found - found)):
            for finding in sorted(only)[:5]:
                print(f"  only in the {where}: {' '.join(finding)}")
    for name, report in (("full sweep", full), ("PR check", pr)):
        print(f"{name}'s job time: {_largest(report)}")
    print(f"predicted wall time of N shard jobs ({WORKERS} workers each, {start_s:.1f} s start-up each):")
    print(f"  full sweep  {_predicted(full, start_s)}")
    print(f"  PR check    {_predicted(pr, start_s)}")


if __name__ == "__main__":
    main()
