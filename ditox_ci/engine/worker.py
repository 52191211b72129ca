"""The worker process: loads the optimizer once, then prepares each Job's original and judges its
steps, writing each phase it enters into its WorkerState and sending its step messages in batches
(`engine.messages`). It dies with its parent, and its stdout and stderr go to a file the parent
reads a dead worker's last words from.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing.connection
import multiprocessing.forkserver
import os
import signal
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

from ditox_ci.engine import runner
from ditox_ci.engine.divergence import Divergence, first_divergence
from ditox_ci.engine.evaluate import (
    EvalSettings,
    ModelContext,
    SkipModel,
    optimizer_input,
    prepare,
    run_original,
    run_step,
)
from ditox_ci.engine.heap import keep_freed_memory, release_freed_memory
from ditox_ci.engine.messages import (
    FLUSH_EVERY_STEP_BYTES,
    FLUSH_STEPS,
    Batch,
    InternalFailure,
    Job,
    JobDone,
    ModelSkipped,
    OptimizerLoadFailed,
    OriginalPrepared,
    StepDivergence,
    StepFinished,
    StepMessage,
    StepsCarried,
    Stop,
    WorkerConfig,
    WorkerState,
)
from ditox_ci.engine.plan import Step
from ditox_ci.engine.screen import JobScreen
from ditox_ci.errors import FatalError, InternalError, OptimizerLoadError
from ditox_ci.optimizers import LoadedOptimizer, load_optimizer
from ditox_ci.report.kinds import VALUES_KIND

_Last = TypeVar("_Last")

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
CONTEXTS_KEPT = 2
# a context holds its model at least twice (parsed and as bytes): a large one is not kept past the
# jobs of its own model
CONTEXT_KEPT_MAX_BYTES = 64 * 2**20
# a worker whose own Python code (preparing, running, comparing) raised MemoryError exits with
# this code: the parent treats it like the OOM killer's SIGKILL, a memory finding, not exit 70
MEMORY_ERROR_EXIT = 86


def _divergence(
    context: ModelContext,
    optimizer: LoadedOptimizer,
    step: Step,
    settings: EvalSettings,
    rtol: float,
    atol: float,
) -> Divergence | None:
    """Where inside the graph the step's output mismatch starts; None when that cannot be found."""
    try:
        run_original(context, settings)  # a reused mismatch's original has not run: its feeds are needed
        model = optimizer_input(context, optimizer)
        optimized = optimizer.optimize(model, list(step.passes), step.fixed_point)
        return first_divergence(context.model, optimized, context.feeds, rtol=rtol, atol=atol)
    except Exception:  # optional evidence: its trouble is neither a finding nor a reason to stop
        return None


class _Outbox:
    """A job's step messages, sent together (Batch) when `flush` is called, once FLUSH_STEPS are
    held, or after each one when `every_step` (a large model's)."""

    def __init__(self, conn: multiprocessing.connection.Connection, every_step: bool) -> None:
        self._conn = conn
        self._held: list[StepMessage] = []
        self._most = 1 if every_step else FLUSH_STEPS

    def add(self, message: StepFinished | StepsCarried | StepDivergence) -> None:
        self._held.append(message)
        if len(self._held) >= self._most:
            self.flush()

    def flush(self, last: JobDone | InternalFailure | None = None) -> None:
        if last is not None:
            self._held.append(last)
        if self._held:
            self._conn.send(Batch(tuple(self._held)))
            self._held.clear()


def _prepared(job: Job, config: WorkerConfig) -> ModelContext | ModelSkipped | InternalFailure:
    """The job's original prepared, or the message that says why it is not (returned, so that the
    exception and the memory its frames held are gone before `_job_over`)."""
    try:
        return prepare(job.ref, config.settings, job.reuse)
    except SkipModel as exc:
        return ModelSkipped(str(exc))
    except MemoryError:
        os._exit(MEMORY_ERROR_EXIT)
    # a bug in ditox-ci (InternalError and FatalError are BaseExceptions): never a silent skip
    except (Exception, InternalError, FatalError) as exc:
        return InternalFailure(f"preparing the original: {type(exc).__name__}: {exc}")


def _original_message(context: ModelContext) -> OriginalPrepared:
    return OriginalPrepared(
        len(context.model.graph.node),
        context.digest,
        context.info,
        context.draw,
        context.judged_as,
        context.size,
    )


def _job_over(send: Callable[[_Last], None], last: _Last) -> None:
    """Send a job's last message once the memory the job freed is back with the system: the pool
    hands this worker its next model, and starts watching its memory, as soon as the message
    arrives (a small model's limit is not the large one's that ran before it)."""
    release_freed_memory()
    send(last)


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


