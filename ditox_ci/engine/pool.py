"""Dangerous work runs here: a pool of worker processes that the parent outlives.

The optimizer and ONNX Runtime are native code that can segfault, abort, hang or eat memory. Each
worker takes one model at a time (a Job: the model and its steps), prepares the original once,
sends its steps' results back in batches and writes the step and phase it is in to memory it
shares with the parent. When a worker dies, times out or exceeds its memory limit, the parent reads
there which step and phase it was in, turns that into a finding of the right kind with the signal
and the worker's last stderr lines, starts a fresh worker, and resumes the model at the steps not
yet reported. Nothing else is lost.

The messages, the shared state and the Job are `engine.messages`, the worker process
`engine.worker`, a job's book-keeping across restarts `engine.running`, and what a dead worker's
step becomes `engine.deaths`; this module is the pool that drives them.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing.connection
import os
import re
import signal
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ditox_ci.control import NOP
from ditox_ci.engine.deaths import Death, signal_name
from ditox_ci.engine.forkserver import mp_context, start_worker
from ditox_ci.engine.memory import available_memory_mb, oom_kills, rss_mb, worker_count
from ditox_ci.engine.messages import (
    ALLOWANCE_BASE_MB,
    ALLOWANCE_PER_MODEL_MB,
    DEFAULT_MEMORY_LIMIT_MB,
    OWN_IR_ALLOWANCE_PER_MODEL_MB,
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
    StepMessage,
    StepsCarried,
    Stop,
    WorkerConfig,
    WorkerMessage,
    WorkerState,
    allowance_per_model_mb,
)
from ditox_ci.engine.running import RunningJob
from ditox_ci.engine.worker import CONTEXTS_KEPT, MEMORY_ERROR_EXIT, child_main
from ditox_ci.errors import OptimizerLoadError
from ditox_ci.report.kinds import ModelStatus
from ditox_ci.report.model import INTERNAL_ERROR

# what the sweep, pinpointing and triage take from here, beside the pool itself
__all__ = [
    "ALLOWANCE_BASE_MB",
    "ALLOWANCE_PER_MODEL_MB",
    "DEFAULT_MEMORY_LIMIT_MB",
    "OWN_IR_ALLOWANCE_PER_MODEL_MB",
    "Job",
    "JobCounts",
    "JobResult",
    "WorkerConfig",
    "WorkerPool",
    "allowance_per_model_mb",
    "available_memory_mb",
    "worker_count",
]

POLL_S = 0.2
# how many jobs too large to start beside the running ones a free worker looks past for one that fits
LOOKAHEAD = 16
STDERR_TAIL = 1500

# ---------------------------------------------------------------- parent side


@dataclass
class _Waiting:
    """A job drawn that was too large to start beside the running ones, and how many jobs drawn
    after it have started since (`WorkerPool._next_fitting`)."""

    job: Job
    passed: int = 0


@dataclass
class _Slot:
    process: Any
    conn: multiprocessing.connection.Connection
    state: WorkerState
    stderr_path: Path
    running: RunningJob | None = None
    rss_mb: float = 0.0  # as last seen
    rss_seen_at: float = -math.inf  # time.monotonic() of that look
    # the models whose prepared originals this worker keeps (as worker._Jobs keeps them), latest last
    holds: list[tuple[str, str]] = field(default_factory=list)


# ONNX Runtime's colours and per-line timestamps: stripped from the stderr kept as evidence, which
# is then the same on every run
_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
_TIMESTAMPS = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? ", re.MULTILINE)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class WorkerPool:
    """`run(jobs)` yields one JobResult per job, in completion order, whatever the workers do."""

    def __init__(self, config: WorkerConfig, jobs: int = 1):
        self.config = config
        self.size = max(1, jobs)
        # --jobs × --memory-limit, or what the machine has free when that is more (WorkerConfig)
        self.budget_mb = max(self.size * config.memory_limit_mb, config.budget_mb)
        self._context = mp_context()
        self._tmp = tempfile.TemporaryDirectory(prefix="ditox-workers-")
        self._slots: list[_Slot] = []
        self._spawned = 0
        self._oom_kills = oom_kills() or 0

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        # leaving on an exception (SIGTERM/SIGINT among them): the workers' work is not wanted
        self.close(wait_s=0 if exc_type is not None else 2)

    def close(self, wait_s: float = 2) -> None:
        for slot in self._slots:
            with contextlib.suppress(OSError, BrokenPipeError):
                slot.conn.send(Stop())
        for slot in self._slots:
            slot.process.join(timeout=wait_s)
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join()
        self._slots.clear()
        self._tmp.cleanup()

    def _spawn(self) -> _Slot:
        self._spawned += 1
        stderr_path = Path(self._tmp.name) / f"worker-{self._spawned}.stderr"
        parent_conn, child_conn = self._context.Pipe()
        state = WorkerState(self._context)
        process = self._context.Process(  # type: ignore[attr-defined]
            target=child_main, args=(child_conn, state, self.config, str(stderr_path)), daemon=True
        )
        start_worker(process)
        child_conn.close()
        return _Slot(process=process, conn=parent_conn, state=state, stderr_path=stderr_path)

    def _restart(self, slot: _Slot) -> str:
        """Kill the slot's worker (if still alive) and start a fresh one; returns its stderr tail."""
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join()
        stderr = self._stderr_tail(slot)
        slot.conn.close()
        fresh = self._spawn()
        # every field the fresh worker's: no job, no kept model, its memory not looked at yet
        for spec in fields(_Slot):
            setattr(slot, spec.name, getattr(fresh, spec.name))
        return stderr

    def _send(self, slot: _Slot, running: RunningJob) -> None:
        if slot.process.exitcode is not None:
            self._restart(slot)
        control = running.outcomes.get(NOP) if all(step.label != NOP for step in running.remaining) else None
        job = replace(running.job, steps=running.remaining, control=control)
        try:
            self._hand(slot, running, job)
        except OSError:  # it died idle since the look above (the OOM killer may pick an idle worker)
            self._restart(slot)
            self._hand(slot, running, job)
        key = (running.job.ref.id, running.job.ref.path)
        slot.holds = [*(held for held in slot.holds if held != key), key][-CONTEXTS_KEPT:]

    def _hand(self, slot: _Slot, running: RunningJob, job: Job) -> None:
        """`job` (running's remaining steps) to the slot's idle worker, from the start of its state."""
        slot.state.handed()
        running.phase_started, running.entered = time.monotonic(), slot.state.entered
        running.runs_from = slot.state.optimizer_runs
        running.stderr_from = _file_size(slot.stderr_path)
        slot.running = running
        slot.conn.send(job)

    def _stderr_tail(self, slot: _Slot) -> str:
        start = slot.running.stderr_from if slot.running else 0
        try:
            data = slot.stderr_path.read_bytes()[start:][-STDERR_TAIL:]
        except OSError:
            return ""
        return _TIMESTAMPS.sub("", _COLOURS.sub("", data.decode(errors="replace"))).strip()

    def _handle(self, slot: _Slot, message: WorkerMessage | StepMessage) -> JobResult | None:
        running = slot.running
        if isinstance(message, OptimizerLoadFailed):
            raise OptimizerLoadError(message.message)
        assert running is not None, f"message {type(message).__name__} from an idle worker"
        match message:
            case Batch(messages=messages):
                # a job's end (JobDone, InternalFailure) comes last in its batch
                results = [self._handle(slot, inner) for inner in messages]
                return results[-1] if results else None
            case OriginalPrepared() | StepFinished() | StepsCarried() | StepDivergence():
                running.record(message)
            case ModelSkipped(reason=reason):
                return self._ended(slot, running, ModelStatus.SKIPPED, reason)
            case InternalFailure(message=text):
                # recorded against the model, which gates (exit 70 at the end): a gate must not turn
                # green because ditox-ci's own oracle code failed on a model, nor lose the report
                return self._ended(slot, running, INTERNAL_ERROR, text)
            case JobDone(runtime_runs=runs, cache_hits=hits, optimizer_s=seconds):
                running.counts += JobCounts(runtime_runs=runs, cache_hits=hits, optimizer_s=seconds)
                return self._ended(slot, running, ModelStatus.OK)
        return None

    def _ended(self, slot: _Slot, running: RunningJob, status: ModelStatus, reason: str = "") -> JobResult:
        """The worker said the job is over: the slot is free, the job's result made."""
        slot.running = None
        running.count_runs(slot.state)
        return running.result(status, reason)

    def _replace(self, slot: _Slot, cause: Death, detail: str) -> JobResult | None:
        # stopped first, then read: what it sent stays in the pipe (its job may even have ended),
        # and its state is then the last it wrote, in step with its messages
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join()
        finished, _ = self._drain(slot)
        running, state = slot.running, slot.state
        # a phase that overran but ended just as the pool stopped the worker: the phase it is in
        # now only began, so the timeout is pinned on no step and the unreported steps run again
        moved_on = running is not None and cause is Death.TIMED_OUT and state.entered != running.entered
        stderr = self._restart(slot)
        if running is None:
            return finished[0] if finished else None
        result = running.after_death(state, None if moved_on else cause, detail, stderr)
        if result is None:  # not over: the steps without an outcome go to the fresh worker
            self._send(slot, running)
        return result

    def _drain(self, slot: _Slot) -> tuple[list[JobResult], bool]:
        results, alive = [], True
        try:
            while slot.conn.poll():
                result = self._handle(slot, slot.conn.recv())
                if result is not None:
                    results.append(result)
        except (EOFError, OSError):
            alive = False
        return results, alive

    def _watch(self, slot: _Slot) -> JobResult | None:
        running = slot.running
        if running is None:
            return None
        if slot.process.exitcode is not None:
            if slot.process.exitcode == -signal.SIGKILL:  # the parent did not send it: memory, most likely
                kills = oom_kills()
                if kills is None or kills > self._oom_kills:
                    # one kill each: two workers killed between two polls are both memory
                    if kills is not None:
                        self._oom_kills += 1
                    killer = "the OOM killer" if kills is not None else "most likely the OOM killer"
                    detail = f"SIGKILL from {killer}; last seen at {slot.rss_mb:.0f} MiB"
                    return self._replace(slot, Death.OUT_OF_MEMORY, detail)
            if slot.process.exitcode == MEMORY_ERROR_EXIT:
                detail = f"MemoryError; last seen at {slot.rss_mb:.0f} MiB"
                return self._replace(slot, Death.OUT_OF_MEMORY, detail)
            return self._replace(slot, Death.CRASHED, signal_name(slot.process.exitcode))
        entered = slot.state.entered
        if entered != running.entered:
            running.phase_started, running.entered = time.monotonic(), entered
        elapsed = time.monotonic() - running.phase_started
        if elapsed > self.config.timeout_s:
            return self._replace(slot, Death.TIMED_OUT, f"after {self.config.timeout_s:g}s")
        # a look at its memory reads /proc: not on every batch a worker sends (that was most of the
        # pool's own CPU, taken from the workers' cores) but after half a POLL_S at the soonest, so
        # that two looks are at most 1.5 POLL_S apart (a skipped look, then a wait of POLL_S)
        if time.monotonic() - slot.rss_seen_at < POLL_S / 2:
            return None
        rss = slot.rss_mb = rss_mb(slot.process.pid)
        slot.rss_seen_at = time.monotonic()
        if rss > running.memory_mb:
            detail = f"{rss:.0f} MiB > {running.memory_mb} MiB"
            return self._replace(slot, Death.OVER_LIMIT, detail)
        return None

    def _need_mb(self, job: Job) -> int:
        """What a worker holding `job`'s model is expected to use: ALLOWANCE_PER_MODEL_MB (more for
        an optimizer with an IR of its own) per MiB of its file, over the worker's own base. The pool
        counts a running job at this, not at its allowance: counted at the whole --memory-limit, a
        worker on a 1 MB operator case left VGG-19 (then 4.8 GiB) no room, and the default sweep ran it
        alone for 140 s on one core."""
        try:
            size_mb = os.path.getsize(job.ref.path) / 2**20
        except OSError:
            size_mb = 0.0
        return int(ALLOWANCE_BASE_MB + self.config.allowance_per_model_mb * size_mb)

    def allowance_mb(self, job: Job) -> int:
        """The memory `job`'s worker may use before it is stopped: --memory-limit, or more for a
        model so large that its copies in the worker need more (`_need_mb`)."""
        return max(self.config.memory_limit_mb, self._need_mb(job))

    def runs_alone(self, job: Job) -> bool:
        """Whether `job` needs so much memory that no other job, not even the smallest, can run
        beside it (`_fits`)."""
        return self.size > 1 and self._need_mb(job) + ALLOWANCE_BASE_MB > self.budget_mb

    def _fits(self, job: Job) -> bool:
        """Whether `job` may start now: what the running jobs and it need (`_need_mb`) stays within
        the pool's budget (`budget_mb`), or nothing else runs."""
        running = [slot.running.reserve_mb for slot in self._slots if slot.running is not None]
        return not running or sum(running) + self._need_mb(job) <= self.budget_mb

    def _free_slot(self, job: Job) -> _Slot | None:
        """An idle worker, the one that holds `job`'s model prepared if it is idle: a localization
        probe or a model's next part on another worker prepared the original all over again."""
        idle = [slot for slot in self._slots if slot.running is None]
        key = (job.ref.id, job.ref.path)
        return next((slot for slot in idle if key in slot.holds), idle[0] if idle else None)

    def _next_fitting(self, waiting: list[_Waiting], pending: Iterator[Job]) -> Job | None:
        """The first job in order that fits beside the running ones (`_fits`): of those drawn and
        waiting, else the next drawn, holding at most LOOKAHEAD jobs that do not fit. Without it, a
        worker idled beside VGG-19 for as long as the next job in line was too large to join it. A
        waiting job that LOOKAHEAD others went past is passed by no more: nothing starts until it
        fits, or a job that needs two free workers could wait for the whole sweep. A job is still
        drawn only when a worker is free for it."""
        for index, held in enumerate(waiting):
            if self._fits(held.job):
                del waiting[index]
                for earlier in waiting[:index]:
                    earlier.passed += 1
                return held.job
            if held.passed >= LOOKAHEAD:
                return None
        while len(waiting) < LOOKAHEAD:
            drawn = next(pending, None)
            if drawn is None:
                return None
            if self._fits(drawn):
                for held in waiting:
                    held.passed += 1
                return drawn
            waiting.append(_Waiting(drawn))
        return None

    def run(self, jobs: Iterable[Job]) -> Iterator[JobResult]:
        """Results as they finish. `jobs` is drawn from only when a worker is free, so it may be
        a generator that makes each job on demand (fuzzing) and decides when to stop. A job whose
        model needs more memory than is left waits for the running ones while later jobs that fit
        go ahead (`_next_fitting`)."""
        pending = iter(jobs)
        waiting: list[_Waiting] = []  # drawn, but too large to start beside what runs
        while True:
            while any(slot.running is None for slot in self._slots) or len(self._slots) < self.size:
                job = self._next_fitting(waiting, pending)
                if job is None:
                    break
                slot = self._free_slot(job)
                if slot is None:
                    slot = self._spawn()
                    self._slots.append(slot)
                running = RunningJob(job, time.monotonic(), job.steps, memory_mb=self.allowance_mb(job))
                running.reserve_mb = self._need_mb(job)
                self._send(slot, running)
            busy = [slot for slot in self._slots if slot.running is not None]
            if not busy:
                return
            waitables: list[Any] = [s.conn for s in busy] + [s.process.sentinel for s in busy]
            multiprocessing.connection.wait(waitables, timeout=POLL_S)
            for slot in busy:
                results, alive = self._drain(slot)
                yield from results
                if not alive and slot.running is not None and slot.process.exitcode is None:
                    slot.process.join(timeout=1)
                watched = self._watch(slot)
                if watched is not None:
                    yield watched
