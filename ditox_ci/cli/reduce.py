"""`ditox-ci reduce MODEL --passes a,b`: shrink one failing model and write its repro bundle.

The optimizer and the optimized model's runtime session are native code that can crash or hang,
so each check runs in a persistent `spawn` worker process; when it dies, the check reports a crash
and a fresh worker takes over, so the command itself survives.
"""

from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.connection
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import onnx

from ditox_ci import runner
from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import InputSpecError, make_feeds
from ditox_ci.errors import InputError, UsageError
from ditox_ci.fingerprint import finding_fingerprint
from ditox_ci.log import Log
from ditox_ci.optimizers import load_optimizer
from ditox_ci.outcome import Outcome
from ditox_ci.reduce import Feeds, reduce, same_finding
from ditox_ci.report.model import Culprit, Finding
from ditox_ci.repro import write_bundle

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


def _mismatch(
    expected: list[list[np.ndarray]],
    actual: list[list[np.ndarray]],
    names: Sequence[str],
    rtol: float,
    atol: float,
) -> Outcome | None:
    for sample, (want_outputs, got_outputs) in enumerate(zip(expected, actual, strict=True)):
        for name, want, got in zip(names, want_outputs, got_outputs, strict=True):
            if want.shape != got.shape or want.dtype != got.dtype:
                return Outcome(
                    "output-mismatch",
                    f"output {name!r} is {got.dtype}{list(got.shape)}, "
                    f"expected {want.dtype}{list(want.shape)}",
                    {"output": name, "sample": sample},
                )
            if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
                difference = np.abs(got.astype(np.float64) - want.astype(np.float64))
                scale = np.maximum(np.abs(want.astype(np.float64)), np.finfo(np.float64).tiny)
                max_abs, max_rel = (
                    float(np.nanmax(difference)),
                    float(np.nanmax(difference / scale)),
                )
                return Outcome(
                    "output-mismatch",
                    f"output {name!r} differs beyond rtol={rtol} atol={atol} "
                    f"(max_abs {max_abs:.3g})",
                    {"output": name, "sample": sample, "max_abs": max_abs, "max_rel": max_rel},
                )
    return None


def evaluate(
    model_bytes: bytes,
    feeds: Feeds,
    optimizer: str,
    passes: Sequence[str],
    fixed_point: bool,
    rtol: float,
    atol: float,
    *,
    stage: Callable[[str], None] = lambda _stage: None,
) -> Outcome:
    """Optimize, check, run and compare one model in this process; `stage` announces each step so
    a watching parent can name the step that crashed."""
    original = onnx.load_from_string(model_bytes)
    try:
        reference = runner.run_all(runner.load_session(model_bytes), feeds)
    except (runner.RuntimeLoadError, runner.RuntimeRunError) as exc:
        return Outcome(None, f"the original model does not run: {exc}")
    stage("optimizer")
    try:
        optimized = load_optimizer(optimizer).optimize(original, list(passes), fixed_point)
    except Exception as exc:
        return Outcome("optimizer-error", f"{type(exc).__name__}: {exc}")
    optimized_bytes = optimized.SerializeToString()
    changed = optimized_bytes != model_bytes
    try:
        onnx.checker.check_model(optimized)
    except (onnx.checker.ValidationError, ValueError) as exc:
        return Outcome("invalid-model", str(exc), changed=changed)
    names = [v.name for v in original.graph.output]
    if [v.name for v in optimized.graph.output] != names:
        return Outcome("interface-change", "the optimized model's outputs differ", changed=changed)
    stage("runtime")
    try:
        session = runner.load_session(optimized_bytes)
    except runner.RuntimeLoadError as exc:
        return Outcome("runtime-load-error", str(exc), changed=changed)
    try:
        actual = runner.run_all(session, feeds)
    except runner.RuntimeRunError as exc:
        return Outcome("runtime-error", str(exc), changed=changed)
    mismatch = _mismatch(reference, actual, names, rtol, atol)
    return Outcome(None, changed=changed) if mismatch is None else mismatch


def _serve(connection: multiprocessing.connection.Connection) -> None:
    while True:
        request = connection.recv()
        outcome = evaluate(*request, stage=lambda name: connection.send(("stage", name)))
        connection.send(("outcome", outcome.to_json()))


