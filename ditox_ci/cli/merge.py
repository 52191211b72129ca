"""`ditox-ci merge DIR ... --out DIR`: the shard reports of a matrix run → one report."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Mapping
from pathlib import Path

from ditox_ci.ci.merge import merge_reports
from ditox_ci.cli.sweep import internal_error_gate, log_bugs, skipped_gate
from ditox_ci.errors import EXIT_NEW_FINDINGS, EXIT_OK, InputError
from ditox_ci.log import Log
from ditox_ci.report.model import read_report
from ditox_ci.report.outputs import prepare_out_dir, write_outputs

NAME = "merge"
HELP = "merge the shard reports of a sharded sweep into one report"
DESCRIPTION = """\
Merge the reports of `ditox-ci sweep --shard I/N` jobs into the report of the whole sweep.

Each DIR is a shard's output folder (report.json, maybe repro/), or a folder whose
sub-folders are (e.g. where actions/download-artifact put every shard's artifact).
Fails with exit code 6 when a shard is missing, repeated, or from another sweep.

examples:
  ditox-ci merge shard-0 shard-1 shard-2 --out ditox-report
  ditox-ci merge shards/ --out ditox-report        # shards/*/report.json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="shard output folders")
    parser.add_argument(
        "--out", default="ditox-report", help="output folder (default: %(default)s)"
    )


def report_paths(directory: Path) -> list[Path]:
    """DIR/report.json, else DIR/*/report.json (one artifact folder per shard)."""
    if directory.is_file():
        return [directory]
    if (directory / "report.json").is_file():
        return [directory / "report.json"]
    found = sorted(directory.glob("*/report.json"))
    if not found:
        raise InputError(
            f"{directory} holds no report.json (nor */report.json); "
            "pass the folders the shard jobs wrote with --out"
        )
    return found


def _copy_repro(shard_dir: Path, out_dir: Path) -> None:
    """Bundles are named by fingerprint, so a bundle two shards share is the same bug: keep one."""
    source = shard_dir / "repro"
    if not source.is_dir():
        return
    for bundle in sorted(source.iterdir()):
        target = out_dir / "repro" / bundle.name
        if bundle.is_dir() and not target.exists():
            shutil.copytree(bundle, target)


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    log = Log(env)
    out_dir = Path(args.out)
    paths = [path for directory in args.dirs for path in report_paths(Path(directory))]
    if out_dir.resolve() in {path.parent.resolve() for path in paths}:
        raise InputError(f"--out {out_dir} is one of the shard folders; write the merge elsewhere")
    prepare_out_dir(out_dir)
    with log.group(f"merge {len(paths)} shard reports"):
        report = merge_reports([read_report(path) for path in paths])
        for path in paths:
            _copy_repro(path.parent, out_dir)
        written = write_outputs(report, out_dir)
    log.summary(written.summary)
    tally = log_bugs(report, log)
    log.info(f"merged {len(paths)} shards: {tally}; {len(report.models)} models")
    internal_error_gate(report)
    skipped_gate(report, log, written.summary_path)
    return EXIT_NEW_FINDINGS if report.closes_gate() else EXIT_OK
