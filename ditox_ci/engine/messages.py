"""What crosses the pipe between the pool and its workers, the Job and JobResult around it, and
the WorkerState a worker keeps in memory it shares with the pool.

Every message over the pipe is a frozen dataclass of this module. The parent sends a Job, or Stop.
A worker answers each Job with:
  OriginalPrepared(nodes, sha256, info, draw, judged_as) or ModelSkipped(reason), at once, and
    OriginalPrepared again before the job's end when the original first ran during the job (a job
    with verdicts to reuse loads it only: `Job.reuse`); ModelSkipped then if it cannot run;
  per step i: StepFinished(i, Outcome); when the Job asks for divergence and the step ended in an
    output mismatch, StepDivergence(i, Divergence | None): the first node whose output differs
    (localize_nodes), found with the optimizer run again in the worker; for each single-pass step of
    a large model that screening cleared (`engine.screen`), StepFinished(i, the control's Outcome,
    screened=True); once the control's result is known, StepsCarried(indexes) for the steps carried
    from a stored report (`engine.reuse`), whose outcomes the parent rebuilds from the Job's
    `reuse` as the worker would have (a PR check carries nine steps in ten: a message each cost
    more than the rest of their bookkeeping);
  JobDone(runtime_runs, cache_hits, optimizer_s), or InternalFailure(message) for a bug in ditox-ci, which the
  parent records as the model's `internal-error` status (never a skip): the sweep goes on, and the
  run exits 70 once the report is written.
The step messages travel in Batches: a worker sends what it holds when the job ends, before and
after a divergence search, once it holds FLUSH_STEPS of them, and after every step of a model of
FLUSH_EVERY_STEP_BYTES or more, so a model of 50 quick steps costs the pipe five messages, not a
hundred. When a batch goes depends on the steps alone, never on the clock, so the steps a crash
makes run again, and the counters, are the same from run to run. A worker that cannot load the
optimizer sends OptimizerLoadFailed.

Which step and phase a worker is in (per step "optimize", "run", "divergence" or "screen") it
writes into its WorkerState instead of a message, with a count of its optimizer calls; the pool
sets it to "prepare" when it hands a Job over. The pool reads it when the worker dies, hangs or
exceeds its memory limit, and pins the failure on that step. Steps the worker finished but had not
reported run again on the fresh worker (their calls count again; the runtime runs of the dead
worker's part of the job are not counted). Divergence is optional evidence: a worker that fails in
the "divergence" phase is replaced and the model resumes after that step, the mismatch found but
without its divergence. A screen only saves calls: a worker that fails in the "screen" phase is
replaced and the model resumes at the first step not yet reported, every step run on its own.
"""

from __future__ import annotations

import multiprocessing.context
from dataclasses import dataclass, field, fields
from typing import Any

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.divergence import Divergence
from ditox_ci.engine.evaluate import EvalSettings
from ditox_ci.engine.original import Draw
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.reuse import OriginalInfo, Reuse, verdict_key
from ditox_ci.engine.screen import SCREEN_MIN_MB
from ditox_ci.optimizers import DEFAULT_OPTIMIZER
from ditox_ci.report.effect import Size
from ditox_ci.report.kinds import ModelStatus

