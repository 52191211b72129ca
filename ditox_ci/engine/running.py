"""One model's job as the pool sees it, across worker restarts: the outcomes its worker reported (and
those rebuilt from a stored report: carried steps), what the job counted, and what a dead worker's
step becomes. The pool (`engine.pool`) drives the processes and hands each job's messages here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from ditox_ci.control import NOP
from ditox_ci.engine.deaths import Death, failure_outcome
from ditox_ci.engine.divergence import Divergence
from ditox_ci.engine.messages import (
    ALLOWANCE_BASE_MB,
    DEFAULT_MEMORY_LIMIT_MB,
    Job,
    JobCounts,
    JobResult,
    OriginalPrepared,
    StepDivergence,
    StepFinished,
    StepsCarried,
    WorkerState,
)
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.reuse import OriginalInfo
from ditox_ci.errors import InternalError
from ditox_ci.report.kinds import ModelStatus


@dataclass
class RunningJob:
    """Book-keeping for the model a slot is working on, across worker restarts."""

    job: Job
    started: float
    remaining: tuple[Step, ...]
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    divergences: dict[str, Divergence] = field(default_factory=dict)
    original: OriginalPrepared | None = None
    # when the worker's phase count (WorkerState.entered) was last seen to move, and that count
    phase_started: float = 0.0
    entered: int = 0
    # the worker's optimizer calls (WorkerState.optimizer_runs) when it was handed this job
    runs_from: int = 0
    counts: JobCounts = field(default_factory=JobCounts)
    memory_mb: int = DEFAULT_MEMORY_LIMIT_MB  # what the worker may use for this model
    reserve_mb: int = ALLOWANCE_BASE_MB  # what the pool counts for it against its budget (`_need_mb`)
    # where this model's part of the worker's stderr file begins: the tail kept as evidence is
    # this model's alone, not what earlier models on the same worker printed
    stderr_from: int = 0

    def record(self, message: OriginalPrepared | StepFinished | StepsCarried | StepDivergence) -> None:
        """What the worker said of the original or of steps (step indexes are into `remaining`, the
        steps the worker was handed)."""
        match message:
            case OriginalPrepared():
                self.original = message
            case StepFinished(step_index=index, outcome=outcome, screened=screened):
                self.outcomes[self.remaining[index].label] = outcome
                if screened:
                    self.counts += JobCounts(screened=1)
            case StepsCarried(step_indexes=indexes):
                self._carry(indexes)
            case StepDivergence(step_index=index, divergence=divergence):
                if divergence is not None:
                    self.divergences[self.remaining[index].label] = divergence

    def _carry(self, indexes: tuple[int, ...]) -> None:
        """The outcomes of the steps the worker carried, rebuilt from the job's stored report as it
        found them (engine/reuse.py): the same function of the same stored report, original and
        control's result, or the stored control's where a canary held (the control among them)."""
        reuse, original = self.job.reuse, self.original
        control = self.outcomes.get(NOP, self.job.control)
        results = {label: outcome.digest for label, outcome in self.outcomes.items()}
        if control is None and reuse is not None and original is not None:  # a canary held
            control = reuse.canary_control(results, original.judged_as, original.sha256, original.size)
        if reuse is None or original is None or original.size is None or control is None:
            raise InternalError("steps carried without a stored report, an original or the control's outcome")
        for index in indexes:
            label = self.remaining[index].label
            digest = reuse.carried(label, original.judged_as, control.digest, original.sha256, results)
            if digest is None:
                raise InternalError(f"{label}: the worker carried a step its stored report does not carry")
            self.outcomes[label] = reuse.carried_outcome(
                label, digest, control, original.size, original.sha256
            )
        self.counts += JobCounts(carried=len(indexes))

    def count_runs(self, state: WorkerState) -> None:
        """Add the optimizer calls the worker made since it was handed the job (the job's part on
        this worker is over)."""
        self.counts += JobCounts(optimizer_runs=state.optimizer_runs - self.runs_from)

    def after_death(
        self, state: WorkerState, cause: Death | None, detail: str, stderr: str
    ) -> JobResult | None:
        """Turn a dead/stuck worker into an outcome for the step its state names (none when `cause`
        is None); the result when the job is over, else None: it resumes, and the steps the worker
        finished without reporting them run again."""
        self.count_runs(state)
        if cause is not None:
            skipped = self._pin(state, cause, detail, stderr)
            if skipped is not None:
                return skipped
        self.remaining = tuple(step for step in self.remaining if step.label not in self.outcomes)
        self.counts += JobCounts(restarts=1)
        if not self.remaining:
            return self.result(ModelStatus.OK)
        return None

    def _pin(self, state: WorkerState, cause: Death, detail: str, stderr: str) -> JobResult | None:
        """Pin `cause` where the dead worker's state says it was: the model skipped when that was
        its original (the result, returned), else its step's outcome."""
        index, phase = state.step_index, state.phase
        if index < 0 or self.original is None:
            reason = f"the original model {cause} while being loaded, fed and run ({detail})"
            if stderr.strip():
                reason += f"; its last words: {stderr.strip().splitlines()[-1][:300]}"
            return self.result(ModelStatus.SKIPPED, reason)
        if phase == "screen":
            # a pass of a screened list crashed, hung or ran out of memory: the model resumes with
            # screening off, each step on its own, where the pass's failure is its own step's finding
            self.job = replace(self.job, screen=False)
        elif phase != "divergence":
            # in the divergence phase the step's outcome already came back: it stands, without divergence
            step = self.remaining[index]
            runner_name = self.original.info.runner_or_default()
            self.outcomes[step.label] = failure_outcome(
                phase, cause, detail, stderr, runner_name, self.memory_mb
            )
        return None

    def result(self, status: ModelStatus, reason: str = "") -> JobResult:
        original = self.original or OriginalPrepared(nodes=0, sha256="", info=OriginalInfo())
        return JobResult(
            ref=self.job.ref,
            status=status,
            reason=reason,
            nodes=original.nodes,
            sha256=original.sha256,
            judged_as=original.judged_as,
            outcomes=self.outcomes,
            divergences=self.divergences,
            info=original.info,
            draw=original.draw,
            wall_s=time.monotonic() - self.started,
            counts=self.counts,
            size=original.size,
        )