def child_main(
    conn: multiprocessing.connection.Connection, state: WorkerState, config: WorkerConfig, stderr_path: str
) -> None:
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
    # a job's optimizer calls reuse the memory its earlier calls freed; its end gives it back
    # (_job_over), so that an idle worker holds the contexts it keeps and at most
    # heap.KEPT_FREE_MAX_BYTES free
    keep_freed_memory()
    jobs = _Jobs(conn, state, config, optimizer)
    while True:
        job: Job | Stop = conn.recv()
        if isinstance(job, Stop):
            return
        jobs.run(job)


class _Jobs:
    """What a worker keeps from job to job (the prepared originals, the passes it suspects), and
    one job's run (`run`): its locals, the job's screen among them, are gone when it returns, so a
    context dropped from `contexts` is freed at once, before its memory goes back."""

    def __init__(
        self,
        conn: multiprocessing.connection.Connection,
        state: WorkerState,
        config: WorkerConfig,
        optimizer: LoadedOptimizer,
    ) -> None:
        self.conn, self.state, self.config, self.optimizer = conn, state, config, optimizer
        self.contexts: OrderedDict[tuple[str, str], ModelContext] = OrderedDict()
        # passes whose own step changed (or failed on) a model this worker screened (JobScreen)
        self.suspects: set[str] = set()

    def _context(self, job: Job) -> ModelContext | ModelSkipped | InternalFailure:
        """The job's original: kept from an earlier job of its model, else prepared now."""
        kept = None if job.fresh else self.contexts.get((job.ref.id, job.ref.path))
        if kept is not None:
            return kept
        # the next model gets the worker's memory (its allowance) to itself
        stale = [key for key, context in self.contexts.items() if len(context.data) > CONTEXT_KEPT_MAX_BYTES]
        for key in stale:
            del self.contexts[key]
        if stale:
            release_freed_memory()  # what they held, before this model's memory is watched
        return _prepared(job, self.config)

    def run(self, job: Job) -> None:
        runs_before = runner.runs_so_far()
        context = self._context(job)
        if not isinstance(context, ModelContext):
            _job_over(self.conn.send, context)
            return
        key = (job.ref.id, job.ref.path)
        self.contexts[key] = context
        self.contexts.move_to_end(key)
        while len(self.contexts) > CONTEXTS_KEPT:
            self.contexts.popitem(last=False)
        hits_before, ran_before, optimizer_before = context.cache_hits, context.ran, context.optimizer_s
        config, optimizer = self.config, self.optimizer
        extra = job.ref.comparator
        comparators = config.comparators + ((extra,) if extra and extra not in config.comparators else ())
        self.conn.send(_original_message(context))
        outbox = _Outbox(self.conn, every_step=len(context.data) >= FLUSH_EVERY_STEP_BYTES)
        # a re-run that asks whether a failure reproduces runs each step on its own
        min_mb = config.screen_min_mb if job.screen and not job.fresh else None
        screen = JobScreen(context, optimizer, job.steps, min_mb, self.suspects, job.control, job.reuse)
        failure: InternalFailure | None = None
        order = screen.order()
        for position, index in enumerate(order):
            step = job.steps[index]

            def on_phase(phase: str, index: int = index) -> None:
                self.state.enter(index, phase)

            try:
                carried = screen.newly_carried(order[position:])
                if carried:
                    outbox.add(StepsCarried(carried))
                if screen.is_carried(index):
                    continue
                cleared = screen.cleared_outcome(index, lambda: on_phase("screen"))
                if cleared is not None:
                    outbox.add(StepFinished(index, cleared, screened=True))
                    continue
                outcome = run_step(context, optimizer, step, comparators, config.settings, on_phase)
                screen.ran(index, outcome)
                if outcome.kind is not None and context.draw is None:
                    # a finding: pinpointing draws its feeds again as they were (a reused one's draw
                    # is the stored one), and its evidence reads what running the original told
                    run_original(context, config.settings)
            except SkipModel as exc:  # the original, first run here, cannot be (engine/reuse.py)
                _job_over(self.conn.send, ModelSkipped(str(exc)))
                return
            except MemoryError:
                os._exit(MEMORY_ERROR_EXIT)
            # a bug in ditox-ci or its configuration, never the optimizer's
            except (Exception, InternalError, FatalError) as exc:
                failure = InternalFailure(f"{step.label}: {type(exc).__name__}: {exc}")
                break
            outbox.add(StepFinished(index, outcome))
            if job.divergence is not None and outcome.kind == VALUES_KIND:
                # the mismatch reaches the pool before the search that may die
                outbox.flush()
                on_phase("divergence")
                found = _divergence(context, optimizer, step, config.settings, *job.divergence)
                outbox.add(StepDivergence(index, found))
                outbox.flush()
        if context.ran and not ran_before:  # what running the original told, for the report
            self.conn.send(_original_message(context))
        runs, hits = runner.runs_so_far() - runs_before, context.cache_hits - hits_before
        done = JobDone(runs, hits, context.optimizer_s - optimizer_before)
        _job_over(outbox.flush, failure or done)
