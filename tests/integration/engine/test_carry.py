"""Carried steps through the real pool, onnxoptimizer and ONNX Runtime (engine/reuse.py): the worker
says which steps it carries in one message and the pool rebuilds their outcomes, the same as a run
that calls them; a worker that dies in a later step keeps what was carried; a canary that gives its
stored bytes carries the control too; a changed pass list is carried where each of its passes alone
leaves the model as the control does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.control import NOP, single_pass_label
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


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory: pytest.TempPathFactory) -> ModelRef:
    """A model the nop control gives other bytes of (its file's fields are out of protobuf's order:
    two messages, which protobuf merges) and the default list rewrites (an Identity)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Identity", ["x"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    opsets = [helper.make_opsetid("", 17)]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=opsets)
    model.ir_version = 8
    graph_only = onnx.ModelProto()
    graph_only.graph.CopyFrom(model.graph)
    model.ClearField("graph")
    path = tmp_path_factory.mktemp("canary") / "identity.onnx"
    path.write_bytes(model.SerializeToString() + graph_only.SerializeToString())
    return ModelRef("identity", "test", str(path))


def _run(job: Job) -> JobResult:
    with WorkerPool(WorkerConfig(timeout_s=60), jobs=1) as pool:
        (result,) = pool.run([job])
    return result


def _stored(result: JobResult) -> Reuse:
    """What a later sweep reads of `result` from its report, every config but the crashing one
    carried."""
    labels = [step.label for step in STEPS if step != CRASHING]
    return reuse_table([(result.ref.id, "", verdicts_of(result), labels, effect_of(result))])[result.ref.id]


def seen(result: JobResult) -> dict:
    return {label: (o.kind, o.digest, o.changed, o.size) for label, o in result.outcomes.items()}


def test_carried_steps_are_rebuilt_by_the_pool_and_survive_a_crash_after_them(ref: ModelRef) -> None:
    called = _run(Job(ref, STEPS))
    reuse = _stored(called)
    carried = _run(Job(ref, STEPS, reuse=reuse))

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


def test_a_canary_that_gives_its_stored_bytes_carries_the_control_too(rewritten: ModelRef) -> None:
    """A PR check calls the configs the PR changed anyway, first; one that gives the bytes the report
    stored for it on the same original stands for the control, which is carried with the others
    (engine/reuse.py, `Reuse.canary_control`). Where none does, the control is called, as before."""
    steps = build_steps((NOP, "default", "single"), (), INFO)
    called = _run(Job(rewritten, steps))
    labels = [step.label for step in steps]
    stored = reuse_table([(rewritten.id, "", verdicts_of(called), labels, effect_of(called))])[rewritten.id]
    changed = {"default", "pass:fuse_bn_into_conv"}
    reuse = stored.carrying(set(labels) - changed - {NOP}, changed)
    assert reuse.canaries.keys() == changed and reuse.carry[NOP] == called.outcomes[NOP].digest
    # the control is a result of its own (the round trip rewrites the file), and default rewrites
    # the model further: the control's outcome is rebuilt from the stored report
    nop, default = called.outcomes[NOP], called.outcomes["default"]
    assert nop.changed and default.changed and default.digest != nop.digest

    carried = _run(Job(rewritten, steps, reuse=reuse))
    assert seen(carried) == seen(called)
    assert (carried.counts.optimizer_runs, carried.counts.carried) == (2, len(steps) - 2)

    # this build's changed configs give other bytes than the stored ones: the control is called
    moved = replace(reuse, canaries={label: "0" * 64 for label in reuse.canaries})
    checked = _run(Job(rewritten, steps, reuse=moved))
    assert seen(checked) == seen(called)
    assert (checked.counts.optimizer_runs, checked.counts.carried) == (3, len(steps) - 3)


