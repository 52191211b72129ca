"""The worker's messages: each kind a frozen dataclass that crosses the pipe as it is, the stream a
worker sends for one Job becomes that Job's result in the parent, and a dead worker's shared state
pins its failure on the step it names while the steps it had not sent run again."""

from __future__ import annotations

import multiprocessing
import pickle
from pathlib import Path

import pytest

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.deaths import Death
from ditox_ci.engine.divergence import Divergence
from ditox_ci.engine.messages import FLUSH_STEPS
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import (
    Batch,
    InternalFailure,
    Job,
    JobCounts,
    JobDone,
    JobResult,
    ModelSkipped,
    OptimizerLoadFailed,
    OriginalPrepared,
    StepDivergence,
    StepFinished,
    Stop,
    WorkerConfig,
    WorkerMessage,
    WorkerPool,
    WorkerState,
    _Slot,
)
from ditox_ci.engine.reuse import OriginalInfo
from ditox_ci.engine.running import RunningJob
from ditox_ci.engine.worker import _Outbox
from ditox_ci.errors import OptimizerLoadError

STEPS = (Step("pass:a", ("a",)), Step("pass:b", ("b",)))
FOUR = (Step("nop", ()), *STEPS, Step("pass:c", ("c",)))
JOB = Job(ModelRef(id="m.onnx", source="t", path="m.onnx"), STEPS)
SAME = Outcome(None, digest="d1", changed=True)
MISMATCH = Outcome("output-mismatch", "output 'y' differs", {"max_abs": 0.5}, "d2", True)
WHERE = Divergence("a", producer="Add_0", rewritten=("Add_0",), max_abs=0.5, compared=2)


def _state() -> WorkerState:
    return WorkerState(multiprocessing.get_context("spawn"))


def _busy_slot(steps: tuple[Step, ...] = STEPS) -> _Slot:
    running = RunningJob(job=Job(JOB.ref, steps), started=0.0, remaining=steps)
    return _Slot(process=None, conn=None, state=_state(), stderr_path=Path("-"), running=running)  # type: ignore[arg-type]


def test_every_message_crosses_the_pipe_unchanged():
    messages = [
        JOB,
        Stop(),
        OriginalPrepared(3, "ab12", OriginalInfo("random", "onnxruntime")),
        ModelSkipped("no inputs"),
        StepFinished(1, MISMATCH),
        StepDivergence(1, WHERE),
        StepDivergence(0, None),
        JobDone(4, 1),
        InternalFailure("pass:a: KeyError: 'y'"),
        OptimizerLoadFailed("cannot import x"),
        Batch((StepFinished(0, SAME), StepDivergence(0, None), JobDone(2, 0))),
    ]
    for message in messages:
        assert pickle.loads(pickle.dumps(message)) == message


def test_a_jobs_messages_become_its_result():
    with WorkerPool(WorkerConfig()) as pool:
        slot = _busy_slot()
        slot.state.handed()
        stream: list[WorkerMessage] = [
            OriginalPrepared(3, "ab12", OriginalInfo("random", "reference")),
            Batch((StepFinished(0, SAME),)),
            Batch((StepFinished(1, MISMATCH),)),
            Batch((StepDivergence(1, WHERE),)),
        ]
        # what the worker wrote into its state as it went: two steps, one divergence search
        for index, phase in ((0, "optimize"), (0, "run"), (1, "optimize"), (1, "run"), (1, "divergence")):
            slot.state.enter(index, phase)
        assert [pool._handle(slot, message) for message in stream] == [None] * len(stream)
        result = pool._handle(slot, Batch((JobDone(runtime_runs=4, cache_hits=1),)))
    assert slot.running is None and result is not None
    assert (result.status, result.nodes, result.sha256) == ("ok", 3, "ab12")
    assert result.info == OriginalInfo("random", "reference")
    assert result.outcomes == {"pass:a": SAME, "pass:b": MISMATCH}
    assert result.divergences == {"pass:b": WHERE}
    assert (result.counts.optimizer_runs, result.counts.runtime_runs, result.counts.cache_hits) == (3, 4, 1)


def test_a_skip_or_a_bug_of_ours_ends_the_job_and_an_unloadable_optimizer_stops_the_sweep():
    with WorkerPool(WorkerConfig()) as pool:
        skipped = pool._handle(_busy_slot(), ModelSkipped("no inputs"))
        ours = pool._handle(_busy_slot(), InternalFailure("pass:a: KeyError: 'y'"))
        idle = _Slot(process=None, conn=None, state=_state(), stderr_path=Path("-"))  # type: ignore[arg-type]
        with pytest.raises(OptimizerLoadError, match="cannot import x"):
            pool._handle(idle, OptimizerLoadFailed("cannot import x"))
    assert skipped is not None
    assert (skipped.status, skipped.reason, skipped.nodes, skipped.sha256) == ("skipped", "no inputs", 0, "")
    # recorded against the model, the sweep goes on; the run exits 70 once the report is written
    assert ours is not None and (ours.status, ours.reason) == ("internal-error", "pass:a: KeyError: 'y'")


