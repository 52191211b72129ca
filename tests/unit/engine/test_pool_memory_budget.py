"""The pool's memory: --jobs × --memory-limit is the budget, each running model counted at what its
size needs; a model too large for --memory-limit gets an allowance by its size and starts only when
the running models leave room for it."""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from ditox_ci.corpus import ModelRef
from ditox_ci.engine import memory
from ditox_ci.engine.deaths import Death, failure_outcome
from ditox_ci.engine.outcome import failure_fingerprint
from ditox_ci.engine.pool import (
    ALLOWANCE_BASE_MB,
    ALLOWANCE_PER_MODEL_MB,
    DEFAULT_MEMORY_LIMIT_MB,
    LOOKAHEAD,
    OWN_IR_ALLOWANCE_PER_MODEL_MB,
    Job,
    WorkerConfig,
    WorkerPool,
    _Slot,
    _Waiting,
    allowance_per_model_mb,
)
from ditox_ci.engine.running import RunningJob

# a standard GitHub-hosted Linux runner: 4 cores, "16 GB" (16 GiB, of which /proc/meminfo's MemTotal
# shows about 15.6 after the kernel's own)
GITHUB_RUNNER_MB = 15.6 * 1024
GITHUB_RUNNER_CORES = 4


def _job(folder: Path, name: str, size_mb: int) -> Job:
    path = folder / f"{name}.onnx"
    with path.open("wb") as handle:  # sparse: its size without its disk space
        handle.truncate(size_mb * 2**20)
    return Job(ModelRef(id=name, source="t", path=str(path)), ())


def _running_on(pool: WorkerPool, jobs: list[Job]) -> None:
    for job in jobs:
        memory_mb, reserve_mb = pool.allowance_mb(job), pool._need_mb(job)
        running = RunningJob(job=job, started=0.0, remaining=(), memory_mb=memory_mb, reserve_mb=reserve_mb)
        pool._slots.append(_Slot(process=None, conn=None, state=None, stderr_path=Path("-"), running=running))  # type: ignore[arg-type]


def test_the_default_limit_times_the_default_jobs_fits_a_github_runner():
    assert DEFAULT_MEMORY_LIMIT_MB * GITHUB_RUNNER_CORES <= GITHUB_RUNNER_MB - 1024  # the parent's share


def test_a_large_model_gets_an_allowance_by_its_size_and_waits_for_room(tmp_path: Path):
    with WorkerPool(WorkerConfig(memory_limit_mb=1000), jobs=4) as pool:
        small, vgg = _job(tmp_path, "small", 10), _job(tmp_path, "vgg", 548)
        assert pool.allowance_mb(small) == 1000
        assert pool.allowance_mb(vgg) == ALLOWANCE_BASE_MB + ALLOWANCE_PER_MODEL_MB * 548
        assert pool._fits(vgg)  # alone it always starts
        _running_on(pool, [small, small])
        assert not pool._fits(vgg)  # 2 × (512 + 10 × 10) + 5992 > 4 × 1000
        assert pool._fits(small)
        pool._slots.clear()


def test_the_largest_model_runs_beside_small_ones_whose_limit_stays_the_same(tmp_path: Path):
    """Counted at the whole --memory-limit, a worker on an operator case left VGG-19 no room."""
    with WorkerPool(WorkerConfig(), jobs=2) as pool:
        case, vgg = _job(tmp_path, "case", 0), _job(tmp_path, "vgg", 548)
        assert not pool.runs_alone(vgg)
        _running_on(pool, [case])
        assert pool._fits(vgg)  # 512 + 5992 <= 2 × 3584
        assert pool.allowance_mb(case) == DEFAULT_MEMORY_LIMIT_MB  # still stopped only past the limit
        pool._slots.clear()
        _running_on(pool, [vgg])
        assert not pool._fits(_job(tmp_path, "vgg-too", 548))  # two of them do not fit
        assert pool._fits(case)
        pool._slots.clear()
    with WorkerPool(WorkerConfig(memory_limit_mb=2048), jobs=2) as small_pool:
        assert small_pool.runs_alone(vgg)  # 5992 + 512 > 2 × 2048: nothing fits beside it


def test_a_free_worker_passes_over_jobs_too_large_to_join_the_running_one(tmp_path: Path):
    """zfnet512 does not fit beside VGG-19: the next small model goes first, zfnet512 after."""
    vgg, zfnet = _job(tmp_path, "vgg", 548), _job(tmp_path, "zfnet", 330)
    cases = [_job(tmp_path, f"case{n}", 0) for n in range(3)]
    with WorkerPool(WorkerConfig(), jobs=2) as pool:
        _running_on(pool, [vgg])
        waiting: list[_Waiting] = []
        pending = iter([zfnet, *cases])
        assert pool._next_fitting(waiting, pending) is cases[0]
        assert [held.job for held in waiting] == [zfnet]
        assert pool._next_fitting(waiting, pending) is cases[1]  # the one running is still VGG-19
        pool._slots.clear()  # VGG-19 done
        assert pool._next_fitting(waiting, pending) is zfnet
        assert pool._next_fitting(waiting, pending) is cases[2]
        assert pool._next_fitting(waiting, pending) is None