# 4 workers × 3.5 GiB fit a standard GitHub-hosted runner (4 cores, 16 GB) beside the parent
DEFAULT_MEMORY_LIMIT_MB = 3584
# A worker holds a model several times over (the parsed original and its bytes, the optimizer's
# copies, the optimized model, a runtime session): VGG-19's 548 MB peaked at 3.6 GiB (one process,
# its job's steps of the default configs), and at 4.5 GiB since a job keeps the memory its calls
# free for its next calls instead of faulting it in again (engine/heap.py): 10 × leaves it ~1 GiB
# more. A model gets
# this allowance when it is larger than --memory-limit, and the pool starts it only when it and what
# runs beside it, each counted at what its model needs (`WorkerPool._need_mb`), fit in the pool's
# budget (`WorkerPool.budget_mb`).
ALLOWANCE_BASE_MB = 512
ALLOWANCE_PER_MODEL_MB = 10
# An optimizer that converts the model into an IR of its own holds one more copy: onnxscript peaked
# at 8.5 × vgg19's size (5,178 MiB) before a job kept its freed memory, over the 8 × then fitted
# to onnxoptimizer. Any optimizer but onnxoptimizer gets this much per MiB of model, raised with
# onnxoptimizer's by a quarter for the kept memory (see docs/optimizers.md).
OWN_IR_ALLOWANCE_PER_MODEL_MB = 15


@dataclass(frozen=True)
class WorkerConfig:
    optimizer: str = DEFAULT_OPTIMIZER
    optimizer_path: str | None = None
    settings: EvalSettings = field(default_factory=EvalSettings)
    comparators: tuple[str, ...] = ("tensor",)
    timeout_s: float = 60.0
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB
    # MiB of allowance per MiB of model file, by optimizer (see allowance_mb)
    allowance_per_model_mb: int = ALLOWANCE_PER_MODEL_MB
    # what the workers may reserve together when that is more than jobs × memory_limit_mb: the
    # machine's memory the sweep found free when --memory-limit was not given (0: the product alone)
    budget_mb: int = 0
    # MiB from which a model's single passes are screened (engine/screen.py); None: never
    screen_min_mb: float | None = SCREEN_MIN_MB

    @property
    def verdict_key(self) -> str:
        """What judges this pool's verdicts (`reuse.verdict_key`): a stored report with the same key
        may lend them."""
        return verdict_key(self.settings, self.comparators)


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
    # screen the single-pass steps of a large model (engine/screen.py): off once a screen died
    screen: bool = True
    # the nop control's outcome, when it ran before the job resumed on a fresh worker without it
    control: Outcome | None = None
    # verdicts judged before for this model's results (engine/reuse.py): a step whose result is one
    # of them takes it without a run, and the original runs only when a result needs it
    reuse: Reuse | None = None


@dataclass(frozen=True)
class JobCounts:
    """What a job took besides its time, added up over a model's parts and over a sweep."""

    optimizer_runs: int = 0
    runtime_runs: int = 0
    cache_hits: int = 0
    # single-pass steps cleared by a screen instead of a call of their own
    screened: int = 0
    restarts: int = 0
    # seconds in the optimizer's calls, of the jobs that ended (a dead worker's are not known)
    optimizer_s: float = 0.0
    # steps carried from a stored report (engine/reuse.py)
    carried: int = 0

    def __add__(self, other: JobCounts) -> JobCounts:
        return JobCounts(*(getattr(self, spec.name) + getattr(other, spec.name) for spec in fields(self)))


@dataclass(frozen=True)
class JobResult:
    ref: ModelRef
    status: ModelStatus
    reason: str = ""
    nodes: int = 0
    sha256: str = ""
    # the original as judged (reuse.judged_as); "" when it was not loaded
    judged_as: str = ""
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    # by step label, for the steps of a Job that asked for divergence and got one
    divergences: dict[str, Divergence] = field(default_factory=dict)
    info: OriginalInfo = field(default_factory=OriginalInfo)
    # how the original's feeds were drawn, for pinpointing to draw them again (None: not prepared)
    draw: Draw | None = None
    wall_s: float = 0.0
    counts: JobCounts = field(default_factory=JobCounts)
    # the original's size (report/effect.py); None when it was not prepared
    size: Size | None = None


# ---------------------------------------------------------------- messages


@dataclass(frozen=True)
class Stop:
    """Parent to worker: no more jobs; exit."""


@dataclass(frozen=True)
class OriginalPrepared:
    nodes: int
    sha256: str
    info: OriginalInfo
    draw: Draw | None = None
    # the original as judged (reuse.judged_as): what its reusable verdicts are filed under
    judged_as: str = ""
    # the original's size (report/effect.py), which the configs' results are told against
    size: Size | None = None


