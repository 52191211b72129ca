"""Jobs that need the whole pool's memory run after the others: first, VGG-19 held the default
sweep at 0 models done for minutes (every other worker waits beside it wherever it comes)."""

from __future__ import annotations

from pathlib import Path

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import Job, WorkerConfig, WorkerPool
from ditox_ci.report.header import OptimizerInfo
from ditox_ci.sweep.plan import SweepPlan, alone_last

STEPS = (Step("nop", ("nop",)),)
INFO = OptimizerInfo(name="fake", version="0", passes=("nop",), default_passes=())


def _job(folder: Path, name: str, megabytes: int) -> Job:
    path = folder / f"{name}.onnx"
    path.write_bytes(b"\0" * (megabytes << 20))
    return Job(ModelRef(id=name, source="test", path=str(path)), STEPS)


def test_a_job_no_other_can_run_beside_goes_last_and_the_rest_keep_their_order(tmp_path: Path) -> None:
    # two workers of 600 MiB: a 40 MiB model's allowance (512 + 8 × 40) leaves no room for even the
    # smallest other model (512)
    jobs = [_job(tmp_path, "large", 40), _job(tmp_path, "a", 0), _job(tmp_path, "b", 1)]
    plan = SweepPlan(INFO, STEPS, jobs, {job.ref.id: 1 for job in jobs})
    with WorkerPool(WorkerConfig(memory_limit_mb=600), jobs=2) as pool:
        assert [job.ref.id for job in alone_last(plan, pool).jobs] == ["a", "b", "large"]
    with WorkerPool(WorkerConfig(memory_limit_mb=600), jobs=1) as alone:
        assert [job.ref.id for job in alone_last(plan, alone).jobs] == ["large", "a", "b"]