def test_a_free_worker_looks_past_a_bounded_number_of_jobs(tmp_path: Path):
    vgg = _job(tmp_path, "vgg", 548)
    with WorkerPool(WorkerConfig(), jobs=2) as pool:
        _running_on(pool, [vgg])
        large = [vgg] * (LOOKAHEAD + 1)
        waiting: list[_Waiting] = []
        assert pool._next_fitting(waiting, iter([*large, _job(tmp_path, "case", 0)])) is None
        assert len(waiting) == LOOKAHEAD
        pool._slots.clear()


def test_a_waiting_job_is_passed_by_no_more_than_lookahead_others(tmp_path: Path):
    """Four workers of 1.75 GiB: VGG-19 (5.9 GiB) needs two of them free at once. Small jobs kept
    taking each worker that freed, and it started last of 204; now the pool holds back for it."""
    vgg = _job(tmp_path, "vgg", 548)
    cases = [_job(tmp_path, f"case{n}", 0) for n in range(3 + LOOKAHEAD + 1)]
    with WorkerPool(WorkerConfig(memory_limit_mb=1792), jobs=4) as pool:
        _running_on(pool, cases[:3])  # 3 × 512 + 5992 > 4 × 1792
        assert not pool.runs_alone(vgg) and not pool._fits(vgg)
        waiting: list[_Waiting] = []
        pending = iter([vgg, *cases[3:]])
        started = [pool._next_fitting(waiting, pending) for _ in range(LOOKAHEAD)]
        assert started == cases[3 : 3 + LOOKAHEAD] and waiting[0].passed == LOOKAHEAD
        assert pool._next_fitting(waiting, pending) is None  # a case could start, but VGG-19 is next
        pool._slots = pool._slots[:1]  # two of the three running cases finished
        assert pool._next_fitting(waiting, pending) is vgg
        pool._slots.clear()


def test_a_memory_blow_up_has_one_fingerprint_whether_the_poll_or_the_oom_killer_caught_it():
    """Which one gets there first depends on the machine's load; the bug is the same."""
    polled = failure_outcome("optimize", Death.OVER_LIMIT, "3700 MiB > 3584 MiB", "")
    oom_kill = "SIGKILL from the OOM killer; last seen at 3500 MiB"
    killed = failure_outcome("optimize", Death.OUT_OF_MEMORY, oom_kill, "")
    guessed = failure_outcome("optimize", Death.OUT_OF_MEMORY, "SIGKILL from most likely the OOM killer", "")
    assert polled.same_failure(killed) and killed.same_failure(guessed)
    prints = {failure_fingerprint(outcome, ("fuse_bn_into_conv",)) for outcome in (polled, killed, guessed)}
    assert len(prints) == 1
    assert polled.evidence["memory"] is True and polled.evidence["detail"] == "3700 MiB > 3584 MiB"


def test_the_optimizer_over_its_allowance_is_a_resource_limit_with_the_allowance_not_a_bug():
    """onnxslim on light/vgg19 over an allowance fitted to onnxoptimizer: a warning (never gates)
    that names the allowance and the flag that raises it; the runtime's blow-up stays a finding."""
    over = (Death.OVER_LIMIT, "5178 MiB > 4896 MiB", "")
    limited = failure_outcome("optimize", *over, allowance_mb=4896)
    assert limited.kind == "warning" and not limited.failed
    assert limited.evidence["resource_limit"] == {"allowance_mb": 4896, "raise_with": "--memory-limit"}
    running = failure_outcome("run", *over, allowance_mb=4896)
    assert running.kind == "runtime-error" and "resource_limit" not in running.evidence


def test_the_allowance_scales_with_the_optimizer_and_the_memory_limit_raises_it(tmp_path: Path):
    vgg = _job(tmp_path, "vgg", 548)
    own_ir = WorkerConfig(allowance_per_model_mb=allowance_per_model_mb("onnxslim"))
    with WorkerPool(WorkerConfig(), jobs=1) as fitted, WorkerPool(own_ir, jobs=1) as other:
        assert fitted.allowance_mb(vgg) == ALLOWANCE_BASE_MB + ALLOWANCE_PER_MODEL_MB * 548
        assert other.allowance_mb(vgg) == ALLOWANCE_BASE_MB + OWN_IR_ALLOWANCE_PER_MODEL_MB * 548 > 5178
    with WorkerPool(replace(own_ir, memory_limit_mb=9000), jobs=1) as raised:
        assert raised.allowance_mb(vgg) == 9000
    assert allowance_per_model_mb("onnxoptimizer") == ALLOWANCE_PER_MODEL_MB