class IsolatedEvaluator:
    """`evaluate` in a persistent spawn worker: a crash or hang becomes an Outcome."""

    def __init__(
        self,
        optimizer: str,
        passes: Sequence[str],
        fixed_point: bool,
        rtol: float,
        atol: float,
        timeout_s: float,
    ) -> None:
        self.settings = (optimizer, tuple(passes), fixed_point, rtol, atol)
        self.timeout_s = timeout_s
        self.context = multiprocessing.get_context("spawn")
        self.process: Any = None
        self.connection: multiprocessing.connection.Connection | None = None
        self.checks = 0

    def _start(self) -> multiprocessing.connection.Connection:
        if self.connection is None:
            parent, child = self.context.Pipe()
            self.process = self.context.Process(target=_serve, args=(child,), daemon=True)
            self.process.start()
            child.close()
            self.connection = parent
        return self.connection

    def _stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()
        if self.connection is not None:
            self.connection.close()
        self.process, self.connection = None, None

    def __call__(self, model: onnx.ModelProto, feeds: Feeds) -> Outcome:
        self.checks += 1
        connection = self._start()
        connection.send((model.SerializeToString(), feeds, *self.settings))
        stage = "optimizer"
        while True:
            try:
                if not connection.poll(self.timeout_s):
                    self._stop()
                    kind = "optimizer-timeout" if stage == "optimizer" else "runtime-error"
                    return Outcome(kind, f"no answer within {self.timeout_s}s in the {stage} step")
                tag, payload = connection.recv()
            except (EOFError, OSError):
                # the pipe closes before the process is reaped: wait for the exit code
                if self.process is not None:
                    self.process.join(timeout=5)
                code = self.process.exitcode if self.process is not None else None
                self._stop()
                kind = "optimizer-crash" if stage == "optimizer" else "runtime-error"
                return Outcome(kind, f"the {stage} step killed its process (exit code {code})")
            if tag == "stage":
                stage = payload
            else:
                return Outcome.from_json(payload)

    def __enter__(self) -> IsolatedEvaluator:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", type=Path, help="the .onnx model that fails")
    parser.add_argument("--passes", required=True, help="comma-separated pass list, in order")
    parser.add_argument(
        "--optimizer",
        default="onnxoptimizer",
        help="onnxoptimizer (default) or pkg.module:function",
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
    parser.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance")
    parser.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds one optimizer+runtime check may take (default: 60)",
    )


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    log = Log(env)
    passes = [name.strip() for name in args.passes.split(",") if name.strip()]
    if not passes:
        raise UsageError(
            "--passes is empty; give the culprit passes, e.g. --passes fuse_bn_into_conv"
        )
    if args.samples < 1 or args.budget <= 0:
        raise UsageError("--samples must be >= 1 and --budget > 0")
    load_optimizer(args.optimizer)
    try:
        model = onnx.load(str(args.model))
    except FileNotFoundError:
        raise InputError(
            f"model {args.model} does not exist; pass a path to an .onnx file"
        ) from None
    except Exception as exc:
        raise InputError(f"model {args.model} is not a readable ONNX model ({exc})") from None
    ref = ModelRef(id=args.model.name, source=str(args.model), path=str(args.model))
    try:
        feeds = make_feeds(model, ref, args.samples, args.seed)
    except InputSpecError as exc:
        raise InputError(f"cannot make inputs for {args.model}: {exc}") from None
    with IsolatedEvaluator(
        args.optimizer, passes, args.fixed_point, args.rtol, args.atol, args.timeout
    ) as evaluator:
        failure = evaluator(model, feeds)
        if not failure.failed:
            log.info(f"{args.model} does not fail under {','.join(passes)}: nothing to reduce")
            return 0
        with log.group(f"reduce {args.model.name} ({len(model.graph.node)} nodes)"):
            result = reduce(model, feeds, same_finding(evaluator, failure), args.budget)
    expected = runner.run_all(runner.load_session(result.model.SerializeToString()), result.feeds)
    output_names = [v.name for v in result.model.graph.output]
    scope = "pass" if len(passes) == 1 else "interaction"
    kind = str(failure.kind)
    fingerprint = finding_fingerprint(kind, passes, failure.message, result.model)
    finding = Finding(
        fingerprint=fingerprint,
        kind=kind,
        model=args.model.name,
        config=f"passes:{','.join(passes)}",
        culprit=Culprit(scope=scope, passes=tuple(passes), method="--passes of ditox-ci reduce"),
        evidence={"message": failure.message, **failure.evidence, "reduction": result.to_json()},
        repro=f"{fingerprint}/",
    )
    bundle = write_bundle(
        args.out,
        finding=finding,
        model=result.model,
        original_model=model,
        feeds=result.feeds,
        expected=[dict(zip(output_names, sample, strict=True)) for sample in expected],
        optimizer_spec=args.optimizer,
        passes=passes,
        fixed_point=args.fixed_point,
        rtol=args.rtol,
        atol=args.atol,
    )
    log.info(
        f"{failure.kind}: {result.nodes_before} -> {result.nodes_after} nodes "
        f"in {result.checks} checks ({result.reason}); bundle: {bundle}"
    )
    print(bundle)
    return 1
