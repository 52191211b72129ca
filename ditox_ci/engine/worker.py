"""Dangerous work runs here: a pool of worker processes that the parent outlives.

The optimizer and ONNX Runtime are native code that can segfault, abort, hang or eat memory. Each
worker takes one model at a time (a Job: the model and its steps), prepares the original once and
streams back a message per phase and per step. When a worker dies, times out or exceeds its memory
limit, the parent knows which step and phase it was in, turns that into a finding of the right kind
with the signal and the worker's last stderr lines, starts a fresh worker, and resumes the model at
the next step. Nothing else is lost.

Every message over the pipe is a frozen dataclass of this module. The parent sends a Job, or Stop.
A worker answers each Job with:
  PhaseStarted(-1, "prepare"), then OriginalPrepared(nodes, sha256, info) or ModelSkipped(reason);
  per step i: PhaseStarted(i, "optimize"), PhaseStarted(i, "run") when the optimized model is run,
    StepFinished(i, Outcome); when the Job asks for divergence and the step ended in an output
    mismatch, PhaseStarted(i, "divergence") and StepDivergence(i, Divergence | None): the first node
    whose output differs (localize_nodes), found with the optimizer run again in the worker;
  JobDone(runtime_runs, cache_hits), or InternalFailure(message) for a bug in ditox-ci, which the
  parent records as the model's `internal-error` status (never a skip): the sweep goes on, and the
  run exits 70 once the report is written.
A worker that cannot load the optimizer sends OptimizerLoadFailed(message) instead. Divergence is
optional evidence: a worker that dies, hangs or exceeds its memory limit in the "divergence" phase
is replaced and the model resumes at the next step, the mismatch found but without its divergence.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import re
import signal
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ditox_ci.corpus import ModelRef
from ditox_ci.engine import runner
from ditox_ci.engine.divergence import Divergence, first_divergence
from ditox_ci.engine.evaluate import (
    RUNNER_TITLES,
    EvalSettings,
    ModelContext,
    SkipModel,
    optimizer_input,
    prepare,
    run_step,
)
from ditox_ci.engine.original import Draw
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.errors import FatalError, InternalError, OptimizerLoadError
from ditox_ci.optimizers import LoadedOptimizer, load_optimizer
from ditox_ci.report.model import INTERNAL_ERROR

POLL_S = 0.2
# 4 workers × 3.5 GiB fit a standard GitHub-hosted runner (4 cores, 16 GB) beside the parent
DEFAULT_MEMORY_LIMIT_MB = 3584
# A worker holds a model several times over (the parsed original and its bytes, the optimizer's
# copies, the optimized model, a runtime session): VGG-19's 548 MB peak at 3.9 GiB. A model gets
# this allowance when it is larger than --memory-limit, and the pool starts it only when the
# allowances of what runs beside it still fit in --jobs × --memory-limit.
ALLOWANCE_BASE_MB = 512
ALLOWANCE_PER_MODEL_MB = 8
# An optimizer that converts the model into an IR of its own holds one more copy: onnxscript peaked
# at 8.5 × vgg19's size (5,178 MiB), over the 8 × fitted to onnxoptimizer. Any optimizer but
# onnxoptimizer gets this much per MiB of model (see docs/optimizers.md).
OWN_IR_ALLOWANCE_PER_MODEL_MB = 12
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
CONTEXTS_KEPT = 2
# a context holds its model at least twice (parsed and as bytes): a large one is not kept past the
# jobs of its own model
CONTEXT_KEPT_MAX_BYTES = 64 * 2**20
STDERR_TAIL = 1500
# the causes of a worker's death that are the model's appetite for memory, not a crash
MEMORY_CAUSES = ("exceeded the memory limit", "ran out of memory")
# a worker whose own Python code (preparing, running, comparing) raised MemoryError exits with
# this code: the parent treats it like the OOM killer's SIGKILL, a memory finding, not exit 70
MEMORY_ERROR_EXIT = 86


@dataclass(frozen=True)
class WorkerConfig:
    optimizer: str = "onnxoptimizer"
    optimizer_path: str | None = None
    settings: EvalSettings = field(default_factory=EvalSettings)
    comparators: tuple[str, ...] = ("tensor",)
    timeout_s: float = 60.0
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB
    # MiB of allowance per MiB of model file, by optimizer (see allowance_mb)
    allowance_per_model_mb: int = ALLOWANCE_PER_MODEL_MB


def allowance_per_model_mb(optimizer_name: str) -> int:
    """How much memory a worker needs per MiB of model for this optimizer's copies of it."""
    return ALLOWANCE_PER_MODEL_MB if optimizer_name == "onnxoptimizer" else OWN_IR_ALLOWANCE_PER_MODEL_MB


