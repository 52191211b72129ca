"""Screening with the real onnxoptimizer and ONNX Runtime: every step of a model gets the verdict
it gets when each pass runs on its own, in fewer optimizer calls, and a pass that segfaults inside
a screened list is still its own step's crash (engine/screen.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.corpus import CorpusContext, ModelRef, resolve_sources
from ditox_ci.engine.plan import DEFAULT_CONFIGS, Step, build_steps
from ditox_ci.engine.pool import Job, JobResult, WorkerConfig, WorkerPool
from ditox_ci.optimizers import load_optimizer

INFO = load_optimizer("onnxoptimizer").info
STEPS = build_steps(DEFAULT_CONFIGS, (), INFO)
# eliminate_shape_op reads past the dims of this case's input and segfaults (onnxoptimizer 0.4.2)
SEGFAULTS = "onnx-node:test_shape_start_greater_than_end"


def _rewritable(folder: Path) -> ModelRef:
    """A model many single passes rewrite: an Identity, a Transpose pair that cancels, a Dropout
    and an initializer nothing reads."""
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Transpose", ["i"], ["t1"], perm=[1, 0]),
        helper.make_node("Transpose", ["t1"], ["t2"], perm=[1, 0]),
        helper.make_node("Add", ["t2", "w"], ["a"]),
        helper.make_node("Dropout", ["a"], ["d"]),
        helper.make_node("Tanh", ["d"], ["y"]),
    ]
    weight = onnx.numpy_helper.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "w")
    unused = onnx.numpy_helper.from_array(np.ones(4, dtype=np.float32), "unused")
    graph = helper.make_graph(
        nodes,
        "rewritable",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [weight, unused],
    )
    path = folder / "rewritable.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return ModelRef(id=path.name, source="test", path=str(path))


def _sweep(refs: list[ModelRef], screen_min_mb: float | None, steps: tuple = STEPS) -> list[JobResult]:
    config = WorkerConfig(screen_min_mb=screen_min_mb, timeout_s=60)
    with WorkerPool(config, jobs=1) as pool:
        return sorted(pool.run([Job(ref, steps) for ref in refs]), key=lambda result: result.ref.id)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[ModelRef]:
    folder = tmp_path_factory.mktemp("screen")
    cases = ["onnx-node:test_transpose_default", "onnx-node:test_dropout_default", SEGFAULTS]
    return [_rewritable(folder), *resolve_sources(cases, CorpusContext(folder / "cache"))]


def test_screened_steps_get_the_verdicts_of_passes_run_each_on_its_own(models: list[ModelRef]) -> None:
    alone = _sweep(models, screen_min_mb=None)
    screened = _sweep(models, screen_min_mb=0)

    for one, other in zip(alone, screened, strict=True):
        assert other.status == one.status == "ok"
        assert set(other.outcomes) == {step.label for step in STEPS}
        for label, outcome in one.outcomes.items():
            got = other.outcomes[label]
            assert (got.kind, got.digest) == (outcome.kind, outcome.digest), (one.ref.id, label)
            if outcome.kind != "optimizer-crash":  # a crash's evidence holds its worker's stderr
                assert got == outcome, (one.ref.id, label)
        assert one.counts.screened == 0
        if one.ref.id != SEGFAULTS:  # its screen died: each of its passes then ran on its own
            assert other.counts.screened > 0
            assert other.counts.optimizer_runs < one.counts.optimizer_runs
    rewritable = next(result for result in screened if result.ref.id == "rewritable.onnx")
    control = rewritable.outcomes["nop"].digest
    changed = {label for label, outcome in rewritable.outcomes.items() if outcome.digest != control}
    assert {"pass:eliminate_identity", "pass:fuse_consecutive_transposes"} <= changed
    assert "pass:eliminate_unused_initializer" in changed
    # every step it changed ran on its own; the steps screened are among those it left as the control did
    assert rewritable.counts.screened <= len(STEPS) - len(changed) - 1


def test_a_pass_that_segfaults_in_a_screened_list_is_its_own_steps_crash(models: list[ModelRef]) -> None:
    (ref,) = [ref for ref in models if ref.id == SEGFAULTS]
    # the control and the single passes: the default list holds the pass too, and would crash first
    steps = build_steps(("nop", "single"), (), INFO)
    (alone,) = _sweep([ref], screen_min_mb=None, steps=steps)
    (screened,) = _sweep([ref], screen_min_mb=0, steps=steps)

    crash = screened.outcomes["pass:eliminate_shape_op"]
    assert crash == alone.outcomes["pass:eliminate_shape_op"]
    assert crash.kind == "optimizer-crash"
    assert crash.evidence["signal"] == "SIGSEGV"
    crashed = [label for label, outcome in screened.outcomes.items() if outcome.kind == "optimizer-crash"]
    assert crashed == ["pass:eliminate_shape_op"]
    assert screened.outcomes == alone.outcomes
    # the worker died once more: screening (the list held the pass), then in the pass's own step
    assert (alone.counts.restarts, screened.counts.restarts) == (1, 2)


def test_steps_cleared_before_a_crash_in_a_later_step_are_counted(models: list[ModelRef]) -> None:
    (ref,) = [ref for ref in models if ref.id == SEGFAULTS]
    # every single pass but the one that segfaults, then that one as an explicit pass list
    crashing = ("eliminate_shape_op",)
    singles = [step for step in build_steps(("nop", "single"), (), INFO) if step.passes != crashing]
    steps = (*singles, Step("passes:eliminate_shape_op", crashing))
    (alone,) = _sweep([ref], screen_min_mb=None, steps=steps)
    (screened,) = _sweep([ref], screen_min_mb=0, steps=steps)

    assert screened.outcomes == alone.outcomes
    assert screened.outcomes["passes:eliminate_shape_op"].kind == "optimizer-crash"
    assert alone.counts.restarts == screened.counts.restarts == 1
    # the worker died before it could say the job was done: the parent counted each cleared step
    control = screened.outcomes["nop"]
    same_as_control = sum(1 for outcome in screened.outcomes.values() if outcome == control)
    assert 0 < screened.counts.screened <= same_as_control - 1


def test_a_fresh_job_and_a_small_model_run_every_pass_on_its_own(models: list[ModelRef]) -> None:
    ref = models[0]
    config = WorkerConfig(screen_min_mb=0, timeout_s=60)
    with WorkerPool(config, jobs=1) as pool:
        (fresh,) = pool.run([Job(ref, STEPS, fresh=True)])
    (small,) = _sweep([ref], screen_min_mb=1)  # the model is a few hundred bytes

    assert fresh.counts.screened == small.counts.screened == 0
    assert fresh.counts.optimizer_runs == small.counts.optimizer_runs == len(STEPS)
