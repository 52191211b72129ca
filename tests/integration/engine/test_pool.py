"""The worker pool with real ONNX Runtime and planted faulty optimizers (tests/fakes): node-level
divergence is a request it serves (one optimizer flips an Add, one also segfaults while its
mismatch is being localized), and a crash keeps the crashing model's own stderr as evidence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import Job, WorkerConfig, WorkerPool
from tests.helpers import FAKES

FAULTY = FAKES / "faulty_optimizers.py"
FLIPPED = Step("pass:eliminate_identity", ("eliminate_identity",))
UNCHANGED = Step("pass:eliminate_deadend", ("eliminate_deadend",))
TOLERANCES = (1e-3, 1e-4)


def _ref(folder: Path, name: str) -> ModelRef:
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Add", ["i", "w"], ["a"]),
        helper.make_node("Tanh", ["a"], ["y"]),
    ]
    weight = onnx.numpy_helper.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "w")
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [weight],
    )
    path = folder / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return ModelRef(id=path.name, source="test", path=str(path))


def _pool() -> WorkerPool:
    return WorkerPool(WorkerConfig(optimizer=f"{FAULTY}:optimize", timeout_s=30), jobs=1)


def test_a_mismatch_gets_its_divergence_only_when_the_job_asks(tmp_path: Path) -> None:
    wrong = _ref(tmp_path, "wrong")
    with _pool() as pool:
        asked, plain = pool.run(
            [Job(wrong, (FLIPPED, UNCHANGED), divergence=TOLERANCES), Job(wrong, (FLIPPED,))]
        )

    assert asked.outcomes[FLIPPED.label].kind == "output-mismatch"
    assert list(asked.divergences) == [FLIPPED.label]
    divergence = asked.divergences[FLIPPED.label]
    assert divergence.tensor == "a"
    assert divergence.producer.startswith("Add")
    # the pass removed the Identity feeding it, so that is rewritten too
    assert [label.split()[0] for label in divergence.rewritten] == ["Add", "Identity"]
    assert asked.counts.restarts == 0
    assert plain.outcomes[FLIPPED.label].kind == "output-mismatch"
    assert plain.divergences == {}


def test_a_worker_crash_while_localizing_keeps_the_finding_and_the_pool_going(tmp_path: Path) -> None:
    crashing, wrong = _ref(tmp_path, "wrong_then_segv"), _ref(tmp_path, "wrong")
    with _pool() as pool:
        first, second = pool.run(
            [
                Job(crashing, (FLIPPED, UNCHANGED), divergence=TOLERANCES),
                Job(wrong, (FLIPPED,), divergence=TOLERANCES),
            ]
        )

    # the mismatch stands, not replaced by a crash finding, and the model resumed at the next step
    assert first.status == "ok"
    assert first.outcomes[FLIPPED.label].kind == "output-mismatch"
    assert first.outcomes[UNCHANGED.label].kind is None
    assert first.divergences == {}
    assert first.counts.restarts == 1
    # the replacement worker serves the next request
    assert second.divergences[FLIPPED.label].tensor == "a"
    assert second.counts.restarts == 0


def test_a_crash_keeps_only_its_own_models_stderr_without_timestamps(tmp_path: Path) -> None:
    noisy, crashing = _ref(tmp_path, "noisy"), _ref(tmp_path, "segv")
    # one worker: the noisy model's lines are in the same stderr file before the crash
    with _pool() as pool:
        quiet, crashed = pool.run([Job(noisy, (FLIPPED,)), Job(crashing, (FLIPPED,))])

    assert quiet.outcomes[FLIPPED.label].kind is None
    outcome = crashed.outcomes[FLIPPED.label]
    assert outcome.kind == "optimizer-crash"
    assert outcome.evidence["stderr"].splitlines()[0] == "[E:fake] segv is about to crash"
    assert "noise from noisy" not in outcome.evidence["stderr"]


def test_an_optimizer_that_kills_its_workers_parent_costs_its_own_model_only(tmp_path: Path) -> None:
    """The forkserver every worker is forked from died with the worker (killed by the optimizer, or
    by the OOM killer): the next worker's start read a closed pipe, EOFError, exit 70, no report.
    The pool starts its next worker through a new forkserver and goes on."""
    orphan, fine = _ref(tmp_path, "orphan"), _ref(tmp_path, "fine")
    with _pool() as pool:
        crashed, judged = pool.run([Job(orphan, (UNCHANGED,)), Job(fine, (FLIPPED, UNCHANGED))])

    assert crashed.outcomes[UNCHANGED.label].kind == "optimizer-crash"
    assert judged.status == "ok" and set(judged.outcomes) == {FLIPPED.label, UNCHANGED.label}


def test_a_models_next_job_goes_to_the_idle_worker_that_holds_it_prepared(tmp_path: Path) -> None:
    """A localization probe sent to another worker prepared (loaded, fed and ran) the original again."""
    first, second = _ref(tmp_path, "first"), _ref(tmp_path, "second")
    with WorkerPool(WorkerConfig(optimizer=f"{FAULTY}:optimize", timeout_s=30), jobs=2) as pool:
        prepared = {
            result.ref.id: result
            for result in pool.run([Job(first, (UNCHANGED,)), Job(second, (UNCHANGED,))])
        }
        assert all(result.counts.runtime_runs > 0 for result in prepared.values())
        # both workers idle; the first in line holds `first`, the other `second`
        (again,) = pool.run([Job(second, (UNCHANGED,))])
    assert again.status == "ok" and again.counts.runtime_runs == 0 and again.counts.cache_hits == 0


def test_warming_up_starts_the_forkserver_before_any_pool_does() -> None:
    """Its imports then run beside the sweep's planning: the default sweep's first model finished
    1.75 s after start instead of 2.1 s. A fresh process, where no pool has started one yet."""
    code = (
        "import multiprocessing.forkserver as server\n"
        "from ditox_ci.engine.forkserver import warm_up\n"
        "assert server._forkserver._forkserver_pid is None\n"
        "warm_up()\n"
        "print(server._forkserver._forkserver_pid)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0