@dataclass(frozen=True)
class Job:
    ref: ModelRef
    steps: tuple[Step, ...]
    # (rtol, atol): also find where inside the graph each step's output mismatch starts
    divergence: tuple[float, float] | None = None
    # prepare the original again and judge every step anew, even when the worker holds the model:
    # a re-run that asks whether a failure reproduces must not be answered from its cache
    fresh: bool = False


@dataclass(frozen=True)
class JobResult:
    ref: ModelRef
    status: str
    reason: str = ""
    nodes: int = 0
    sha256: str = ""
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    # by step label, for the steps of a Job that asked for divergence and got one
    divergences: dict[str, Divergence] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    # how the original's feeds were drawn, for pinpointing to draw them again (None: not prepared)
    draw: Draw | None = None
    wall_s: float = 0.0
    optimizer_runs: int = 0
    runtime_runs: int = 0
    cache_hits: int = 0
    restarts: int = 0


# ---------------------------------------------------------------- messages


@dataclass(frozen=True)
class Stop:
    """Parent to worker: no more jobs; exit."""


@dataclass(frozen=True)
class PhaseStarted:
    step_index: int  # into the Job's steps; -1 while the original is prepared
    phase: str  # "prepare", "optimize", "run" or "divergence"


@dataclass(frozen=True)
class OriginalPrepared:
    nodes: int
    sha256: str
    info: dict[str, Any]
    draw: Draw | None = None


@dataclass(frozen=True)
class ModelSkipped:
    reason: str


@dataclass(frozen=True)
class StepFinished:
    step_index: int
    outcome: Outcome


@dataclass(frozen=True)
class StepDivergence:
    step_index: int
    divergence: Divergence | None


@dataclass(frozen=True)
class JobDone:
    # this Job's alone: a context kept from an earlier Job of the same model carries that one's too
    runtime_runs: int
    cache_hits: int


@dataclass(frozen=True)
class InternalFailure:
    message: str


@dataclass(frozen=True)
class OptimizerLoadFailed:
    message: str


WorkerMessage = (
    PhaseStarted
    | OriginalPrepared
    | ModelSkipped
    | StepFinished
    | StepDivergence
    | JobDone
    | InternalFailure
    | OptimizerLoadFailed
)


# ---------------------------------------------------------------- child side


def _divergence(
    context: ModelContext, optimizer: LoadedOptimizer, step: Step, rtol: float, atol: float
) -> Divergence | None:
    """Where inside the graph the step's output mismatch starts; None when that cannot be found."""
    try:
        model = optimizer_input(context, optimizer)
        optimized = optimizer.optimize(model, list(step.passes), step.fixed_point)
        return first_divergence(context.model, optimized, context.feeds, rtol=rtol, atol=atol)
    except Exception:  # optional evidence: its trouble is neither a finding nor a reason to stop
        return None


