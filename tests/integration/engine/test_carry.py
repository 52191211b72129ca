"""Carried steps through the real pool, onnxoptimizer and ONNX Runtime (engine/reuse.py): the worker
says which steps it carries in one message and the pool rebuilds their outcomes, the same as a run
that calls them; a worker that dies in a later step keeps what was carried."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ditox_ci.control import NOP
from ditox_ci.corpus import CorpusContext, ModelRef, resolve_sources
from ditox_ci.engine.findings import effect_of, verdicts_of
from ditox_ci.engine.plan import Step, build_steps
from ditox_ci.engine.pool import Job, JobResult, WorkerConfig, WorkerPool
from ditox_ci.engine.reuse import Reuse, reuse_table
from ditox_ci.optimizers import load_optimizer

INFO = load_optimizer("onnxoptimizer").info
# eliminate_shape_op reads past the dims of this case's input and segfaults (onnxoptimizer 0.4.2)
SEGFAULTS = "onnx-node:test_shape_start_greater_than_end"
CRASHING = Step("passes:eliminate_shape_op", ("eliminate_shape_op",))
# every single pass but the one that segfaults, which runs last as a pass list of its own
STEPS = (
    *(step for step in build_steps((NOP, "single"), (), INFO) if step.passes != CRASHING.passes),
    CRASHING,
)


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> ModelRef:
    (found,) = resolve_sources([SEGFAULTS], CorpusContext(tmp_path_factory.mktemp("carry") / "cache"))
    return found


def _run(job: Job) -> JobResult:
    with WorkerPool(WorkerConfig(timeout_s=60), jobs=1) as pool:
        (result,) = pool.run([job])
    return result


def _stored(result: JobResult) -> Reuse:
    """What a later sweep reads of `result` from its report, every config but the crashing one
    carried."""
    labels = [step.label for step in STEPS if step != CRASHING]
    return reuse_table([(result.ref.id, "", verdicts_of(result), labels, effect_of(result))])[result.ref.id]


def test_carried_steps_are_rebuilt_by_the_pool_and_survive_a_crash_after_them(ref: ModelRef) -> None:
    called = _run(Job(ref, STEPS))
    reuse = _stored(called)
    carried = _run(Job(ref, STEPS, reuse=reuse))

    def seen(result: JobResult) -> dict:
        return {label: (o.kind, o.digest, o.changed, o.size) for label, o in result.outcomes.items()}

    # the same verdicts, results and sizes, though only the control and the crashing step were called
    assert seen(carried) == seen(called)
    assert called.outcomes[CRASHING.label].kind == carried.outcomes[CRASHING.label].kind == "optimizer-crash"
    assert carried.counts.carried == len(STEPS) - 2
    # the control, the crash, and the control again: its message, held with the carried steps' until
    # the batch was sent, died with the worker, and the fresh worker carried them again
    assert (carried.counts.optimizer_runs, carried.counts.restarts) == (3, 1)
    # results that were the control's bytes, and results of their own: both kinds were carried
    control = called.outcomes[NOP].digest
    own = [label for label, o in called.outcomes.items() if o.changed and o.digest not in ("", control)]
    assert own and any(o.digest == control for label, o in called.outcomes.items() if label != NOP)
    assert all(carried.outcomes[label].reused for label in own)
    # the stored control's bytes are not this build's: nothing is carried, every step is called
    moved = _run(Job(ref, STEPS, reuse=replace(reuse, control="0" * 64)))
    # (the calls of the steps a crash found unreported included)
    assert moved.counts.carried == 0 and moved.counts.optimizer_runs == called.counts.optimizer_runs
    assert seen(moved) == seen(called)
