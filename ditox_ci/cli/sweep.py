"""`ditox-ci sweep`: the main job."""

from __future__ import annotations

import argparse
import signal
from collections.abc import Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ditox_ci.cli.signals import stop_on_signals
from ditox_ci.control import NOP
from ditox_ci.engine.runner import RUNNER_CHOICES
from ditox_ci.errors import EXIT_NEW_FINDINGS, EXIT_OK, InputError, InternalError
from ditox_ci.github.context import pull_request_base
from ditox_ci.log import Log
from ditox_ci.optimizers import optimizer_help
from ditox_ci.options import load_config_file, resolve
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


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_sweep_arguments(
    parser: argparse.ArgumentParser,
    helps: Mapping[str, str] | None = None,
    only: Collection[str] | None = None,
) -> None:
    """The options every command that sweeps accepts (sweep, fuzz), or `only` those (by name: reduce
    judges as the sweep judges); `helps` replaces the help of those that mean something else to
    the command."""

    def add(*flags: str, **kwargs: Any) -> None:
        name = kwargs.get("dest") or flags[0].lstrip("-").replace("-", "_")
        if only is not None and name not in only:
            return
        parser.add_argument(*flags, **{**kwargs, "help": (helps or {}).get(name, kwargs.get("help"))})
    add(
        "--configs",
        type=_csv,
        help="comma list of configs (default: default,fixed-point,nop,single)",
    )
    add(
        "--passes",
        type=_csv,
        help="comma list: also run exactly this pass list (alone: with --configs nop)",
    )
    add(
        "--optimizer",
        help=optimizer_help(),
    )
    add(
        "--base-optimizer",
        dest="base_optimizer",
        metavar="SPEC",
        help="the build a PR starts from (wheel, checkout, pip requirement or pkg.mod:function): "
        "each finding is re-run on it, and one that reproduces there is 'known', not new",
    )
    add("--baseline", help="YAML of known limitations, layered on the shipped default")
    add(
        "--previous",
        help="an earlier report.json: its findings that still show are 'known'; its timings balance shards; "
        "its verdicts are reused unless --reuse-from names another report or --no-reuse",
    )
    add("--jobs", type=int, help="worker processes (default: all cores)")
    add("--timeout", type=float, help="seconds one optimizer or runtime call may take (default 60)")
    add(
        "--memory-limit",
        dest="memory_limit",
        type=int,
        help="MiB a worker may use, and × --jobs what they may use together (default 3584 each: 4 "
        "workers fit a 16 GB runner; together, what the machine has free if that is more)",
    )
    add(
        "--samples",
        type=int,
        help="random input samples per model (default 1), plus a wide-range and a sign-structured one "
        "where the inputs are random or recorded",
    )
    add("--seed", type=int, help="seed for random inputs (default 0)")
    add(
        "--rtol",
        type=float,
        help="relative tolerance for every output (default by dtype: 1e-3 float32, 1e-2 float16, "
        "4e-2 bfloat16, 1e-6 float64)",
    )
    add(
        "--atol",
        type=float,
        help="absolute tolerance for every output (default by dtype: 1e-4 float32, 1e-3 float16, "
        "1e-2 bfloat16, 1e-8 float64)",
    )
    add(
        "--calibrate",
        choices=("on", "off"),
        help="on (default): a float output also fails when its error is more than 10 times the "
        "model's own noise floor (what ONNX Runtime's own optimizations move it by), within "
        "--rtol/--atol; off: the fixed tolerances alone",
    )
    add(
        "--screen",
        choices=("on", "off"),
        help="on (default): a model of 64 MiB or more has its single passes run as one onnxoptimizer "
        "call first, and only the passes that call cannot clear run on their own (the same "
        "verdicts in a third to a half of the time); off: every single pass on its own. Every "
        "shard job of a sweep must say the same",
    )
    add(
        "--dynamic-dim",
        dest="dynamic_dim",
        type=int,
        help="size for symbolic dimensions (default 2)",
    )
    add(
        "--runner",
        choices=RUNNER_CHOICES,
        help="what runs original and optimized: auto (default) uses ONNX Runtime, and ONNX's "
        "reference implementation for a model whose original ONNX Runtime cannot load or run",
    )
    add("--comparator", help="task comparator run after the tensor oracle (e.g. classification)")
    add(
        "--max-skipped",
        dest="max_skipped",
        type=float,
        metavar="FRACTION",
        help="gate (exit 1) when more than this share of the corpus was skipped, e.g. 0.2 "
        "(default: no limit; a whole or merged sweep where no model ran always exits 4)",
    )
    add(
        "--gate-tiers",
        dest="gate_tiers",
        type=_csv,
        metavar="TIERS",
        help="comma list of the tiers of values bugs (output-mismatch) that gate: wrong-result, "
        "precision, ties (default: all three); a bug of another tier is reported, and fails nothing",
    )
    add(
        "--gate-missed",
        dest="gate_missed",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a missed optimization (a result keeping more nodes than the --reuse-from or --previous "
        "report's) gates like a bug (default off: a warning)",
    )
    add("--out", help="output folder (default ditox-report)")
    add(
        "--localize",
        choices=("auto", "off"),
        help="auto (default): localize each failure's culprit passes, reduce the model and "
        "write a repro bundle to OUT/repro/<fingerprint>/; off: report failures as found",
    )
    add(
        "--reduce-budget",
        dest="reduce_budget",
        type=float,
        help="seconds to spend shrinking each failing model (default 30; 0: no reduction)",
    )
    add(
        "--cache-dir",
        dest="cache_dir",
        help="where named sources materialize models and builds are installed (default "
        "$DITOX_CACHE_DIR, else $DITOX_CACHE, else ~/.cache/ditox-ci)",
    )
    add("--config", help="YAML config file with a 'sweep:' section")
    add("--quiet", action="store_true", help="only errors and the final line")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--models",
        nargs="+",
        metavar="SRC",
        help="paths or named sources (default: onnx-node onnx-data exported)",
    )
    parser.add_argument("--shard", help="I/N: run shard I (0-based) of N (default 0/1)")
    parser.add_argument(
        "--exercise-budget",
        dest="exercise_budget",
        type=float,
        metavar="SECONDS",
        help="with --base-optimizer: seconds for making models for the passes the head adds or "
        "changes (as `ditox-ci fuzz --passes` does), on shard 0 (default 60; 0: off)",
    )
    parser.add_argument(
        "--changed-since",
        dest="changed_since",
        metavar="COMMIT",
        help="with --base-optimizer: passes whose source (onnxoptimizer/passes/<pass>.h, .cc or "
        ".cpp) changed since COMMIT (a sha, ref or tag, with ~N or ^N) in the working directory's "
        "checkout are exercised too (default: the pull_request event's base.sha)",
    )
    parser.add_argument(
        "--reuse-from",
        dest="reuse_from",
        metavar="REPORT",
        help="a stored report.json (a PR's base branch's, the previous night's) whose verdicts are "
        "reused: a result byte-identical to one judged there, on the same original and inputs, "
        "inputs, passes without a run, when the report was judged with the same settings and "
        "ditox-ci, onnx and ONNX Runtime versions (default: --previous's report)",
    )
    parser.add_argument(
        "--reuse",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reuse stored verdicts, as --reuse-from says (default on; --no-reuse: judge every result)",
    )
    add_sweep_arguments(parser)


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
        report = replace(report, stats={**report.stats, "max_skipped": options.max_skipped})
    if options.gate_tiers != TIERS:  # publish and merge gate as the sweep did
        report = replace(report, stats={**report.stats, "gate_tiers": list(options.gate_tiers)})
    if options.gate_missed:
        report = replace(report, stats={**report.stats, "gate_missed": True})
    written = write_outputs(report, Path(options.out))
    log.summary(written.summary)
    if report.shard.get("count", 1) == 1:  # a shard's coverage is its share's: the merge's summary says
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
    interrupted_by = str(report.stats.get("interrupted_by", ""))
    if report.stats.get("interrupted") and interrupted_by in signal.Signals.__members__:
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