def test_two_workers_the_oom_killer_killed_between_two_polls_are_both_out_of_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The cgroup's counter went up by two before the pool looked: each kill is one worker's."""
    counter = tmp_path / "memory.events"
    counter.write_text("oom 3\noom_kill 3\n")
    monkeypatch.setattr(memory, "_OOM_COUNTERS", (str(counter),))
    with WorkerPool(WorkerConfig(), jobs=2) as pool:
        counter.write_text("oom 5\noom_kill 5\n")
        causes: list[Death] = []
        monkeypatch.setattr(pool, "_replace", lambda slot, cause, detail: causes.append(cause))
        killed = SimpleNamespace(exitcode=-signal.SIGKILL)
        for name in ("a", "b"):
            running = RunningJob(job=_job(tmp_path, name, 1), started=0.0, remaining=())
            pool._watch(_Slot(process=killed, conn=None, state=None, stderr_path=Path("-"), running=running))  # type: ignore[arg-type]
    assert causes == [Death.OUT_OF_MEMORY, Death.OUT_OF_MEMORY]


def test_without_a_cgroup_counter_the_kernels_own_oom_count_tells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine with no memory cgroup mounted still counts OOM kills in /proc/vmstat: a SIGKILL
    is then called out of memory only when that count went up."""
    assert memory._OOM_COUNTERS[-1] == "/proc/vmstat"
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("nr_free_pages 1000\noom_kill 7\nnr_dirty 3\n")
    monkeypatch.setattr(memory, "_OOM_COUNTERS", (str(tmp_path / "memory.events"), str(vmstat)))
    assert memory.oom_kills() == 7
    with WorkerPool(WorkerConfig(), jobs=1) as pool:
        causes: list[Death] = []
        monkeypatch.setattr(pool, "_replace", lambda slot, cause, detail: causes.append(cause))
        killed = SimpleNamespace(exitcode=-signal.SIGKILL)
        running = RunningJob(job=_job(tmp_path, "a", 1), started=0.0, remaining=())
        pool._watch(_Slot(process=killed, conn=None, state=None, stderr_path=Path("-"), running=running))  # type: ignore[arg-type]
    assert causes == [Death.CRASHED]


def test_a_budget_from_the_machine_lets_the_largest_models_run_together(tmp_path: Path):
    """Without --memory-limit the sweep gives the pool what the machine has free: VGG-19 and
    zfnet512 side by side on 24 GB, where 2 × 3,584 MiB kept them apart."""
    vgg, zfnet = _job(tmp_path, "vgg", 548), _job(tmp_path, "zfnet", 330)
    with WorkerPool(WorkerConfig(budget_mb=20_000), jobs=2) as roomy:
        _running_on(roomy, [vgg])
        assert roomy._fits(zfnet)
        roomy._slots.clear()
    with WorkerPool(WorkerConfig(budget_mb=1000), jobs=2) as tight:  # less than 2 × the limit
        assert tight.budget_mb == 2 * DEFAULT_MEMORY_LIMIT_MB
        _running_on(tight, [vgg])
        assert not tight._fits(zfnet)
        tight._slots.clear()


def test_free_memory_is_what_the_memory_cgroup_leaves_where_it_caps_the_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    v2 = (tmp_path / "memory.max", tmp_path / "memory.current")
    v1 = (tmp_path / "memory.limit_in_bytes", tmp_path / "memory.usage_in_bytes")
    monkeypatch.setattr(memory, "CGROUP_MEMORY_FILES", (tuple(map(str, v2)), tuple(map(str, v1))))
    monkeypatch.setattr(memory, "_meminfo_mb", lambda field: 30_000.0)  # MemAvailable, fixed
    v2[0].write_text(f"{2 * 2**30}\n")
    v2[1].write_text(f"{512 * 2**20}\n")
    assert memory.available_memory_mb() == 1536  # the cgroup's 2 GiB less its 512 MiB in use
    v2[0].write_text("max\n")
    assert memory.available_memory_mb() == 30_000  # MemAvailable alone
    for path in v2:
        path.unlink()
    v1[0].write_text(f"{3 * 2**30}\n")
    v1[1].write_text(f"{1024 * 2**20}\n")
    assert memory.available_memory_mb() == 2048  # cgroup v1's limit less its usage
    v1[0].write_text("9223372036854771712\n")  # v1's "no limit"
    assert memory.available_memory_mb() == 30_000
