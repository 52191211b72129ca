"""`ditox-ci sweep`: the main job."""

from __future__ import annotations

import argparse
import signal
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ditox_ci.cli.signals import stop_on_signals
from ditox_ci.control import NOP
from ditox_ci.errors import EXIT_NEW_FINDINGS, EXIT_OK, InputError, InternalError
from ditox_ci.github.context import pull_request_base
from ditox_ci.log import Log
from ditox_ci.options import add_flags, load_config_file, resolve
from ditox_ci.report import Report
from ditox_ci.report.bugs import bug_context
from ditox_ci.report.exercised import never_fired_warnings
from ditox_ci.report.kinds import TIERS
from ditox_ci.report.outputs import write_outputs
from ditox_ci.sweep.run import run_sweep
from ditox_ci.sweep.setup import SweepOptions, SweepSetup, sweep_setup
from ditox_ci.triage.classify import classify

NAME = "sweep"
HELP = "run the differential sweep over a corpus and write DIR/report.json and DIR/summary.md"
DESCRIPTION = """\
Run every model of the corpus original vs optimized in ONNX Runtime (its own graph optimizations
off) and compare. Each model is run once per sample; every config reuses those outputs, and an
optimized model byte-identical to one already judged is not run again. Optimizer and runtime run
in worker processes: a crash, hang or memory blow-up becomes a finding and the sweep goes on.

configs:
  default       the optimizer's own default pass list, once
  fixed-point   the default list repeated until the model stops changing (onnxoptimizer,
                onnxscript, onnx-ir; the others have no such mode and run their default again)
  nop           the control: the optimizer's round trip with no rewriting pass (always run);
                a failure it already shows is reported once, as 'infrastructure'
  single        every available pass alone (pass:<name>)
  pass:<name>   one pass alone

examples:
  ditox-ci sweep                                         # default corpus, all configs
  ditox-ci sweep --models onnx-node:test_conv* --configs single
  ditox-ci sweep --models ./models --passes fuse_bn_into_conv,eliminate_identity
  ditox-ci sweep --optimizer mypkg.opt:optimize --shard 1/4 --out shard-1
  ditox-ci sweep --optimizer onnxsim --models packaged   # another built-in optimizer (its extra)
  ditox-ci sweep --base-optimizer onnxoptimizer==0.4.1     # PR gate: only what this build adds
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, SweepOptions)  # every option the sweep declares (sweep/setup.py)
    add_run_arguments(parser)


def add_run_arguments(
    parser: argparse.ArgumentParser, config_help: str = "YAML config file with a 'sweep:' section"
) -> None:
    """What a command that sweeps takes besides its options (sweep, fuzz)."""
    parser.add_argument("--config", help=config_help)
    parser.add_argument("--quiet", action="store_true", help="only errors and the final line")


def sweep_options(
    args: argparse.Namespace,
    env: Mapping[str, str],
    kind: type[SweepOptions] = SweepOptions,
    overrides: Mapping[str, Any] | None = None,
) -> SweepOptions:
    """The options of a sweep (or of `kind`, fuzz's) from flags, environment and config file;
    `overrides` win over all of them."""
    flags = {
        key: value
        for key, value in vars(args).items()
        if key not in {"run", "debug", "config", "quiet"}
    }
    config = load_config_file(Path(args.config), "sweep") if args.config else {}
    return resolve(kind, flags={**flags, **(overrides or {})}, env=env, config=config)


def finish(report: Report, setup: SweepSetup, log: Log) -> int:
    """Classify against the baseline (and previous report), write the outputs, return the gate."""
    options = setup.options
    report = classify(report, setup.baseline, setup.previous)
    if options.max_skipped is not None:  # the summary shows the limit beside the skipped share
        report = replace(report, stats=replace(report.stats, max_skipped=options.max_skipped))
    if options.gate_tiers != TIERS:  # publish and merge gate as the sweep did
        report = replace(report, stats=replace(report.stats, gate_tiers=tuple(options.gate_tiers)))
    if options.gate_missed:
        report = replace(report, stats=replace(report.stats, gate_missed=True))
    written = write_outputs(report, Path(options.out))
    log.summary(written.summary)
    if report.shard.whole:  # a shard's coverage is its share's: the merge's summary says
        for warning in never_fired_warnings(report):
            log.warning(warning)
    tally = log_bugs(report, log)
    skips = report.skips()
    log.notice(
        f"{tally}; {skips.models} models ({skips.skipped} skipped, {skips.share:.1%}), "
        f"{len(report.findings)} findings in all; report: {written.report_path}, "
        f"summary: {written.summary_path}"
    )
    internal_error_gate(report)
    interrupted_by = report.stats.interrupted_by or ""
    if report.stats.interrupted and interrupted_by in signal.Signals.__members__:
        log.error(f"interrupted by {interrupted_by}: the report holds only the models that finished")
        return 128 + signal.Signals[interrupted_by].value
    skipped_gate(report, log, written.summary_path)
    return EXIT_NEW_FINDINGS if report.closes_gate() else EXIT_OK


def log_bugs(report: Report, log: Log) -> str:
    """One error line per new bug, not per finding (a bug seen under default and its single pass
    is one bug); returns the tally the summary, the comment and the check open with, in the
    same words, for the command's last line."""
    context = bug_context(report)
    for bug in context["new_failures"]:
        passes = ", ".join(bug.culprit.passes) or bug.culprit.scope
        where = f"{bug.first.model} [{bug.first.config}]"
        more = f" and {len(bug.findings) - 1} more" if len(bug.findings) > 1 else ""
        log.error(f"new bug {bug.fingerprint}: {bug.kind} in {passes} on {where}{more}: {bug.message}"[:300])
    return ", ".join(context["tally"])


INTERNAL_ERRORS_NAMED = 10


def internal_error_gate(report: Report) -> None:
    """Exit 70, once the report is written, when ditox-ci's own code failed on any model: the
    models are named, the rest of the sweep is in the report, and no gate turns green over it."""
    failed = report.internal_errors()
    if not failed:
        return
    named = "; ".join(f"{entry.id} ({entry.reason})"[:300] for entry in failed[:INTERNAL_ERRORS_NAMED])
    more = f"; and {len(failed) - INTERNAL_ERRORS_NAMED} more" if len(failed) > INTERNAL_ERRORS_NAMED else ""
    raise InternalError(
        f"ditox-ci's own code failed on {len(failed)} model(s), recorded in the report as "
        f"status internal-error: {named}{more}"
    )


def skipped_gate(report: Report, log: Log, summary: Path) -> None:
    """Exit 4 when no model of a whole sweep ran; one error line when more than the report's
    `stats.max_skipped` of the corpus was skipped, which closes the gate like a new finding
    (`Report.closes_gate`). A shard is judged by neither: it may hold only the models that skip,
    and the limit travels in its report to the merge, which judges the whole sweep."""
    skips = report.skips()
    if not skips.whole:
        if skips.over_limit:
            log.info(f"this shard skipped {skips.share:.1%} of its models; the merge judges the whole sweep")
        return
    if not skips.models:  # a merge of shards interrupted before any model finished
        raise InputError(f"no model ran: the report holds none ({summary}); an empty sweep is not green")
    if skips.skipped == skips.models:
        raise InputError(
            f"no model ran: all {skips.skipped} were skipped (reasons in {summary}); "
            "an empty sweep is not a green one"
        )
    if skips.too_many:
        log.error(skips.said())


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    log = Log(env, quiet=args.quiet)
    # --passes alone: the nop control and that pass list, not the default configs besides
    only_passes = {"configs": (NOP,)} if args.passes and args.configs is None else {}
    options = sweep_options(args, env, overrides=only_passes)
    if options.changed_since is None:
        options = replace(options, changed_since=pull_request_base(env) or None)
    with stop_on_signals() as stop:
        with sweep_setup(options, log) as setup:
            # from the end of its work on, a signal must not cut the report short (it is only noted)
            report = run_sweep(setup, log, settled=stop.disarm)
        return finish(report, setup, log)