def _die_with_parent() -> None:
    """Have the kernel kill this worker when its parent dies, even by SIGKILL (Linux prctl
    PR_SET_PDEATHSIG). The parent is the forkserver, which exits once the sweep has died and no
    process holds the write end of its "alive" pipe: every forked child inherits one, which would
    keep the forkserver, and so its workers, alive forever after a SIGKILLed sweep. A worker starts
    no processes of its own, so it lets go of it."""
    alive_fd = getattr(multiprocessing.forkserver._forkserver, "_forkserver_alive_fd", None)
    if isinstance(alive_fd, int):
        with contextlib.suppress(OSError):
            os.close(alive_fd)
        multiprocessing.forkserver._forkserver._forkserver_alive_fd = None  # type: ignore[attr-defined]
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(1)
    # Ctrl-C reaches the whole process group; the sweep decides what stops and kills its workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _child_main(conn: multiprocessing.connection.Connection, config: WorkerConfig, stderr_path: str) -> None:
    _die_with_parent()
    descriptor = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(descriptor, 2)
    # the optimizer's own prints too: a build under test must not write workflow commands
    # (`::add-mask::`, `::stop-commands::`) into the job's log; its words reach it only as evidence
    os.dup2(descriptor, 1)
    try:
        optimizer = load_optimizer(config.optimizer, config.optimizer_path)
    except OptimizerLoadError as exc:
        conn.send(OptimizerLoadFailed(str(exc)))
        return
    contexts: OrderedDict[tuple[str, str], ModelContext] = OrderedDict()
    while True:
        job: Job | Stop = conn.recv()
        if isinstance(job, Stop):
            return
        conn.send(PhaseStarted(-1, "prepare"))
        runs_before = runner.runs_so_far()
        key = (job.ref.id, job.ref.path)
        context = None if job.fresh else contexts.get(key)
        if context is None:
            # the next model gets the worker's memory (its allowance) to itself
            for stale in [k for k, kept in contexts.items() if len(kept.data) > CONTEXT_KEPT_MAX_BYTES]:
                del contexts[stale]
            try:
                context = prepare(job.ref, config.settings)
            except SkipModel as exc:
                conn.send(ModelSkipped(str(exc)))
                continue
            except MemoryError:
                os._exit(MEMORY_ERROR_EXIT)
            # a bug in ditox-ci (InternalError and FatalError are BaseExceptions): never a silent skip
            except (Exception, InternalError, FatalError) as exc:
                conn.send(InternalFailure(f"preparing the original: {type(exc).__name__}: {exc}"))
                continue
        contexts[key] = context
        contexts.move_to_end(key)
        while len(contexts) > CONTEXTS_KEPT:
            contexts.popitem(last=False)
        hits_before = context.cache_hits
        extra = job.ref.comparator
        comparators = config.comparators + ((extra,) if extra and extra not in config.comparators else ())
        conn.send(OriginalPrepared(len(context.model.graph.node), context.digest, context.info, context.draw))
        for index, step in enumerate(job.steps):

            def on_phase(phase: str, index: int = index) -> None:
                conn.send(PhaseStarted(index, phase))

            try:
                outcome = run_step(context, optimizer, step, comparators, config.settings, on_phase)
            except MemoryError:
                os._exit(MEMORY_ERROR_EXIT)
            # a bug in ditox-ci or its configuration, never the optimizer's
            except (Exception, InternalError, FatalError) as exc:
                conn.send(InternalFailure(f"{step.label}: {type(exc).__name__}: {exc}"))
                break
            conn.send(StepFinished(index, outcome))
            if job.divergence is not None and outcome.kind == "output-mismatch":
                conn.send(PhaseStarted(index, "divergence"))
                conn.send(StepDivergence(index, _divergence(context, optimizer, step, *job.divergence)))
        else:
            conn.send(JobDone(runner.runs_so_far() - runs_before, context.cache_hits - hits_before))


# ---------------------------------------------------------------- parent side


@dataclass
class _Running:
    """Book-keeping for the model a slot is working on, across worker restarts."""

    job: Job
    started: float
    remaining: tuple[Step, ...]
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    divergences: dict[str, Divergence] = field(default_factory=dict)
    original: OriginalPrepared | None = None
    phase: str = "prepare"
    step_index: int = -1
    phase_started: float = 0.0
    optimizer_runs: int = 0
    runtime_runs: int = 0
    cache_hits: int = 0
    restarts: int = 0
    memory_mb: int = DEFAULT_MEMORY_LIMIT_MB  # what the worker may use for this model
    # where this model's part of the worker's stderr file begins: the tail kept as evidence is
    # this model's alone, not what earlier models on the same worker printed
    stderr_from: int = 0


@dataclass
class _Slot:
    process: Any
    conn: multiprocessing.connection.Connection
    stderr_path: Path
    running: _Running | None = None
    rss_mb: float = 0.0  # as last seen
    # the models whose prepared originals this worker keeps (as _child_main keeps them), latest last
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


