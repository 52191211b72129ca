"""SIGTERM / SIGINT in the middle of a sweep: a partial report, exit 128 + signal, nothing left behind."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from tests.helpers import FAKES

FAKE = FAKES / "stuck_optimizer.py"


def _chain(name: str, length: int) -> onnx.ModelProto:
    """Longer chains look costlier to the planner, which starts the costliest models first."""
    names = ["x", *(f"t{i}" for i in range(length - 1)), "y"]
    nodes = [helper.make_node("Relu", [a], [b]) for a, b in itertools.pairwise(names)]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has exited; only its parent's wait is missing


def _start_stuck_sweep(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, Path, Path]:
    """A sweep whose two workers are both stuck in the optimizer, every quick model they started
    done (the planner runs a quick model first and cheap stuck ones between the others)."""
    models = tmp_path / "models"
    models.mkdir()
    for index in range(3):
        onnx.save(_chain(f"quick{index}", 40), models / f"quick{index}.onnx")
    for index in range(3):
        onnx.save(_chain(f"stuck{index}", 1), models / f"stuck{index}.onnx")
    pids, temp, out = tmp_path / "pids", tmp_path / "tmp", tmp_path / "out"
    pids.mkdir()
    temp.mkdir()
    env = {**os.environ, "DITOX_TEST_PIDS": str(pids), "TMPDIR": str(temp)}
    command = [sys.executable, "-m", "ditox_ci", "sweep", "--models", str(models), "--configs", "nop"]
    command += ["--optimizer", f"{FAKE}:optimize", "--jobs", "2", "--timeout", "600"]
    command += ["--localize", "off", "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]
    sweep = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(list(pids.glob("*-stuck*"))) < 2:
        assert sweep.poll() is None and time.monotonic() < deadline, sweep.communicate()[1]
        time.sleep(0.1)
    return sweep, pids, temp, out


def _still_running(pids: Path) -> list[int]:
    """The workers and their forkserver (from the markers the optimizer left) that have not exited."""
    processes = {int(part) for marker in pids.iterdir() for part in marker.name.split("-")[:2]}
    time.sleep(1.0)  # the kernel delivers the parent-death signal asynchronously
    return [pid for pid in processes if _alive(pid)]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_sweep_writes_a_partial_report_and_leaves_nothing_behind(tmp_path: Path, signum: int):
    sweep, pids, temp, out = _start_stuck_sweep(tmp_path)
    sent = time.monotonic()
    sweep.send_signal(signum)
    _, stderr = sweep.communicate(timeout=30)
    stopped_s = time.monotonic() - sent

    assert sweep.returncode == 128 + signum, stderr
    assert stopped_s < 10
    report = json.loads((out / "report.json").read_text())
    assert report["stats"]["interrupted"] is True
    assert report["stats"]["interrupted_by"] == signal.Signals(signum).name
    assert report["stats"]["models_planned"] == 6
    # a worker takes its next model only once the parent holds the last one's result, so with both
    # workers stuck every quick model that was started is finished: the report holds those
    started = sorted(f"{marker.name.split('-', 2)[2]}.onnx" for marker in pids.glob("*-quick*"))
    assert started
    assert sorted(m["id"] for m in report["models"]) == started
    assert "interrupted" in (out / "summary.md").read_text()
    assert _still_running(pids) == []
    # importing onnxruntime writes a `.ses` file into the temp folder, a run that completes as well
    assert sorted(path.name for path in temp.iterdir() if path.name != ".ses") == []


def test_workers_die_with_a_sweep_killed_outright(tmp_path: Path):
    """SIGKILL gives the sweep no chance to stop its workers: they must not outlive it."""
    sweep, pids, _, _ = _start_stuck_sweep(tmp_path)
    sweep.kill()
    sweep.communicate(timeout=30)
    assert _still_running(pids) == []


def test_a_signal_while_the_report_is_assembled_leaves_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every model done, the workers stopping, the report being put together: a SIGTERM now is only
    noted (the work is complete), never an Interrupted that loses the report."""
    from ditox_ci.__main__ import main_inner
    from ditox_ci.sweep import run as sweep_module

    models = tmp_path / "models"
    models.mkdir()
    onnx.save(_chain("quick", 3), models / "quick.onnx")
    assemble = sweep_module.coverage_of

    def signalled_then_assemble(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return assemble(*args, **kwargs)

    monkeypatch.setattr(sweep_module, "coverage_of", signalled_then_assemble)
    out = tmp_path / "out"
    argv = ["sweep", "--models", str(models), "--configs", "nop", "--jobs", "1", "--localize", "off"]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--quiet"]
    assert main_inner(argv, {}) == 0
    report = json.loads((out / "report.json").read_text())
    assert [m["id"] for m in report["models"]] == ["quick.onnx"]
    assert "interrupted" not in report["stats"]


def test_an_interrupted_stream_of_models_claims_no_plan(tmp_path: Path) -> None:
    """`ditox-ci fuzz` makes models as workers free up: an interrupted one planned none ("1 of 0")."""
    from ditox_ci.errors import Interrupted
    from ditox_ci.log import Log
    from ditox_ci.sweep.plan import ModelStream
    from ditox_ci.sweep.run import run_sweep
    from ditox_ci.sweep.setup import SweepOptions, sweep_setup

    onnx.save(_chain("quick", 3), tmp_path / "quick.onnx")

    def made() -> Iterator[ModelRef]:
        yield ModelRef("quick.onnx", "fuzz", str(tmp_path / "quick.onnx"))
        raise Interrupted(signal.SIGTERM)

    options = SweepOptions(configs=("nop",), jobs=1, localize="off", out=str(tmp_path / "out"))
    log = Log({}, quiet=True)
    with sweep_setup(options, log) as setup:
        report = run_sweep(setup, log, stream=ModelStream(made()))
    assert report.stats.interrupted and report.stats.models_planned is None
