"""Judging a model under one step through the worker pool (`PoolJudge`), so that a crash or hang
while localizing or reducing is an Outcome, never a dead sweep: the pinpoint stage's and `ditox-ci
reduce`'s way to the workers.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import onnx

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import write_recorded_inputs
from ditox_ci.engine.divergence import Divergence
from ditox_ci.engine.original import EXACT_SAMPLES
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import Job, WorkerPool
from ditox_ci.engine.values import Feeds
from ditox_ci.errors import InternalError
from ditox_ci.report.model import INTERNAL_ERROR


class JudgeError(Exception):
    """The pool gave no verdict for a model (it was skipped: unreadable, or its original fails)."""


class PoolJudge:
    """Judges one model under one step through the worker pool, so a crash or hang is an Outcome.

    `run` takes a model as the corpus gives it; `candidate` and `divergence` an in-memory model
    with exactly the given feeds (a reduction candidate, or a model `ditox-ci reduce` was handed).
    """

    def __init__(self, pool: WorkerPool, scratch: Path) -> None:
        self.pool = pool
        self.scratch = scratch
        self.candidates = 0

    def run(self, ref: ModelRef, step: Step, fresh: bool = False) -> Outcome:
        """`fresh`: the model prepared anew, no verdict from the worker's cache (a repeat)."""
        return self.judged(ref, step, fresh)[0]

    def judged(self, ref: ModelRef, step: Step, fresh: bool = False) -> tuple[Outcome, str]:
        """The outcome, and the runner that judged the model (the one that could run it)."""
        results = list(self.pool.run([Job(ref, (step,), fresh=fresh)]))
        if results and results[0].status == INTERNAL_ERROR:
            raise InternalError(f"{ref.id} under {step.label}: {results[0].reason}")
        outcome = results[0].outcomes.get(step.label) if results else None
        if outcome is None:
            reason = results[0].reason if results else "no result"
            raise JudgeError(f"the worker did not judge {ref.id} under {step.label}: {reason}")
        return outcome, results[0].info.runner_or_default()

    def candidate(self, name: str, model: onnx.ModelProto, feeds: Feeds, step: Step) -> Outcome:
        return self.candidate_judged(name, model, feeds, step)[0]

    def candidate_judged(
        self, name: str, model: onnx.ModelProto, feeds: Feeds, step: Step
    ) -> tuple[Outcome, str]:
        with self._written(name, model, feeds) as ref:
            return self.judged(ref, step)

    def divergence(
        self, name: str, model: onnx.ModelProto, feeds: Feeds, step: Step, rtol: float, atol: float
    ) -> Divergence | None:
        """Where inside `model` its output mismatch under `step` starts; None when it no longer
        mismatches, or the worker crashed, hung or ran out of memory finding out."""
        with self._written(name, model, feeds) as ref:
            results = list(self.pool.run([Job(ref, (step,), divergence=(rtol, atol))]))
        return results[0].divergences.get(step.label) if results else None

    @contextmanager
    def _written(self, name: str, model: onnx.ModelProto, feeds: Feeds) -> Iterator[ModelRef]:
        self.candidates += 1
        folder = self.scratch / f"candidate-{self.candidates}"
        try:
            write_recorded_inputs(folder, model, feeds)
            # a unique id and path per candidate: workers cache prepared models by both
            yield ModelRef(
                id=f"{name}#candidate-{self.candidates}",
                source="candidate",
                path=str(folder / "model.onnx"),
                inputs_dir=str(folder),
                meta={EXACT_SAMPLES: True},
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def candidate_outcome(
    judge: PoolJudge, name: str, model: onnx.ModelProto, feeds: Feeds, step: Step
) -> Outcome | None:
    """A reduction check's Outcome; None for a candidate the pool gives no verdict on (a worker
    skipped it: `reduce.Verdict.UNJUDGED`). Any other error is a bug of ours, which the caller
    records against the model."""
    try:
        return judge.candidate(name, model, feeds, step)
    except JudgeError:
        return None
