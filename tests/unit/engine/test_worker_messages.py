"""The worker's messages: each kind a frozen dataclass that crosses the pipe as it is, and the
stream a worker sends for one Job becomes that Job's result in the parent."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.divergence import Divergence
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.worker import (
    InternalFailure,
    Job,
    JobDone,
    ModelSkipped,
    OptimizerLoadFailed,
    OriginalPrepared,
    PhaseStarted,
    StepDivergence,
    StepFinished,
    Stop,
    WorkerConfig,
    WorkerMessage,
    WorkerPool,
    _Running,
    _Slot,
)
from ditox_ci.errors import OptimizerLoadError

STEPS = (Step("pass:a", ("a",)), Step("pass:b", ("b",)))
JOB = Job(ModelRef(id="m.onnx", source="t", path="m.onnx"), STEPS)
SAME = Outcome(None, digest="d1", changed=True)
MISMATCH = Outcome("output-mismatch", "output 'y' differs", {"max_abs": 0.5}, "d2", True)
WHERE = Divergence("a", producer="Add_0", rewritten=("Add_0",), max_abs=0.5, compared=2)


def _busy_slot() -> _Slot:
    running = _Running(job=JOB, started=0.0, remaining=STEPS)
    return _Slot(process=None, conn=None, stderr_path=Path("-"), running=running)  # type: ignore[arg-type]


def test_every_message_crosses_the_pipe_unchanged():
    messages = [
        JOB,
        Stop(),
        PhaseStarted(-1, "prepare"),
        OriginalPrepared(3, "ab12", {"runner": "onnxruntime"}),
        ModelSkipped("no inputs"),
        StepFinished(1, MISMATCH),
        StepDivergence(1, WHERE),
        StepDivergence(0, None),
        JobDone(4, 1),
        InternalFailure("pass:a: KeyError: 'y'"),
        OptimizerLoadFailed("cannot import x"),
    ]
    for message in messages:
        assert pickle.loads(pickle.dumps(message)) == message


def test_a_jobs_messages_become_its_result():
    with WorkerPool(WorkerConfig()) as pool:
        slot = _busy_slot()
        stream: list[WorkerMessage] = [
            PhaseStarted(-1, "prepare"),
            OriginalPrepared(3, "ab12", {"runner": "reference"}),
            PhaseStarted(0, "optimize"),
            PhaseStarted(0, "run"),
            StepFinished(0, SAME),
            PhaseStarted(1, "optimize"),
            PhaseStarted(1, "run"),
            StepFinished(1, MISMATCH),
            PhaseStarted(1, "divergence"),
            StepDivergence(1, WHERE),
        ]
        assert [pool._handle(slot, message) for message in stream] == [None] * len(stream)
        result = pool._handle(slot, JobDone(runtime_runs=4, cache_hits=1))
    assert slot.running is None and result is not None
    assert (result.status, result.nodes, result.sha256) == ("ok", 3, "ab12")
    assert result.info == {"runner": "reference"}
    assert result.outcomes == {"pass:a": SAME, "pass:b": MISMATCH}
    assert result.divergences == {"pass:b": WHERE}
    assert (result.optimizer_runs, result.runtime_runs, result.cache_hits) == (3, 4, 1)


def test_a_skip_or_a_bug_of_ours_ends_the_job_and_an_unloadable_optimizer_stops_the_sweep():
    with WorkerPool(WorkerConfig()) as pool:
        skipped = pool._handle(_busy_slot(), ModelSkipped("no inputs"))
        ours = pool._handle(_busy_slot(), InternalFailure("pass:a: KeyError: 'y'"))
        idle = _Slot(process=None, conn=None, stderr_path=Path("-"))  # type: ignore[arg-type]
        with pytest.raises(OptimizerLoadError, match="cannot import x"):
            pool._handle(idle, OptimizerLoadFailed("cannot import x"))
    assert skipped is not None
    assert (skipped.status, skipped.reason, skipped.nodes, skipped.sha256) == ("skipped", "no inputs", 0, "")
    # recorded against the model, the sweep goes on; the run exits 70 once the report is written
    assert ours is not None and (ours.status, ours.reason) == ("internal-error", "pass:a: KeyError: 'y'")
