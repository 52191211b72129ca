"""`ditox-ci reduce MODEL --passes a,b`: shrink one failing model and write its repro bundle.

Every check goes through the sweep's own worker pool and oracles (`pinpoint.PoolJudge`), so the
verdicts are the ones a sweep gives, and a crash or hang of the optimizer is a verdict, not the
end of the command.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Mapping
from pathlib import Path

import onnx

from ditox_ci.control import PASSES_PREFIX, list_label
from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import InputSpecError, make_feeds
from ditox_ci.engine.outcome import Outcome, failure_fingerprint
from ditox_ci.engine.plan import Step, check_passes
from ditox_ci.engine.pool import WorkerPool
from ditox_ci.engine.values import Feeds
from ditox_ci.errors import InputError
from ditox_ci.log import Log
from ditox_ci.optimizers.install import Installation, optimizer_build
from ditox_ci.options import add_flags, resolve
from ditox_ci.pinpoint.judge import JudgeError, PoolJudge, candidate_outcome
from ditox_ci.pinpoint.reduce import reduce, same_finding
from ditox_ci.pinpoint.repro import build_under_test, write_repro
from ditox_ci.report.evidence import Pinpointing
from ditox_ci.report.model import Culprit, Finding
from ditox_ci.report.outputs import prepare_out_dir
from ditox_ci.sweep.setup import ReduceOptions, worker_config

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

exit codes: 0 the model does not fail under these passes, 1 it fails (bundle written; none when
the failure did not show again: a warning says so), >= 2 error
"""


# the options of the commands that run models that reduce has no use for: its checks run one at a
# time in one worker, each of one pass list, never a model's single passes to screen
NOT_FLAGS = ("jobs", "screen")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", type=Path, help="the .onnx model that fails")
    # judged as the sweep judged the model: its options, under the same names
    helps = {"timeout": "seconds one check may take", "memory_limit": "MiB the worker may use"}
    add_flags(parser, ReduceOptions, skip=NOT_FLAGS, helps=helps)


def flags_of(args: argparse.Namespace) -> dict[str, object]:
    """The command line's options, as the resolver takes them."""
    return {key: value for key, value in vars(args).items() if key not in ("run", "debug", "model")}


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    log = Log(env)
    # the same resolver and the same engine settings as the sweep's, with reduce's own defaults
    options = resolve(ReduceOptions, flags=flags_of(args), env=env)
    prepare_out_dir(Path(options.cache_dir), "--cache-dir")  # the build's folder: before installing it
    with optimizer_build(options.optimizer, Path(options.cache_dir), log) as build:
        return _reduce(args.model, options, build, log)


def _reduce(path: Path, options: ReduceOptions, build: Installation, log: Log) -> int:
    passes = options.passes
    check_passes(passes, build.info)
    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise InputError(f"model {path} does not exist; pass a path to an .onnx file") from None
    except Exception as exc:
        raise InputError(f"model {path} is not a readable ONNX model ({exc})") from None
    ref = ModelRef(id=path.name, source=str(path), path=str(path))
    try:
        feeds = make_feeds(model, ref, options.samples, options.seed, options.dynamic_dim)
    except InputSpecError as exc:
        raise InputError(f"cannot make inputs for {path}: {exc}") from None
    step = Step(list_label(PASSES_PREFIX, passes), passes, options.fixed_point)
    config = worker_config(options, build)
    with WorkerPool(config) as pool, tempfile.TemporaryDirectory(prefix="ditox-reduce-") as scratch:
        judge = PoolJudge(pool, Path(scratch))
        try:
            # the runner that judged the model (with --runner auto, ONNX's reference implementation
            # for one ONNX Runtime cannot run) records its intermediates and writes the bundle
            failure, runner_name = judge.candidate_judged(ref.id, model, feeds, step)
        except JudgeError as exc:
            raise InputError(f"{path} cannot be tested: {exc}") from None
        if not failure.failed:
            log.info(f"{path} does not fail under {','.join(passes)}: nothing to reduce")
            return 0
        # the fingerprint counts what the passes alone rewrite, as the sweep's does: not fixed-point
        rewrites = failure
        if step.fixed_point:
            once = Step(list_label(PASSES_PREFIX, passes), passes)
            with contextlib.suppress(JudgeError):
                rewrites, _ = judge.candidate_judged(ref.id, model, feeds, once)

        def evaluate(candidate: onnx.ModelProto, candidate_feeds: Feeds) -> Outcome | None:
            return candidate_outcome(judge, ref.id, candidate, candidate_feeds, step)

        with log.group(f"reduce {path.name} ({len(model.graph.node)} nodes)"):
            result = reduce(model, feeds, same_finding(evaluate, failure), options.budget, runner_name)
    if result.record.lost_the_failure:
        log.warning(
            f"{path} failed under {','.join(passes)} ({failure.kind}) once, but not when judged "
            f"again ({result.record.reason}: it passed, or gave no verdict), so no bundle was "
            "written (its repro.py would find nothing); run the command again to catch it"
        )
        return 1
    kind = failure.kind
    assert kind is not None  # it failed (above)
    fingerprint = failure_fingerprint(failure, passes, rewrites)
    finding = Finding(
        fingerprint=fingerprint,
        kind=kind,
        model=path.name,
        config=step.label,
        culprit=Culprit(
            scope="pass" if len(passes) == 1 else "interaction",
            passes=passes,
            method="--passes of ditox-ci reduce",
        ),
        measured={**failure.evidence, "message": failure.message},
        pinpointing=Pinpointing(reduction=result.record),
        repro=f"{fingerprint}/",
    )
    bundle = write_repro(
        Path(options.out),
        finding,
        result.model,
        model,
        result.feeds,
        step,
        build.optimizer,
        config.settings,
        options.timeout,
        runner_name=runner_name,
        names=result.names,
        build=build_under_test(build),
    )
    log.info(
        f"{failure.kind}: {result.record.nodes_before} -> {result.record.nodes_after} nodes "
        f"in {result.record.checks} checks ({result.record.reason}); bundle: {bundle}"
    )
    print(bundle)
    return 1
