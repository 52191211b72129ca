"""`ditox-ci baseline init|update`: start a baseline, or accept a report's findings as known."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Mapping
from pathlib import Path

from ditox_ci.cli import add_action
from ditox_ci.errors import EXIT_OK, UsageError
from ditox_ci.log import Log
from ditox_ci.report.model import read_report
from ditox_ci.triage.baseline import ENTRY_OPTIMIZER, init_baseline, update_baseline

NAME = "baseline"
HELP = "manage the baseline of known limitations"
UPDATE_DESCRIPTION = """\
Add one entry per finding of the report that no baseline entry (shipped default or
FILE) matches yet. Entries match by fingerprint; edit each generated reason to say why the
behaviour is expected, and review the file like code. Comments in FILE are kept.

example:
  ditox-ci baseline update --report out/report.json --baseline .ditox-baseline.yml \\
      --reason "tracked upstream in onnx/optimizer#123" --expires 2027-06-30
"""
DESCRIPTION = f"""\
init: create a baseline from today's findings (adopting ditox-ci); see `baseline init --help`.

update: {UPDATE_DESCRIPTION[0].lower()}{UPDATE_DESCRIPTION[1:]}"""
DEFAULT_REASON = "accepted by `ditox-ci baseline update` on {date}; say why this is expected"
INIT_REASON = "known when ditox-ci was adopted ({date}); triage it, then say why it is expected or fix it"
INIT_DESCRIPTION = """\
Create FILE (it must not exist) with one entry per bug of REPORT that the shipped baseline does not
cover; without --report, an empty baseline. Run it once, on a sweep of the default branch, when
adopting ditox-ci on a repository that already has known bugs: the PR check then fails only on what
a pull request adds. Each entry matches its bug by fingerprint; review the file like code.

example:
  ditox-ci sweep --optimizer dist/onnxoptimizer-*.whl --out ditox-report
  ditox-ci baseline init --report ditox-report/report.json --baseline .github/ditox-baseline.yml
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = add_action(
        actions,
        "init",
        "start a baseline: today's findings are known, so the first PR is judged on what it adds",
        INIT_DESCRIPTION,
    )
    init.add_argument("--report", metavar="FILE", help="report.json of a sweep of the default branch")
    init.add_argument("--baseline", required=True, metavar="FILE", help="baseline YAML to create")
    init.add_argument("--reason", help="reason written into each entry")
    update = add_action(actions, "update", "accept the report's findings as known", UPDATE_DESCRIPTION)
    update.add_argument("--report", required=True, metavar="FILE", help="report.json")
    update.add_argument("--baseline", required=True, metavar="FILE", help="baseline YAML to update")
    update.add_argument("--reason", help="reason written into each new entry")
    update.add_argument("--expires", metavar="YYYY-MM-DD", help="expiry of the new entries")


def _init(args: argparse.Namespace, log: Log, today: dt.date) -> int:
    report = read_report(Path(args.report)) if args.report else None
    findings = report.findings if report is not None else ()
    optimizer = report.optimizer.name if report is not None else ""
    reason = args.reason or INIT_REASON.format(date=today.isoformat())
    result = init_baseline(Path(args.baseline), findings, reason, today, optimizer or ENTRY_OPTIMIZER)
    log.info(
        f"{args.baseline}: created with {len(result.added)} entries ({result.already_known} other "
        "findings already covered); commit it, then add the PR workflow"
    )
    return EXIT_OK


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    today = dt.date.today()
    if args.action == "init":
        return _init(args, Log(env), today)
    try:
        expires = dt.date.fromisoformat(args.expires) if args.expires else None
    except ValueError:
        raise UsageError(f"--expires must be a date like 2026-06-30, got {args.expires!r}") from None
    report = read_report(Path(args.report))
    reason = args.reason or DEFAULT_REASON.format(date=today.isoformat())
    optimizer = report.optimizer.name or ENTRY_OPTIMIZER
    result = update_baseline(Path(args.baseline), report.findings, reason, expires, today, optimizer)
    log = Log(env)
    log.info(
        f"{args.baseline}: {len(result.added)} entries added, {result.already_known} findings already covered"
    )
    for entry in result.added:
        log.info(f"  + {entry.id}: {entry.kinds[0]} on {entry.model}")
    return EXIT_OK