def _failure_outcome(
    phase: str,
    cause: str,
    detail: str,
    stderr: str,
    runner_name: str = "onnxruntime",
    allowance_mb: int = DEFAULT_MEMORY_LIMIT_MB,
) -> Outcome:
    in_optimizer = phase == "optimize"
    if in_optimizer and cause in MEMORY_CAUSES:
        return _resource_limit(detail, stderr, allowance_mb)
    if cause == "timed out":
        kind = "optimizer-timeout" if in_optimizer else "runtime-error"
    else:
        kind = "optimizer-crash" if in_optimizer else "runtime-error"
    runner_title = RUNNER_TITLES.get(runner_name, runner_name)
    where = "optimizer" if in_optimizer else f"{runner_title} on the optimized model"
    if cause in MEMORY_CAUSES:
        # one message whichever caught it (the poll or the kernel, a race the machine's load
        # decides; its words are in evidence.detail), so the same blow-up keeps one fingerprint
        message = f"{where} ran out of memory"
    else:
        message = f"{where} {cause} ({detail})" if detail else f"{where} {cause}"
    evidence: dict[str, Any] = {"message": message, "phase": phase}
    if cause in MEMORY_CAUSES:
        evidence["memory"] = True
    if detail:
        evidence["signal" if cause == "crashed" else "detail"] = detail
    if stderr:
        evidence["stderr"] = stderr
    return Outcome(kind, message, evidence)


def _resource_limit(detail: str, stderr: str, allowance_mb: int) -> Outcome:
    """The optimizer needed more memory than the worker's allowance: a limit of this run, reported
    (a warning, which does not gate) with the allowance it had and how to raise it, not a new bug.
    onnxslim sweeps light/vgg19 fine without the limit that was fitted to onnxoptimizer."""
    message = "optimizer ran out of memory"
    evidence: dict[str, Any] = {
        "message": message,
        "phase": "optimize",
        "memory": True,
        "resource_limit": {"allowance_mb": allowance_mb, "raise_with": "--memory-limit"},
        "detail": detail,
    }
    if stderr:
        evidence["stderr"] = stderr
    return Outcome("warning", message, evidence)


# where the kernel counts OOM kills: cgroup v2's memory.events, v1's memory.oom_control (the
# container's own cgroup is mounted at the root of the hierarchy), else the whole kernel's count
# (/proc/vmstat, Linux 4.13+), which a kill elsewhere on the host can raise at the same moment
_OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control", "/proc/vmstat")


def _oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed (in this cgroup where it says; else
    on this kernel); None where unknown."""
    for counter in _OOM_COUNTERS:
        try:
            lines = Path(counter).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, count = line.partition(" ")
            if name == "oom_kill" and count.strip().isdigit():
                return int(count)
    return None


def _signal_name(exitcode: int | None) -> str:
    if exitcode is None:
        return "killed"
    if exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def _mp_context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["ditox_ci.engine.worker"])
        return context
    return multiprocessing.get_context("spawn")


def warm_up() -> None:
    """Start the forkserver now: its imports (onnx, ONNX Runtime, numpy; about a second) then run
    beside the sweep's planning and unpacking instead of after them, in every shard job."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        _mp_context()
        multiprocessing.forkserver.ensure_running()


