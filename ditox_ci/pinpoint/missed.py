"""A missed optimization pinned down on the `--base-optimizer` build of the same run.

The reference report says what an earlier build did (`triage/missed.py`); the base build in hand
says it for certain. Each missed optimization is run there under its config: one the base build
does no better on is not this change's and goes. The first of each bug is then reduced, by the
reduction core (`pinpoint.reduce`), to a smallest model on which the base build still leaves fewer
of the op types the build under test keeps; both builds judge each candidate through their own
worker pools. Its repro bundle's `repro.py` counts those op types in the optimizer's result and
exits 1 while they are more than the base build left.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import onnx

from ditox_ci.corpus.loading import load_model
from ditox_ci.engine.original import Draw
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import JobResult, WorkerConfig
from ditox_ci.engine.structure import model_size
from ditox_ci.engine.values import Feeds
from ditox_ci.pinpoint.judge import JudgeError, PoolJudge, candidate_outcome
from ditox_ci.pinpoint.pinpointer import REPRO_DIR
from ditox_ci.pinpoint.reduce import Verdict, reduce
from ditox_ci.pinpoint.repro import BuildUnderTest, write_repro
from ditox_ci.report.effect import Size
from ditox_ci.report.model import Finding


def ops_left(outcome: Outcome | None, original: Size) -> dict[str, int] | None:
    """What the optimizer's result left of each op type (the `original`'s when it left it as it
    was); None when there is no result to count (the optimizer failed, the pool gave no verdict)."""
    if outcome is None or (outcome.kind is not None and outcome.failed and outcome.size is None):
        return None
    size = outcome.size if outcome.changed and outcome.size is not None else original
    return dict(size.ops)


def keeps_more(head: Mapping[str, int], base: Mapping[str, int], ops: Mapping[str, int]) -> bool:
    """Whether the head's result leaves more of one of `ops` than the base build's."""
    return any(head.get(op, 0) > base.get(op, 0) for op in ops)


@dataclass
class MissedPinpointer:
    """Confirms and reduces missed optimizations with both builds' pools (see the module docstring)."""

    head: PoolJudge
    base: PoolJudge
    config: WorkerConfig
    out_dir: Path
    build: BuildUnderTest
    deadline: float
    bundles: dict[str, str] = field(default_factory=dict)
    checks: int = 0

    def on_base(self, result: JobResult, step: Step) -> int | None:
        """The nodes the base build's result leaves on the model; None without a verdict."""
        try:
            outcome = self.base.run(result.ref, step)
        except JudgeError:
            return None
        # the original as the sweep sized it: nothing to load again
        left = ops_left(outcome, result.size) if result.size is not None else None
        return None if left is None else sum(left.values())

    def _both(self, name: str, model: onnx.ModelProto, feeds: Feeds, step: Step) -> tuple[dict, dict] | None:
        self.checks += 1
        original = model_size(model, 0)
        head = ops_left(candidate_outcome(self.head, name, model, feeds, step), original)
        base = ops_left(candidate_outcome(self.base, name, model, feeds, step), original)
        return None if head is None or base is None else (head, base)

    def reduced(self, finding: Finding, result: JobResult, step: Step) -> Finding:
        """`finding` with its reduction and repro bundle, when the budget allows and the base
        build still rewrites the model (the same bug's later findings take the first's bundle)."""
        if finding.fingerprint in self.bundles:
            return replace(finding, repro=self.bundles[finding.fingerprint])
        budget = self.deadline - time.monotonic()
        kept_ops = dict(finding.measured.get("not_removed") or {})
        if budget <= 0 or not kept_ops:
            return finding
        model = load_model(result.ref)
        settings = self.config.settings
        feeds = (result.draw or Draw(settings.samples)).feeds(model, result.ref, settings)
        name = result.ref.id

        def still_missed(candidate: onnx.ModelProto, candidate_feeds: Feeds) -> Verdict:
            both = self._both(name, candidate, candidate_feeds, step)
            if both is None:
                return Verdict.UNJUDGED
            return Verdict.FAILS if keeps_more(*both, kept_ops) else Verdict.PASSES

        runner_name = result.info.runner_or_default()
        reduction = reduce(model, feeds, still_missed, budget, runner_name)
        if reduction.record.lost_the_failure:
            return replace(finding, pinpointing=replace(finding.pinpointing, reduction=reduction.record))
        both = self._both(name, reduction.model, reduction.feeds, step)
        if both is None or not keeps_more(*both, kept_ops):
            return finding
        head, base = both
        left = {op: base.get(op, 0) for op in kept_ops if head.get(op, 0) > base.get(op, 0)}
        measured = {**finding.measured, "reduced": {"head_left": head, "base_left": base}}
        pinpointed = replace(
            finding, measured=measured, pinpointing=replace(finding.pinpointing, reduction=reduction.record)
        )
        write_repro(
            self.out_dir / REPRO_DIR,
            pinpointed,
            reduction.model,
            model,
            reduction.feeds,
            step,
            self.config.optimizer,
            settings,
            self.config.timeout_s,
            runner_name=runner_name,
            names=reduction.names,
            build=self.build,
            missed=left,
        )
        self.bundles[finding.fingerprint] = f"{REPRO_DIR}/{finding.fingerprint}/"
        return replace(pinpointed, repro=self.bundles[finding.fingerprint])