@dataclass(frozen=True)
class ModelSkipped:
    reason: str


@dataclass(frozen=True)
class StepFinished:
    step_index: int
    outcome: Outcome
    # cleared by a screen: the control's outcome, without a call of its own
    screened: bool = False


@dataclass(frozen=True)
class StepsCarried:
    """Steps carried from a stored report without a call, by index (engine/reuse.py
    `carried_steps`)."""

    step_indexes: tuple[int, ...]


@dataclass(frozen=True)
class StepDivergence:
    step_index: int
    divergence: Divergence | None


@dataclass(frozen=True)
class JobDone:
    # this Job's alone: a context kept from an earlier Job of the same model carries that one's too
    runtime_runs: int
    cache_hits: int
    optimizer_s: float = 0.0


@dataclass(frozen=True)
class InternalFailure:
    message: str


@dataclass(frozen=True)
class OptimizerLoadFailed:
    message: str


# what travels inside a Batch: JobDone or InternalFailure only last, when the job ended
StepMessage = StepFinished | StepsCarried | StepDivergence | JobDone | InternalFailure


@dataclass(frozen=True)
class Batch:
    """One pipe message for the step messages a worker held since its last one."""

    messages: tuple[StepMessage, ...]


# what a worker sends over the pipe
WorkerMessage = Batch | OriginalPrepared | ModelSkipped | OptimizerLoadFailed


# ---------------------------------------------------------------- shared state

PHASES = ("prepare", "optimize", "run", "divergence", "screen")
# the phases that call the optimizer: each entry counts one optimizer run
OPTIMIZER_PHASES = frozenset({"optimize", "divergence", "screen"})
# when a busy worker sends the step messages it holds (Batch), which is what a crash makes run
# again: every FLUSH_STEPS steps, and after every step of a model this large (its steps take
# milliseconds each or more, beside which a message is nothing)
FLUSH_STEPS = 16
FLUSH_EVERY_STEP_BYTES = 2**20
_WHERE, _ENTERED, _OPTIMIZER_RUNS = range(3)


class WorkerState:
    """Where a worker is, in memory it shares with the pool: the step (an index into the Job's
    steps, -1 while the original is prepared) and phase it last entered, in one 64-bit value
    written at once, so a worker killed at any point leaves a pair it was really in; how many phases
    it has entered (the pool times a phase from when that count last moved); and its optimizer
    calls. The pool sets it to the job's start (`handed`) before it sends a Job to the idle worker;
    else only the worker writes it, and the pool reads it: the whole of it once the worker is dead."""

    def __init__(self, context: multiprocessing.context.BaseContext) -> None:
        self._values: Any = context.RawArray("q", 3)
        self._values[_WHERE] = _where(-1, "prepare")

    def handed(self) -> None:
        """A Job is on its way: the worker is preparing its original until it says otherwise."""
        self.enter(-1, "prepare")

    def enter(self, step_index: int, phase: str) -> None:
        values = self._values
        values[_WHERE] = _where(step_index, phase)
        values[_OPTIMIZER_RUNS] += phase in OPTIMIZER_PHASES
        values[_ENTERED] += 1

    @property
    def step_index(self) -> int:
        return int(self._values[_WHERE]) // len(PHASES) - 1

    @property
    def phase(self) -> str:
        return PHASES[int(self._values[_WHERE]) % len(PHASES)]

    @property
    def entered(self) -> int:
        return int(self._values[_ENTERED])

    @property
    def optimizer_runs(self) -> int:
        return int(self._values[_OPTIMIZER_RUNS])


def _where(step_index: int, phase: str) -> int:
    """A step (from -1) and a phase as one number."""
    return (step_index + 1) * len(PHASES) + PHASES.index(phase)
