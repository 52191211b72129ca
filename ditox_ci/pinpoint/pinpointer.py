"""The pinpoint stage: localize, reduce and bundle every failing finding of a sweep.

Runs in the parent after the sweep, while its WorkerPool is still open: every optimizer call and
every ONNX Runtime run of an optimized or reduced candidate goes through the pool's workers, so a
crash while pinpointing is an Outcome, not a dead sweep. The parent itself only parses models and
runs ONNX Runtime on models already proven safe (the original the sweep ran, or a reduced
candidate a worker ran), to record intermediates and the bundle's expected outputs.

For each failing finding:
1. a multi-pass config's culprit (scope `unknown`) is localized with probes through the pool;
2. the original model is reduced while it still fails the same way under the culprit step;
3. the fingerprint is recomputed from the culprit and what its passes alone rewrite in the
   original (never from the reduced model, which depends on the time budget), so the same bug
   found by two configs or in two models gets one fingerprint;
4. one repro bundle is written per distinct fingerprint.
A finding the pool gives no verdict on (JudgeError: its model was skipped) is left as the sweep
found it, with `Pinpointing.error`. Any other error while pinpointing is a bug of ours: the finding is
left the same way and its model is recorded as an internal error (`Pinpointed.internal_errors`),
which the run reports with exit 70 once the report is written.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx

from ditox_ci.control import CULPRIT_PREFIX, NOP, PROBE_PREFIX, list_label
from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.loading import load_model
from ditox_ci.engine.divergence import Divergence
from ditox_ci.engine.findings import culprit_fingerprint
from ditox_ci.engine.original import Draw
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import JobResult, WorkerPool
from ditox_ci.engine.values import Feeds
from ditox_ci.errors import InternalError
from ditox_ci.log import Log
from ditox_ci.pinpoint.judge import JudgeError, PoolJudge, candidate_outcome
from ditox_ci.pinpoint.localize import localize
from ditox_ci.pinpoint.reduce import ReductionResult, StillFails, reduce, same_finding
from ditox_ci.pinpoint.repro import AS_INSTALLED, BuildUnderTest, write_repro
from ditox_ci.pinpoint.standalone import checked_standalone
from ditox_ci.report.evidence import Reduction
from ditox_ci.report.kinds import INVALID_MODEL, VALUES_KIND, kind_gates
from ditox_ci.report.model import FLAKY, Culprit, Finding

LOCALIZE_MODES = ("auto", "off")
OPAQUE_METHOD = "not localized: opaque optimizer (no pass lists)"
REPRO_DIR = "repro"
STANDALONE_MIN_S = 2.0  # a fuzz run with less time left writes no standalone script


@dataclass(frozen=True)
class PinpointOptions:
    out_dir: Path
    reduce_budget: float = 30.0
    # findings the baseline accepts as by design are localized (the baseline matches on culprit
    # passes) but not reduced: nobody will read their repro
    by_design: Callable[[Finding], bool] = field(default=lambda finding: False, compare=False)
    # an opaque optimizer has no pass names to localize over; one whose passes are a set (it orders
    # them itself) gets its culprits as sorted sets
    opaque: bool = False
    passes_ordered: bool = True
    # time.monotonic() after which nothing more is localized or reduced (a fuzz run's budget);
    # findings left then keep the sweep's culprit and fingerprint
    deadline: float | None = None
    # where the workers loaded the optimizer from: the standalone check and the bundles run and
    # name that build, not the one this process would import
    build: BuildUnderTest = AS_INSTALLED

    def budget_left(self) -> float:
        """Seconds one more reduction may take."""
        if self.deadline is None:
            return self.reduce_budget
        return max(0.0, min(self.reduce_budget, self.deadline - time.monotonic()))


@dataclass(frozen=True)
class Pinpointed:
    """The findings after pinpointing, and what it cost."""

    findings: tuple[Finding, ...]
    probe_runs: int = 0
    reduce_checks: int = 0
    bundles: int = 0
    errors: int = 0
    reused: int = 0
    # model id → what went wrong in ditox-ci's own code while pinpointing one of its findings
    internal_errors: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, int]:
        return {
            "probe_runs": self.probe_runs,
            "reduce_checks": self.reduce_checks,
            "bundles": self.bundles,
            "errors": self.errors,
            "reductions_reused": self.reused,
        }


def culprit_step(step: Step, culprit: Culprit, steps: dict[str, Step]) -> Step:
    """The optimizer call that shows the finding with as few passes as known."""
    if culprit.scope == "infrastructure":
        return steps.get(NOP, Step(NOP, (NOP,)))
    if culprit.scope == "unknown" or not culprit.passes:
        return step
    return Step(list_label(CULPRIT_PREFIX, culprit.passes), culprit.passes, step.fixed_point)


class _Pinpointer:
    def __init__(
        self,
        pool: WorkerPool,
        steps: Sequence[Step],
        options: PinpointOptions,
        scratch: Path,
        log: Log,
    ) -> None:
        self.pool = pool
        self.steps = {step.label: step for step in steps}
        self.options = options
        self.judge = PoolJudge(pool, scratch)
        self.log = log
        self.probe_runs = 0
        self.reduce_checks = 0
        self.bundles: dict[str, str] = {}
        # shared by every finding of a model: default and fixed-point often probe the same lists
        self.probes: dict[tuple[str, tuple[str, ...]], Outcome] = {}
        # the same bug seen again (same kind, culprit, message and rewritten ops) is not reduced again
        self.reduced: dict[str, Finding] = {}
        self.reused = 0
        # a model's findings (default, fixed-point, …) follow one another: load it once for all
        self.loaded: tuple[str, onnx.ModelProto, Feeds] | None = None

    def _localize(self, result: JobResult, step: Step, failure: Outcome, flaky: bool) -> Culprit:
        def probe(passes: Sequence[str]) -> Outcome:
            key = (result.ref.id, tuple(passes))
            if key not in self.probes:
                self.probe_runs += 1
                self.probes[key] = self.judge.run(result.ref, Step(list_label(PROBE_PREFIX, passes), key[1]))
            return self.probes[key]

        def rerun(passes: Sequence[str]) -> Outcome:  # a repeat: never the cached verdict
            self.probe_runs += 1
            probe = Step(list_label(PROBE_PREFIX, passes), tuple(passes))
            return self.judge.run(result.ref, probe, fresh=True)

        if self.options.opaque:
            return Culprit("unknown", (), OPAQUE_METHOD, 0)
        single = {
            s.single_pass: result.outcomes[s.label]
            for s in self.steps.values()
            if s.single_pass and s.label in result.outcomes
        }
        nop = result.outcomes.get(NOP)
        culprit = localize(step.passes, failure, probe, single=single, nop=nop, rerun=rerun, flaky=flaky)
        if self.options.passes_ordered:
            return culprit
        return replace(culprit, passes=tuple(sorted(culprit.passes)))

    def _rewrites(self, result: JobResult, culprit: Culprit, failure: Outcome) -> Outcome:
        """What the culprit passes alone (not fixed-point) do to the original, for the fingerprint:
        the sweep's or localization's outcome when there is one, else one run through the pool. A
        result carried from a stored report that changed the model keeps no op changes (engine/
        reuse.py): it runs again."""
        if culprit.scope in ("unknown", "shared"):  # keyed on no pass's rewrite (culprit_fingerprint)
            return failure
        if culprit.scope == "infrastructure":
            return result.outcomes.get(NOP, failure)
        for step in self.steps.values():
            if step.passes == culprit.passes and not step.fixed_point and step.label in result.outcomes:
                outcome = result.outcomes[step.label]
                if outcome.evidence or not outcome.changed:
                    return outcome
        key = (result.ref.id, culprit.passes)
        if key not in self.probes:
            self.probe_runs += 1
            self.probes[key] = self.judge.run(result.ref, Step(list_label(PROBE_PREFIX, key[1]), key[1]))
        return self.probes[key]

    def _original(self, result: JobResult) -> tuple[onnx.ModelProto, Feeds]:
        """The model as the sweep ran it, and the feeds its worker judged it on (drawn again as
        the worker drew them: `result.draw`)."""
        if self.loaded is None or self.loaded[0] != result.ref.id:
            model = load_model(result.ref)
            settings = self.pool.config.settings
            draw = result.draw or Draw(settings.samples)
            self.loaded = (result.ref.id, model, draw.feeds(model, result.ref, settings))
        return self.loaded[1], self.loaded[2]

    def _still_fails(self, ref: ModelRef, step: Step, failure: Outcome) -> StillFails:
        def evaluate(candidate: onnx.ModelProto, feeds: Feeds) -> Outcome | None:
            self.reduce_checks += 1
            return candidate_outcome(self.judge, ref.id, candidate, feeds, step)

        return same_finding(evaluate, failure)

    def finding(self, finding: Finding, result: JobResult) -> Finding:
        step = self.steps[finding.config]
        failure = result.outcomes[finding.config]
        culprit = finding.culprit
        if culprit.scope == "unknown":
            if self.options.deadline is not None and self.options.budget_left() <= 0:
                return replace(finding, pinpointing=replace(finding.pinpointing, skipped="out of time"))
            tries = finding.triage.reproduce
            culprit = self._localize(
                result, step, failure, tries is not None and tries.reproduced < tries.tries
            )
        # the fingerprint comes before reduction and never from it (see failure_fingerprint), and
        # whether or not the finding is reduced: a bug the base build shows too has the same id in
        # the PR check as in the nightly's plain sweep
        same_bug = culprit_fingerprint(failure, culprit, rewrites=self._rewrites(result, culprit, failure))
        localized = replace(finding, culprit=culprit, fingerprint=same_bug)
        # by design or older than this build: nobody will read its repro; flaky: no re-run showed it
        if self.options.by_design(localized) or localized.status == FLAKY:
            return localized
        earlier = self.reduced.get(same_bug)
        if earlier is not None:
            self.reused += 1
            reused = replace(finding.pinpointing, same_as=f"{earlier.model} [{earlier.config}]")
            return replace(
                localized, fingerprint=earlier.fingerprint, repro=earlier.repro, pinpointing=reused
            )
        target = culprit_step(step, culprit, self.steps)
        model, feeds = self._original(result)
        pinpointing = finding.pinpointing
        reduction: ReductionResult | None = None
        reduced, reduced_feeds = model, feeds
        budget = self.options.budget_left()
        # the runner that judged the model records its values and computes the bundle's outputs
        runner_name = result.info.runner_or_default()
        if budget > 0:
            still_fails = self._still_fails(result.ref, target, failure)
            reduction = reduce(model, feeds, still_fails, budget, runner_name)
            reduced, reduced_feeds = reduction.model, reduction.feeds
            pinpointing = replace(pinpointing, reduction=reduction.record)
        divergence = None
        if VALUES_KIND in failure.kinds and reduction is not None:
            divergence = self.judge.divergence(
                # one (rtol, atol) for every intermediate value: float32's where none was given
                result.ref.id, reduced, reduced_feeds, target, *self.pool.config.settings.tolerances.scalar()
            )
            if divergence is not None:
                pinpointing = replace(pinpointing, divergence=divergence.to_json())
        pinpointed = replace(finding, fingerprint=same_bug, culprit=culprit, pinpointing=pinpointing)
        # a reduction that lost the failure would make a bundle whose repro.py passes
        if reduction is None or not reduction.record.lost_the_failure:
            names = reduction.names if reduction is not None else {}
            checker = self._only_the_checker(pinpointed)
            bundle = self._bundle(
                pinpointed, reduced, model, reduced_feeds, target, divergence, runner_name, names, checker
            )
            pinpointed = replace(pinpointed, repro=bundle)
            # the standalone reproducer an issue quotes runs ONNX Runtime only
            record = (
                self._standalone(pinpointed, reduced, reduced_feeds, target, checker)
                if runner_name == "onnxruntime"
                else None
            )
            if record is not None:
                with_record = replace(pinpointed.pinpointing, standalone=record)
                pinpointed = replace(pinpointed, pinpointing=with_record)
        self.log.info(_summary(pinpointed, reduction.record if reduction is not None else None))
        self.reduced[same_bug] = pinpointed
        return pinpointed

    def _only_the_checker(self, finding: Finding) -> bool:
        """Whether the finding's other verdicts are by design and the checker refusing its result
        the bug: without its `invalid-model` verdict the baseline would accept it."""
        rest = finding.but_for_the_checker()
        if INVALID_MODEL not in finding.verdicts or rest.verdicts == finding.verdicts:
            return False
        return self.options.by_design(rest)

    def _standalone(
        self, finding: Finding, reduced: onnx.ModelProto, feeds: Feeds, step: Step, only_the_checker: bool
    ) -> dict[str, Any] | None:
        """What an issue needs to reproduce the bug without the run's artifact (one child run)."""
        timeout_s = self.pool.config.timeout_s
        if self.options.deadline is not None:
            timeout_s = min(timeout_s, self.options.deadline - time.monotonic())
            if timeout_s < STANDALONE_MIN_S:
                return None
        return checked_standalone(
            finding,
            reduced,
            feeds,
            step.passes,
            step.fixed_point,
            self.pool.config.optimizer,
            self.pool.config.settings.tolerances,
            self.options.out_dir / REPRO_DIR / finding.fingerprint,
            timeout_s,
            self.options.build,
            only_the_checker,
        )

    def _bundle(
        self,
        finding: Finding,
        reduced: onnx.ModelProto,
        original: onnx.ModelProto,
        feeds: Feeds,
        step: Step,
        divergence: Divergence | None,
        runner_name: str,
        names: Mapping[str, str],
        only_the_checker: bool,
    ) -> str:
        if finding.fingerprint not in self.bundles:
            write_repro(
                self.options.out_dir / REPRO_DIR,
                finding,
                reduced,
                original,
                feeds,
                step,
                self.pool.config.optimizer,
                self.pool.config.settings,
                self.pool.config.timeout_s,
                divergence,
                runner_name,
                names,
                self.options.build,
                only_the_checker,
            )
            self.bundles[finding.fingerprint] = f"{REPRO_DIR}/{finding.fingerprint}/"
        return self.bundles[finding.fingerprint]


