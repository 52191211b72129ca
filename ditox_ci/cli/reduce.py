"""`ditox-ci reduce MODEL --passes a,b`: shrink one failing model and write its repro bundle.

Every check goes through the sweep's own worker pool and oracles (`pinpoint.PoolJudge`), so the
verdicts are the ones a sweep gives, and a crash or hang of the optimizer is a verdict, not the
end of the command.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Mapping
from pathlib import Path

import onnx

from ditox_ci.compare.tensor import DEFAULT_ATOL, DEFAULT_RTOL
from ditox_ci.corpus import ModelRef, default_cache_dir
from ditox_ci.corpus.inputs import InputSpecError, make_feeds
from ditox_ci.engine.evaluate import EvalSettings
from ditox_ci.engine.outcome import Outcome, failure_fingerprint
from ditox_ci.engine.plan import Step, check_passes
from ditox_ci.engine.values import Feeds
from ditox_ci.engine.worker import WorkerConfig, WorkerPool
from ditox_ci.errors import InputError, UsageError
from ditox_ci.log import Log
from ditox_ci.optimizers import optimizer_help
from ditox_ci.optimizers.install import Installation, optimizer_build
from ditox_ci.pinpoint.pinpointer import JudgeError, PoolJudge, candidate_outcome, write_repro
from ditox_ci.pinpoint.reduce import reduce, same_finding
from ditox_ci.report.model import Culprit, Finding

NAME = "reduce"
HELP = "shrink a model that fails under given passes and write a repro bundle"
DESCRIPTION = """\
Shrink MODEL to a minimal subgraph that still fails the same way when optimized with exactly
--passes (in order), and write a repro bundle (model.onnx, original.onnx, inputs.npz,
expected.npz, requirements.txt, repro.py, README.md) to OUT/<fingerprint>/.

examples:
  ditox-ci reduce model.onnx --passes fuse_bn_into_conv
  ditox-ci reduce model.onnx --passes eliminate_nop_transpose,fuse_consecutive_transposes \\
      --optimizer mypkg.opt:optimize --budget 120 --out repro

exit codes: 0 the model does not fail under these passes, 1 it fails (bundle written), >= 2 error
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", type=Path, help="the .onnx model that fails")
    parser.add_argument("--passes", required=True, help="comma-separated pass list, in order")
    parser.add_argument(
        "--optimizer",
        default="onnxoptimizer",
        help=optimizer_help(),
    )
    parser.add_argument("--fixed-point", action="store_true", help="optimize to a fixed point")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("ditox-repro"),
        help="bundles go to OUT/<fingerprint>/ (default: ditox-repro)",
    )
    parser.add_argument(
        "--budget", type=float, default=60.0, help="reduction time budget in seconds (default: 60)"
    )
    parser.add_argument("--samples", type=int, default=2, help="random input samples (default: 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the random inputs")
    parser.add_argument(
        "--rtol", type=float, default=DEFAULT_RTOL, help=f"relative tolerance (default {DEFAULT_RTOL})"
    )
    parser.add_argument(
        "--atol", type=float, default=DEFAULT_ATOL, help=f"absolute tolerance (default {DEFAULT_ATOL})"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds one optimizer+runtime check may take (default: 60)",
    )


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    log = Log(env)
    passes = tuple(name.strip() for name in args.passes.split(",") if name.strip())
    if not passes:
        raise UsageError("--passes is empty; give the culprit passes, e.g. --passes fuse_bn_into_conv")
    if args.samples < 1 or args.budget <= 0:
        raise UsageError("--samples must be >= 1 and --budget > 0")
    with optimizer_build(args.optimizer, default_cache_dir(env), log) as build:
        return _reduce(args, passes, build, log)


def _reduce(args: argparse.Namespace, passes: tuple[str, ...], build: Installation, log: Log) -> int:
    check_passes(passes, build.info)
    try:
        model = onnx.load(str(args.model))
    except FileNotFoundError:
        raise InputError(f"model {args.model} does not exist; pass a path to an .onnx file") from None
    except Exception as exc:
        raise InputError(f"model {args.model} is not a readable ONNX model ({exc})") from None
    ref = ModelRef(id=args.model.name, source=str(args.model), path=str(args.model))
    try:
        feeds = make_feeds(model, ref, args.samples, args.seed)
    except InputSpecError as exc:
        raise InputError(f"cannot make inputs for {args.model}: {exc}") from None
    step = Step("passes:" + ",".join(passes), passes, args.fixed_point)
    config = WorkerConfig(
        optimizer=build.optimizer,
        optimizer_path=build.path,
        settings=EvalSettings(
            samples=args.samples,
            seed=args.seed,
            rtol=args.rtol,
            atol=args.atol,
            noise_floor=build.info.noise_floor,
        ),
        timeout_s=args.timeout,
    )
    with WorkerPool(config) as pool, tempfile.TemporaryDirectory(prefix="ditox-reduce-") as scratch:
        judge = PoolJudge(pool, Path(scratch))
        try:
            failure = judge.candidate(ref.id, model, feeds, step)
        except JudgeError as exc:
            raise InputError(f"{args.model} cannot be tested: {exc}") from None
        if not failure.failed:
            log.info(f"{args.model} does not fail under {','.join(passes)}: nothing to reduce")
            return 0

        def evaluate(candidate: onnx.ModelProto, candidate_feeds: Feeds) -> Outcome:
            return candidate_outcome(judge, ref.id, candidate, candidate_feeds, step)

        with log.group(f"reduce {args.model.name} ({len(model.graph.node)} nodes)"):
            result = reduce(model, feeds, same_finding(evaluate, failure), args.budget)
    kind = str(failure.kind)
    fingerprint = failure_fingerprint(failure, passes)
    finding = Finding(
        fingerprint=fingerprint,
        kind=kind,
        model=args.model.name,
        config=step.label,
        culprit=Culprit(
            scope="pass" if len(passes) == 1 else "interaction",
            passes=passes,
            method="--passes of ditox-ci reduce",
        ),
        evidence={**failure.evidence, "message": failure.message, "reduction": result.to_json()},
        repro=f"{fingerprint}/",
    )
    bundle = write_repro(
        args.out,
        finding,
        result.model,
        model,
        result.feeds,
        step,
        build.optimizer,
        args.rtol,
        args.atol,
        args.timeout,
        names=result.names,
    )
    log.info(
        f"{failure.kind}: {result.nodes_before} -> {result.nodes_after} nodes "
        f"in {result.checks} checks ({result.reason}); bundle: {bundle}"
    )
    print(bundle)
    return 1