def _reported(pool: WorkerPool, steps: tuple[Step, ...], first: Outcome) -> tuple[_Slot, RunningJob]:
    """A worker handed a job of `steps` that prepared its original and reported its first step."""
    slot = _busy_slot(steps)
    slot.state.handed()
    pool._handle(slot, OriginalPrepared(3, "ab12", OriginalInfo("random", "onnxruntime")))
    pool._handle(slot, Batch((StepFinished(0, first),)))
    assert slot.running is not None
    return slot, slot.running


def _died(phase: str) -> tuple[RunningJob, JobResult | None]:
    """A worker that finished steps 0-2 of FOUR, sent only step 0 (its batch still held 1 and 2),
    and died in `phase` of step 3."""
    with WorkerPool(WorkerConfig()) as pool:
        slot, running = _reported(pool, FOUR, SAME)
        for index in range(4):
            slot.state.enter(index, "optimize")
        slot.state.enter(3, phase)
        return running, running.after_death(slot.state, Death.CRASHED, "SIGSEGV", "")


def test_a_dead_worker_is_pinned_on_the_step_its_state_names_and_unsent_steps_run_again():
    running, result = _died("run")
    assert result is None  # the model goes on, on a fresh worker
    assert set(running.outcomes) == {"nop", "pass:c"}
    crash = running.outcomes["pass:c"]
    assert crash.kind == "runtime-error"
    assert crash.message == "ONNX Runtime on the optimized model crashed (SIGSEGV)"
    # finished on the dead worker but never sent: judged again, not lost and not blamed
    assert [step.label for step in running.remaining] == ["pass:a", "pass:b"]
    assert (running.counts.optimizer_runs, running.counts.restarts) == (4, 1)


def test_a_worker_dead_in_a_screen_resumes_every_unsent_step_unscreened():
    running, result = _died("screen")
    assert result is None and set(running.outcomes) == {"nop"}
    assert [step.label for step in running.remaining] == ["pass:a", "pass:b", "pass:c"]
    assert running.job.screen is False
    assert running.counts.optimizer_runs == 5  # four optimize phases and the screen call


def test_a_worker_dead_in_a_divergence_search_keeps_the_step_it_had_sent():
    with WorkerPool(WorkerConfig()) as pool:
        slot, running = _reported(pool, STEPS, MISMATCH)
        slot.state.enter(0, "divergence")
        assert running.after_death(slot.state, Death.TIMED_OUT, "after 60s", "") is None
    assert running.outcomes == {"pass:a": MISMATCH} and running.divergences == {}
    assert [step.label for step in running.remaining] == ["pass:b"]


def test_job_counts_add_up_field_by_field():
    total = sum((JobCounts(1, 2, 3, 4, 5), JobCounts(optimizer_runs=10, restarts=1)), JobCounts())
    assert total == JobCounts(optimizer_runs=11, runtime_runs=2, cache_hits=3, screened=4, restarts=6)


def test_a_timeout_whose_phase_ended_as_the_worker_was_stopped_is_pinned_on_no_step():
    """WorkerPool._replace passes no cause when the phase count moved between the pool's look and
    the kill: the phase that overran had ended, the one the state names had only begun."""
    with WorkerPool(WorkerConfig()) as pool:
        slot, running = _reported(pool, FOUR, SAME)
        slot.state.enter(1, "optimize")
        assert running.after_death(slot.state, None, "after 60s", "") is None
    assert running.outcomes == {"nop": SAME}
    assert [step.label for step in running.remaining] == ["pass:a", "pass:b", "pass:c"]
    assert running.counts.restarts == 1


def test_the_state_holds_a_step_and_its_phase_as_one_value():
    state = _state()
    assert (state.step_index, state.phase, state.entered) == (-1, "prepare", 0)  # before any job
    state.enter(41, "divergence")
    state.enter(7, "run")
    assert (state.step_index, state.phase, state.entered, state.optimizer_runs) == (7, "run", 2, 1)
    state.handed()
    assert (state.step_index, state.phase) == (-1, "prepare")


class _Pipe:
    def __init__(self) -> None:
        self.sent: list[Batch] = []

    def send(self, message: Batch) -> None:
        self.sent.append(message)


@pytest.mark.parametrize("every_step", [False, True])
def test_a_worker_sends_its_steps_when_it_holds_enough_of_them_never_by_the_clock(every_step: bool):
    pipe = _Pipe()
    outbox = _Outbox(pipe, every_step)  # type: ignore[arg-type]
    for index in range(FLUSH_STEPS + 3):
        outbox.add(StepFinished(index, SAME))
    outbox.flush(JobDone(0, 0))
    sizes = [len(batch.messages) for batch in pipe.sent]
    assert sizes == ([1] * (FLUSH_STEPS + 3) + [1] if every_step else [FLUSH_STEPS, 4])
    assert pipe.sent[-1].messages[-1] == JobDone(0, 0)
