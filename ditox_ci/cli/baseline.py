"""`ditox-ci baseline update`: accept the current findings of a report as known limitations."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Mapping
from pathlib import Path

from ditox_ci.errors import EXIT_OK, UsageError
from ditox_ci.log import Log
from ditox_ci.report.model import read_report
from ditox_ci.triage.baseline import update_baseline

NAME = "baseline"
HELP = "manage the baseline of known limitations"
DESCRIPTION = """\
update: add one entry per finding of the report that no baseline entry (shipped default or
FILE) matches yet. Entries match by fingerprint; edit each generated reason to say why the
behaviour is expected, and review the file like code. Comments in FILE are kept.

example:
  ditox-ci baseline update --report out/report.json --baseline .ditox-baseline.yml \\
      --reason "tracked upstream in onnx/optimizer#123" --expires 2026-06-30
"""
DEFAULT_REASON = "accepted by `ditox-ci baseline update` on {date}; say why this is expected"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    update = actions.add_parser("update", help="accept the report's findings as known")
    update.add_argument("--report", required=True, metavar="FILE", help="report.json")
    update.add_argument("--baseline", required=True, metavar="FILE", help="baseline YAML to update")
    update.add_argument("--reason", help="reason written into each new entry")
    update.add_argument("--expires", metavar="YYYY-MM-DD", help="expiry of the new entries")


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    today = dt.date.today()
    try:
        expires = dt.date.fromisoformat(args.expires) if args.expires else None
    except ValueError:
        raise UsageError(f"--expires must be a date like 2026-06-30, got {args.expires!r}") from None
    report = read_report(Path(args.report))
    reason = args.reason or DEFAULT_REASON.format(date=today.isoformat())
    optimizer = str(report.optimizer.get("name") or "onnxoptimizer")
    result = update_baseline(Path(args.baseline), report.findings, reason, expires, today, optimizer)
    log = Log(env)
    log.info(
        f"{args.baseline}: {len(result.added)} entries added, {result.already_known} findings already covered"
    )
    for entry in result.added:
        log.info(f"  + {entry.id}: {entry.kinds[0]} on {entry.model}")
    return EXIT_OK
