"""`ditox-ci bisect`: since when a bug is there, and by which release or commit it came or went."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ditox_ci.engine.pool import WorkerPool
from ditox_ci.errors import InputError, UsageError
from ditox_ci.log import Log
from ditox_ci.optimizers import optimizer_help
from ditox_ci.optimizers.install import Installation, optimizer_build
from ditox_ci.options import add_flags, resolve
from ditox_ci.report.kinds import FIXED as FIXED_STATUS
from ditox_ci.report.kinds import NEW
from ditox_ci.report.model import Report
from ditox_ci.report.outputs import write_outputs
from ditox_ci.report.schema import read_checked_report
from ditox_ci.report.since import COMMITS, FIXED, INTRODUCED, RELEASES, Point, Since, Tried
from ditox_ci.safewrite import write_bytes_atomic
from ditox_ci.sweep.setup import BisectOptions, worker_config
from ditox_ci.triage.bisect import (
    Bisector,
    Bug,
    BuildAt,
    load_bug,
    not_reproduced,
    reference,
    where_it_left,
)
from ditox_ci.triage.bisect_builds import (
    commit_build,
    commit_points,
    plausibility,
    release_build,
    release_points,
)

NAME = "bisect"
HELP = "find the release or commit that brought a bug (or fixed it)"
DESCRIPTION = """\
Find where each bug entered (or left): over the optimizer's releases (each installed from a
wheel into the build cache), or over the commits of a checkout between --good and --bad (each
built as --optimizer CHECKOUT builds it, cached by commit). A bug is a repro bundle (BUNDLE:
`ditox-ci reduce`'s, or a sweep's repro/<fingerprint>/), or the findings of --report (its new
and fixed ones with a bundle, or those --fingerprint names). Each build judges the bundle's
reduced model with the sweep's own "same failure" rule, --runs times (more for a flaky bug);
a build that cannot be installed or tested is skipped and said so.

With --report, each finding's result is written into the report (`since` in report.json; the
issue `publish` files says "introduced in 0.3.9 (0.3.8 is fine)").

examples:
  ditox-ci bisect --report ditox-report                      # over onnxoptimizer's releases
  ditox-ci bisect ditox-report/repro/3f2a9c/ --package onnxoptimizer
  ditox-ci bisect --report ditox-report --checkout optimizer --good v0.3.8 --bad main
  ditox-ci bisect --report ditox-report --checkout . --good HEAD --bad HEAD~20   # a fix