def _summary(finding: Finding, reduction: Reduction | None) -> str:
    culprit = finding.culprit
    blame = ",".join(culprit.passes) or "-"
    line = (
        f"{finding.model} [{finding.config}] {finding.kind}: {culprit.scope} {blame} "
        f"({culprit.optimizer_runs} probes)"
    )
    if reduction is not None:
        line += (
            f"; {reduction.nodes_before} -> {reduction.nodes_after} nodes in {reduction.checks} "
            f"checks ({reduction.reason})"
        )
    return line + (f"; {finding.repro}" if finding.repro else "")


def pinpoint(
    findings: Sequence[Finding],
    results: Sequence[JobResult],
    steps: Sequence[Step],
    pool: WorkerPool,
    options: PinpointOptions,
    log: Log,
) -> Pinpointed:
    """Localize, reduce and bundle every failing finding; warnings pass through unchanged."""
    by_model = {result.ref.id: result for result in results}
    done: list[Finding] = []
    errors = 0
    internal: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="ditox-pinpoint-") as scratch:
        pinpointer = _Pinpointer(pool, steps, options, Path(scratch), log)
        for finding in findings:
            result = by_model.get(finding.model)
            if not kind_gates(finding.kind) or result is None or finding.config not in result.outcomes:
                done.append(finding)
                continue
            try:
                done.append(pinpointer.finding(finding, result))
            except JudgeError as exc:  # the model has no verdict to pinpoint by
                errors += 1
                done.append(_not_pinpointed(finding, exc, log.warning))
            # a bug of ours: recorded against the model (exit 70 at the end), the other findings go on
            except (InternalError, Exception) as exc:
                errors += 1
                internal.setdefault(finding.model, f"pinpointing [{finding.config}]: {_described(exc)}")
                done.append(_not_pinpointed(finding, exc, log.error))
    return Pinpointed(
        findings=tuple(done),
        probe_runs=pinpointer.probe_runs,
        reduce_checks=pinpointer.reduce_checks,
        bundles=len(pinpointer.bundles),
        errors=errors,
        reused=pinpointer.reused,
        internal_errors=internal,
    )


def _described(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"


def _not_pinpointed(finding: Finding, exc: BaseException, say: Callable[[str], None]) -> Finding:
    """`finding` as the sweep found it, with why pinpointing it failed."""
    message = _described(exc)
    say(f"{finding.model} [{finding.config}]: not pinpointed ({message})"[:300])
    return replace(finding, pinpointing=replace(finding.pinpointing, error=message))
