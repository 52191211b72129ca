"""An optimizer the kernel's OOM killer kills is a resource limit (a warning), not a crash; one
killed otherwise stays a crash; a MemoryError in the worker's own comparison is a memory finding
too, not exit 70. The kernel's counter is a file here, moved by the planted optimizer as the
kernel would move it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.engine import memory
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import Job, WorkerConfig, WorkerPool
from tests.helpers import FAKES

FAKE = FAKES / "memory_killed.py"
STEP = Step("pass:eliminate_identity", ("eliminate_identity",))


def _ref(folder: Path, name: str, counter: Path) -> ModelRef:
    weight = onnx.numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Add", ["i", "w"], ["y"])],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    helper.set_model_props(model, {"oom_counter": str(counter)})
    path = folder / f"{name}.onnx"
    onnx.save(model, str(path))
    return ModelRef(id=path.name, source="test", path=str(path))


def _outcomes(folder: Path, counter: Path, *names: str) -> dict[str, Outcome]:
    """Each model's outcome of STEP, run one after the other on one worker."""
    jobs = [Job(_ref(folder, name, counter), (STEP,)) for name in names]
    with WorkerPool(WorkerConfig(optimizer=f"{FAKE}:optimize", timeout_s=60), jobs=1) as pool:
        return {result.ref.id: result.outcomes[STEP.label] for result in pool.run(jobs)}


def test_an_oom_kill_is_a_memory_finding_and_another_sigkill_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "memory.oom_control"
    counter.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    monkeypatch.setattr(memory, "_OOM_COUNTERS", (str(counter),))
    results = _outcomes(tmp_path, counter, "oom_model", "killed_model")

    oom = results["oom_model.onnx"]
    assert oom.kind == "warning" and oom.evidence["memory"] is True  # a resource limit, not a bug
    assert oom.evidence["resource_limit"]["allowance_mb"] == WorkerConfig().memory_limit_mb
    assert oom.message == "optimizer ran out of memory"
    assert oom.evidence["detail"].startswith("SIGKILL from the OOM killer")
    killed = results["killed_model.onnx"]
    assert killed.kind == "optimizer-crash" and "memory" not in killed.evidence
    assert killed.message == "optimizer crashed (SIGKILL)"


def test_a_memory_error_while_comparing_is_a_memory_finding_and_the_sweep_goes_on(tmp_path: Path) -> None:
    counter = tmp_path / "memory.oom_control"
    counter.write_text("oom_kill 0\n")
    results = _outcomes(tmp_path, counter, "starved_model", "plain_model")

    starved = results["starved_model.onnx"]
    assert starved.kind == "runtime-error" and starved.evidence["memory"] is True
    assert starved.message == "ONNX Runtime on the optimized model ran out of memory"
    assert starved.evidence["detail"].startswith("MemoryError")
    # the next model runs on a fresh worker, without the planted fault
    assert results["plain_model.onnx"].kind is None