exit codes: 0 every bug bisected (each result printed, even inconclusive), >= 2 error
"""


# the options of the commands that run models that bisect has no use for: a bundle brings its
# model's inputs, and each build judges it in one worker, one pass list at a time
NOT_FLAGS = ("samples", "seed", "jobs", "dynamic_dim", "screen")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundles", nargs="*", metavar="BUNDLE", help="repro bundle folders to bisect")
    helps: dict[str, str | Callable[[], str]] = {
        "optimizer": lambda: "the build the bugs were found with; " + optimizer_help(),
        "timeout": "seconds one run may take",
        "memory_limit": "MiB the worker may use",
    }
    add_flags(parser, BisectOptions, skip=NOT_FLAGS, helps=helps)


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    log = Log(env)
    flags = {key: value for key, value in vars(args).items() if key not in ("run", "debug", "bundles")}
    options = resolve(BisectOptions, flags=flags, env=env)
    report_path = _report_file(options.report) if options.report else None
    report = read_checked_report(report_path) if report_path else None
    if not args.bundles and report is None:
        raise UsageError("name the bugs: repro bundle folders, or --report REPORT")
    deadline = time.monotonic() + options.budget * 60 if options.budget else None
    with tempfile.TemporaryDirectory(prefix="ditox-bisect-") as scratch:
        chosen = _chosen(report, report_path, options, log) if report and report_path else {}
        bugs = [load_bug(Path(b).resolve(), Path(scratch)) for b in args.bundles]
        bugs += [load_bug(bundle, Path(scratch)) for bundle in chosen]
        if not bugs:
            log.info("no finding with a repro bundle to bisect")
            return 0
        found = _bisect(bugs, options, log, deadline)
    for bug in bugs:
        since = found[bug.fingerprint]
        log.info(
            f"{bug.fingerprint} {bug.finding.model} [{bug.finding.config}] {bug.finding.kind}: "
            f"{since.headline}; {since.builds} build(s)"
            + (f"; {since.plausibility}" if since.plausibility else "")
        )
        print(f"{bug.fingerprint}\t{since.change}\t{since.headline}")
    if options.out_json:
        results = [
            {"fingerprint": bug.fingerprint, "since": found[bug.fingerprint].to_json()} for bug in bugs
        ]
        write_bytes_atomic(Path(options.out_json), json.dumps(results, indent=1).encode())
    if report is not None and report_path is not None:
        by_bundle = {chosen[bug.bundle]: found[bug.fingerprint] for bug in bugs if bug.bundle in chosen}
        _record(report, report_path, by_bundle, log)
    return 0


def _report_file(path: str) -> Path:
    file = Path(path) / "report.json" if Path(path).is_dir() else Path(path)
    if not file.is_file():
        raise InputError(
            f"--report {path}: no report.json there; give a sweep's output folder or its report.json"
        )
    return file


def _chosen(report: Report, report_path: Path, options: BisectOptions, log: Log) -> dict[Path, str]:
    """The bundles of the report's findings to bisect (those named, else its new and fixed ones),
    each once however many findings of one bug share it, with its path as the report says it:
    beside the report, or in a --bundles-from folder (a fixed bug's is in the report it was
    found in)."""
    folders = [report_path.parent, *(Path(folder) for folder in options.bundles_from)]
    fingerprints = options.fingerprints
    known = {f.fingerprint: f for f in report.findings}
    unknown = [fp for fp in fingerprints if fp not in known]
    if unknown:
        raise InputError(f"--fingerprint {unknown[0]}: no finding of {report_path} has it")
    wanted = [known[fp] for fp in fingerprints] or [
        f for f in report.findings if f.status in (NEW, FIXED_STATUS)
    ]
    bundles: dict[Path, str] = {}
    without = []
    for finding in wanted:
        found = [
            f / finding.repro
            for f in folders
            if finding.repro and (f / finding.repro / "model.onnx").is_file()
        ]
        if found:
            bundles.setdefault(found[0].resolve(), finding.repro or "")
        else:
            without.append(finding)
    if without:
        log.info(
            f"{len(without)} of the {len(wanted)} findings have no repro bundle here (warnings, or not "
            f"reduced), e.g. {without[0].fingerprint} ({without[0].model}): not bisected"
        )
    return bundles


def _bisect(bugs: list[Bug], options: BisectOptions, log: Log, deadline: float | None) -> dict[str, Since]:
    """Each bug's bisection: what the build it was found with shows first (over releases,
    --optimizer; over commits, --bad, else --good for a bug fixed in the range), then the search
    over the releases or commits."""
    cache = Path(options.cache_dir)

    def pool_for(build: Installation) -> WorkerPool:
        return WorkerPool(worker_config(options, build))

    build_at: BuildAt
    known: list[tuple[Bug, Tried]] = []  # the references' runs at an end of the range: its verdicts
    if options.over_commits:
        assert options.good is not None and options.bad is not None
        checkout, over = Path(options.checkout), COMMITS
        points, entered = commit_points(checkout, options.good, options.bad, options.repository_url)
        build_at = functools.partial(
            commit_build, checkout, module=options.optimizer, cache_dir=cache, log=log
        )
        # a bug shows at --bad, or (one fixed in the range) at --good: the other end is its reference
        ends = [points[-1], points[0]] if entered else [points[0], points[-1]]
        referenced = bugs
        for end in ends:
            if all(bug.reference for bug in referenced):
                break
            with build_at(end) as build, pool_for(build) as pool:
                at_end = [
                    (bug, None) if bug.reference else reference(pool, bug, options.runs, end)
                    for bug in referenced
                ]
            referenced = [bug for bug, _ in at_end]
            known += [(bug, tried) for bug, tried in at_end if tried is not None]
    else:
        over = RELEASES
        with optimizer_build(options.optimizer, cache, log) as build, pool_for(build) as pool:
            referenced = [reference(pool, bug, options.runs)[0] for bug in bugs]
            built = Point(options.optimizer, f"{build.info.version} (the build under test)")
            module, distribution = (
                build.optimizer,
                options.package or next(iter(build.info.distributions), None),
            )
        if distribution is None:
            raise UsageError(
                f"--optimizer {options.optimizer}: which distribution's releases? give --package NAME"
            )
        points = release_points(distribution, options.find_links)
        build_at = functools.partial(
            release_build,
            distribution,
            module=module,
            find_links=options.find_links,
            cache_dir=cache,
            log=log,
        )
    runnable = [bug for bug in referenced if bug.reference is not None]
    gone = [bug for bug in referenced if bug.reference is None]
    found = {bug.fingerprint: not_reproduced(bug, over) for bug in gone}
    if over == RELEASES and gone:  # fixed in the build under test: since which release?
        with log.group(f"where {len(gone)} bug(s) the build under test no longer shows left"):
            found.update(where_it_left(gone, points, build_at, pool_for, options.runs, built))
    bisector = Bisector(runnable, build_at, pool_for, options.runs, log, deadline, known)
    for bug in runnable:
        with log.group(f"bisect {bug.fingerprint} over {len(points)} {over}"):
            since = bisector.bisect(bug, points, over)
        if over == COMMITS and since.after is not None and since.change in (INTRODUCED, FIXED):
            judged = plausibility(Path(options.checkout), since.after.ref, bug.step.passes)
            since = dataclasses.replace(since, plausibility=judged)
        found[bug.fingerprint] = since
    unmade = {t.ref for since in found.values() for t in since.tried if t.ref not in bisector.built}
    log.notice(
        f"{len(bugs)} bug(s) bisected over {len(points)} {over}: {len(bisector.built)} build(s) made or "
        f"taken from the cache, {len(unmade)} that could not be made (said above) or were out of time"
    )
    return found


def _record(report: Report, path: Path, by_bundle: Mapping[str, Since], log: Log) -> None:
    """Each bisected bug's `since` written into the report, on every finding its bundle stands
    for, and the report's pages rendered again."""
    findings = tuple(
        dataclasses.replace(f, since=by_bundle[f.repro]) if f.repro and f.repro in by_bundle else f
        for f in report.findings
    )
    write_outputs(dataclasses.replace(report, findings=findings), path.parent)
    log.info(f"wrote where each bug came from into {path}")