def _saved(model: onnx.ModelProto, folder: Path, name: str) -> ModelRef:
    path = folder / f"{name}.onnx"
    onnx.save(model, path)
    return ModelRef(name, "test", str(path))


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelRef]:
    """A model no pass of the default list acts on (Relu), and one fuse_bn_into_conv fuses (Conv →
    BatchNormalization)."""
    folder = tmp_path_factory.mktemp("composed")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])
    opsets = [helper.make_opsetid("", 17)]
    relu_graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    relu = helper.make_model(relu_graph, opset_imports=opsets)
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((3, 3, 1, 1)).astype(np.float32), "w"),
        *(numpy_helper.from_array(rng.uniform(0.5, 1.5, 3).astype(np.float32), name) for name in "sbmv"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"]),
    ]
    conv_bn = helper.make_model(helper.make_graph(nodes, "conv_bn", [x], [y], weights), opset_imports=opsets)
    return {"relu": _saved(relu, folder, "relu"), "conv_bn": _saved(conv_bn, folder, "conv_bn")}


COMPOSED_STEPS = build_steps((NOP, "default", "fixed-point", "single"), (), INFO)
CHANGED = {"default", "fixed-point", "pass:fuse_bn_into_conv"}


def _pr_check(called: JobResult, tell: Callable[[Reuse], Reuse] = lambda stored: stored) -> Reuse:
    """What a PR check that changed fuse_bn_into_conv reads of `called`'s report (`tell`: what the
    report is made to say), the default list and the fixed point named with their passes' configs."""
    labels = [step.label for step in COMPOSED_STEPS]
    stored = reuse_table([(called.ref.id, "", verdicts_of(called), labels, effect_of(called))])[called.ref.id]
    lists = {
        step.label: tuple(single_pass_label(name) for name in step.passes if name != NOP)
        for step in COMPOSED_STEPS
        if step.label in ("default", "fixed-point")
    }
    return tell(stored).carrying(set(labels) - CHANGED - {NOP}, CHANGED, lists)


def test_a_changed_pass_list_is_carried_where_each_of_its_passes_alone_leaves_the_model(
    listed: dict[str, ModelRef],
) -> None:
    """A PR changed fuse_bn_into_conv, a pass of the default list: where every pass of the list,
    alone, left the model as the control did (in the report; the changed one in this run too), the
    default list and the fixed point are carried with their stored results (engine/reuse.py,
    `Reuse.composed`). Where a pass of the list acts on the model, they are called."""
    called = _run(Job(listed["relu"], COMPOSED_STEPS))
    reuse = _pr_check(called)
    assert reuse.composed.keys() == {"default", "fixed-point"}
    assert reuse.awaited == {"pass:fuse_bn_into_conv"}
    carried = _run(Job(listed["relu"], COMPOSED_STEPS, reuse=reuse))
    assert seen(carried) == seen(called)
    # fuse_bn_into_conv alone, called first: its stored bytes carry the control, and the control's
    # bytes the lists
    assert (carried.counts.optimizer_runs, carried.counts.carried) == (1, len(COMPOSED_STEPS) - 1)

    # fuse_bn_into_conv fuses Conv → BatchNormalization in the report: the lists are called (the
    # control is carried: the changed configs give their stored bytes). lift_lexical_references
    # raises on this model (its initializers are no graph inputs): no stored result, called too
    called = _run(Job(listed["conv_bn"], COMPOSED_STEPS))
    assert called.outcomes["pass:lift_lexical_references"].kind == "optimizer-error"
    reuse = _pr_check(called)
    assert not reuse.composed
    carried = _run(Job(listed["conv_bn"], COMPOSED_STEPS, reuse=reuse))
    assert seen(carried) == seen(called)
    assert (carried.counts.optimizer_runs, carried.counts.carried) == (4, len(COMPOSED_STEPS) - 4)

    # a report in which fuse_bn_into_conv left that model alone (the PR makes it fire): the lists
    # wait for the pass's own result in this run, which is not the control's, and are called
    def left_alone(stored: Reuse) -> Reuse:
        return replace(stored, carry={**stored.carry, "pass:fuse_bn_into_conv": stored.control})

    reuse = _pr_check(called, left_alone)
    assert reuse.composed.keys() == {"default", "fixed-point"}
    checked = _run(Job(listed["conv_bn"], COMPOSED_STEPS, reuse=reuse))
    assert seen(checked) == seen(called)
    assert (checked.counts.optimizer_runs, checked.counts.carried) == (4, len(COMPOSED_STEPS) - 4)