class WorkerPool:
    """`run(jobs)` yields one JobResult per job, in completion order, whatever the workers do."""

    def __init__(self, config: WorkerConfig, jobs: int = 1):
        self.config = config
        self.size = max(1, jobs)
        self._context = _mp_context()
        self._tmp = tempfile.TemporaryDirectory(prefix="ditox-workers-")
        self._slots: list[_Slot] = []
        self._spawned = 0
        self._oom_kills = _oom_kills() or 0

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
        process = self._context.Process(  # type: ignore[attr-defined]
            target=_child_main, args=(child_conn, self.config, str(stderr_path)), daemon=True
        )
        process.start()
        child_conn.close()
        return _Slot(process=process, conn=parent_conn, stderr_path=stderr_path)

    def _restart(self, slot: _Slot) -> str:
        """Kill the slot's worker (if still alive) and start a fresh one; returns its stderr tail."""
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join()
        stderr = self._stderr_tail(slot)
        slot.conn.close()
        fresh = self._spawn()
        slot.process, slot.conn, slot.stderr_path, slot.running, slot.holds = (
            fresh.process,
            fresh.conn,
            fresh.stderr_path,
            None,
            [],
        )
        return stderr

    def _send(self, slot: _Slot, running: _Running) -> None:
        if slot.process.exitcode is not None:
            self._restart(slot)
        running.phase, running.step_index = "prepare", -1
        running.phase_started = time.monotonic()
        running.stderr_from = _file_size(slot.stderr_path)
        slot.running = running
        slot.conn.send(replace(running.job, steps=running.remaining))
        key = (running.job.ref.id, running.job.ref.path)
        slot.holds = [*(held for held in slot.holds if held != key), key][-CONTEXTS_KEPT:]

    def _stderr_tail(self, slot: _Slot) -> str:
        start = slot.running.stderr_from if slot.running else 0
        try:
            data = slot.stderr_path.read_bytes()[start:][-STDERR_TAIL:]
        except OSError:
            return ""
        return _TIMESTAMPS.sub("", _COLOURS.sub("", data.decode(errors="replace"))).strip()

    def _finish(self, running: _Running, status: str, reason: str = "") -> JobResult:
        original = running.original or OriginalPrepared(nodes=0, sha256="", info={})
        return JobResult(
            ref=running.job.ref,
            status=status,
            reason=reason,
            nodes=original.nodes,
            sha256=original.sha256,
            outcomes=running.outcomes,
            divergences=running.divergences,
            info=dict(original.info),
            draw=original.draw,
            wall_s=time.monotonic() - running.started,
            optimizer_runs=running.optimizer_runs,
            runtime_runs=running.runtime_runs,
            cache_hits=running.cache_hits,
            restarts=running.restarts,
        )

    def _handle(self, slot: _Slot, message: WorkerMessage) -> JobResult | None:
        running = slot.running
        if isinstance(message, OptimizerLoadFailed):
            raise OptimizerLoadError(message.message)
        assert running is not None, f"message {type(message).__name__} from an idle worker"
        match message:
            case PhaseStarted(step_index=index, phase=phase):
                running.step_index, running.phase = index, phase
                running.phase_started = time.monotonic()
                if phase in ("optimize", "divergence"):
                    running.optimizer_runs += 1
            case OriginalPrepared():
                running.original = message
            case StepFinished(step_index=index, outcome=outcome):
                running.outcomes[running.remaining[index].label] = outcome
            case StepDivergence(step_index=index, divergence=divergence):
                if divergence is not None:
                    running.divergences[running.remaining[index].label] = divergence
            case ModelSkipped(reason=reason):
                slot.running = None
                return self._finish(running, "skipped", reason)
            case InternalFailure(message=text):
                # recorded against the model, which gates (exit 70 at the end): a gate must not turn
                # green because ditox-ci's own oracle code failed on a model, nor lose the report
                slot.running = None
                return self._finish(running, INTERNAL_ERROR, text)
            case JobDone(runtime_runs=runs, cache_hits=hits):
                running.runtime_runs += runs
                running.cache_hits += hits
                slot.running = None
                return self._finish(running, "ok")
        return None

    def _failure(self, running: _Running, cause: str, detail: str, stderr: str) -> JobResult | None:
        """Turn a dead/stuck worker into an outcome for the step it was on; resume or finish."""
        if running.step_index < 0 or running.original is None:
            reason = f"the original model {cause} while being loaded, fed and run ({detail})"
            if stderr.strip():
                reason += f"; its last words: {stderr.strip().splitlines()[-1][:300]}"
            return self._finish(running, "skipped", reason)
        # in the divergence phase the step's outcome already came back: it stands, without divergence
        if running.phase != "divergence":
            step = running.remaining[running.step_index]
            runner_name = str(running.original.info.get("runner", "onnxruntime"))
            running.outcomes[step.label] = _failure_outcome(
                running.phase, cause, detail, stderr, runner_name, running.memory_mb
            )
        running.remaining = running.remaining[running.step_index + 1 :]
        running.restarts += 1
        if not running.remaining:
            return self._finish(running, "ok")
        return None

    def _replace(self, slot: _Slot, cause: str, detail: str) -> JobResult | None:
        running = slot.running
        stderr = self._restart(slot)
        if running is None:
            return None
        result = self._failure(running, cause, detail, stderr)
        if result is None and running.remaining and running.original is not None:
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
                oom_kills = _oom_kills()
                if oom_kills is None or oom_kills > self._oom_kills:
                    # one kill each: two workers killed between two polls are both memory
                    if oom_kills is not None:
                        self._oom_kills += 1
                    killer = "the OOM killer" if oom_kills is not None else "most likely the OOM killer"
                    detail = f"SIGKILL from {killer}; last seen at {slot.rss_mb:.0f} MiB"
                    return self._replace(slot, "ran out of memory", detail)
            if slot.process.exitcode == MEMORY_ERROR_EXIT:
                detail = f"MemoryError; last seen at {slot.rss_mb:.0f} MiB"
                return self._replace(slot, "ran out of memory", detail)
            return self._replace(slot, "crashed", _signal_name(slot.process.exitcode))
        elapsed = time.monotonic() - running.phase_started
        if elapsed > self.config.timeout_s:
            return self._replace(slot, "timed out", f"after {self.config.timeout_s:g}s")
        rss = slot.rss_mb = _rss_mb(slot.process.pid)
        if rss > running.memory_mb:
            detail = f"{rss:.0f} MiB > {running.memory_mb} MiB"
            return self._replace(slot, "exceeded the memory limit", detail)
        return None

    def allowance_mb(self, job: Job) -> int:
        """The memory `job`'s worker may use: --memory-limit, or more for a model so large that
        its copies in the worker need more (ALLOWANCE_PER_MODEL_MB, more for an optimizer with an
        IR of its own)."""
        try:
            size_mb = os.path.getsize(job.ref.path) / 2**20
        except OSError:
            size_mb = 0.0
        needed = ALLOWANCE_BASE_MB + self.config.allowance_per_model_mb * size_mb
        return max(self.config.memory_limit_mb, int(needed))

    def runs_alone(self, job: Job) -> bool:
        """Whether `job` needs so much memory that no other job can run beside it (`_fits`)."""
        limit = self.config.memory_limit_mb
        return self.size > 1 and self.allowance_mb(job) + limit > self.size * limit

    def _fits(self, memory_mb: int) -> bool:
        """Whether a job with this allowance may start now: the allowances of the running jobs and
        its own stay within the pool's budget (--jobs × --memory-limit), or nothing else runs."""
        running = [slot.running.memory_mb for slot in self._slots if slot.running is not None]
        return not running or sum(running) + memory_mb <= self.size * self.config.memory_limit_mb

    def _free_slot(self, job: Job) -> _Slot | None:
        """An idle worker, the one that holds `job`'s model prepared if it is idle: a localization
        probe or a model's next part on another worker prepared the original all over again."""
        idle = [slot for slot in self._slots if slot.running is None]
        key = (job.ref.id, job.ref.path)
        return next((slot for slot in idle if key in slot.holds), idle[0] if idle else None)

    def run(self, jobs: Iterable[Job]) -> Iterator[JobResult]:
        """Results as they finish. `jobs` is drawn from only when a worker is free, so it may be
        a generator that makes each job on demand (fuzzing) and decides when to stop. A job whose
        model needs more memory than is left waits for the running ones (see allowance_mb)."""
        pending = iter(jobs)
        job = next(pending, None)
        while True:
            while job is not None:
                memory_mb = self.allowance_mb(job)
                slot = self._free_slot(job)
                if slot is None and len(self._slots) < self.size:
                    slot = self._spawn()
                    self._slots.append(slot)
                if slot is None or not self._fits(memory_mb):
                    break
                started = time.monotonic()
                self._send(slot, _Running(job=job, started=started, remaining=job.steps, memory_mb=memory_mb))
                job = next(pending, None)
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
