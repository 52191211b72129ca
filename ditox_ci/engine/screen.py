"""Screening: a large model's single-pass steps cleared by one optimizer call over many passes.

onnxoptimizer's call costs seconds on a large model whatever its passes do: it parses, converts
and serializes the weights each time (light/vgg19, 548 MB: 3.3 s for no pass at all). And most
single passes change nothing on a given model (44 of 47 on light/bvlc_alexnet). For an optimizer
whose pass list runs each pass once, in the order given, on what the passes before it left
(`OptimizerInfo.sequential_passes`), one call over a list of passes whose result has the nop
control's bytes clears every pass of the list: the first pass saw the original and changed nothing,
so the second saw the original too, and so on. Each such pass gets the control's own outcome, the
verdict its single call would have got. A list whose result differs is halved and each half
screened again; the passes no list clears run on their own, as their steps. A pass whose own step
changed an earlier screened model on the same worker (`rename_input_output`, `split_init` …) runs
on its own at once.

What this cannot see: a pass whose change a later pass of the same list undoes to the byte (both
would be cleared), and a pass whose result differs from run to run. The passes that remove what
others leave (`eliminate_*`: dead nodes, unused initializers, identities) therefore run first in
every list, where they see the original: after a pass that leaves an unused initializer behind (a
`warning` of its own step) they would have removed it. A list whose call raises is halved like one
that differs; a call that crashes, hangs or runs out of memory kills the worker, and the parent
(`WorkerPool`) resumes the model at its first step not yet reported, with every pass on its own,
where the failure is the pass's own step's finding.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from ditox_ci.control import NOP
from ditox_ci.engine.evaluate import ModelContext, optimizer_call, result_digest
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.reuse import Reuse, carried_steps
from ditox_ci.optimizers import LoadedOptimizer
from ditox_ci.report.header import OptimizerInfo

# the passes that clean up after others run first in a screened list (see above)
CLEANUP_PREFIX = "eliminate_"
# Models smaller than this run every single pass on its own: their calls cost little. Above it, the
# optimizer's conversions of the weights are what a call costs (about 0.6 s per 100 MB).
SCREEN_MIN_MB = 64.0


def screened_size(size_bytes: int, min_mb: float | None) -> bool:
    """Whether a model of `size_bytes` is large enough to screen (`min_mb` None: screening off)."""
    return min_mb is not None and size_bytes >= min_mb * 2**20


def screenable(steps: Sequence[Step]) -> list[int]:
    """The indexes of `steps` a screen may clear: single-pass steps (one pass, not fixed-point),
    those of cleanup passes first, each group in the steps' order."""
    single = [i for i, step in enumerate(steps) if step.single_pass is not None and not step.fixed_point]
    return sorted(single, key=lambda i: not steps[i].passes[0].startswith(CLEANUP_PREFIX))


def screens(info: OptimizerInfo, steps: Sequence[Step]) -> bool:
    """Whether a large model's job over `steps` is screened with this optimizer."""
    return info.sequential_passes and len(screenable(steps)) >= 2


def screened_from(info: OptimizerInfo, steps: Sequence[Step], min_mb: float | None) -> float | None:
    """The size in MiB from which a sweep over `steps` screens a model (the workers' `min_mb`),
    None when it screens none: what the planner costs a model at (shard.estimate_cost)."""
    return min_mb if screens(info, steps) else None


def screen(
    steps: Sequence[Step],
    candidates: Sequence[int],
    clears: Callable[[tuple[str, ...]], bool],
    suspects: Collection[str] = (),
) -> set[int]:
    """The indexes among `candidates` that one call of `clears` cleared: `clears(passes)` runs the
    passes, in order, in one call and says whether the result is the control's.

    `suspects` (passes whose own step changed, or failed on, an earlier screened model) are not
    screened: they run on their own, and the rest of the list has a better chance of clearing in one
    call."""
    cleared: set[int] = set()

    def visit(group: list[int], differs: bool = False) -> None:
        # a single step's own call is its step: screening it alone would only repeat it
        if len(group) < 2:
            return
        if not differs and clears(tuple(name for i in group for name in steps[i].passes)):
            cleared.update(group)
            return
        half = (len(group) + 1) // 2
        left, right = group[:half], group[half:]
        before = len(cleared)
        visit(left)
        # the left half cleared: it changed nothing, so the right half alone made the difference
        visit(right, differs=len(cleared) - before == len(left))

    visit([i for i in candidates if steps[i].passes[0] not in suspects])
    return cleared


class JobScreen:
    """One job's screen in a worker: cleared steps get the control's outcome instead of a call.

    It screens when the job reaches its first single-pass step, once the control step (`nop`, run
    first, or on the worker before when the job resumed) gave the result every cleared pass must
    give. `suspects` is the worker's: passes whose own step changed (or failed on) an earlier
    screened model, kept out of later lists.

    A step a stored report lets the job carry (engine/reuse.py: `Reuse.carried`) is not called: once
    the control's result is known, the pool is told which steps are carried, and it is kept out of
    the lists to screen. With canaries (`Reuse.canary_control`), the steps the job calls anyway run
    first (`order`), and one that gives its stored result makes the stored control this job's. A
    composed config (`Reuse.composed`) is carried once the single-pass steps it awaits have run."""

    def __init__(
        self,
        context: ModelContext,
        optimizer: LoadedOptimizer,
        steps: Sequence[Step],
        min_mb: float | None,
        suspects: set[str],
        control: Outcome | None = None,
        reuse: Reuse | None = None,
    ) -> None:
        self.context, self.optimizer, self.steps, self.suspects = context, optimizer, steps, suspects
        able = screens(optimizer.info, steps) and optimizer.optimize_bytes is not None
        self.candidates = screenable(steps) if able and screened_size(len(context.data), min_mb) else []
        # the control's outcome: from an earlier worker when the job resumed without its step
        self.control = control
        self.cleared: set[int] | None = None
        self.reuse = reuse
        self.carried: frozenset[int] = frozenset()
        # every carried step found: the control is known, and no composed config awaits a step
        self.settled = False
        # each step called so far: its result's digest ("" when it gave none)
        self.results: dict[str, str] = {}

    def order(self) -> list[int]:
        """The indexes of the steps in the order they run: as planned, unless the control may be
        carried once a canary holds (`Reuse.canary_control`); then the steps the stored report does
        not carry run first (those a composed config awaits before all), the control next (a canary
        held: it is carried), the others last."""
        indexes = list(range(len(self.steps)))
        reuse = self.reuse
        if reuse is None:
            return indexes
        awaited = [i for i in indexes if self.steps[i].label in reuse.awaited]
        if self.control is not None or not reuse.canaries or NOP not in reuse.carry:
            return awaited + [i for i in indexes if i not in awaited]
        control = [i for i in indexes if self.steps[i].label == NOP]
        called = [i for i in indexes if self.steps[i].label not in reuse.carry and i not in awaited]
        first = awaited + called + control
        return first + [i for i in indexes if i not in first]

    def newly_carried(self, pending: Sequence[int]) -> tuple[int, ...]:
        """The indexes among `pending` (the steps not run yet) newly carried: when the control's
        result is first known, and again once the steps a composed config awaits have run (the worker
        sends each batch in one message, and the pool rebuilds their outcomes); () otherwise."""
        control, reuse, context = self.control_digest, self.reuse, self.context
        if self.settled or not control or reuse is None:
            return ()
        left = [i for i in pending if i not in self.carried]
        labels = [self.steps[i].label for i in left]
        found = carried_steps(reuse, labels, context.judged_as, control, context.digest, self.results)
        carried = tuple(sorted(left[i] for i in found))
        self.settled = reuse.awaited.isdisjoint(labels)
        self.carried |= frozenset(carried)
        self.candidates = [i for i in self.candidates if i not in self.carried]
        return carried

    def is_carried(self, index: int) -> bool:
        return index in self.carried

    def cleared_outcome(self, index: int, on_call: Callable[[], None]) -> Outcome | None:
        """The control's outcome when the step at `index` is cleared (screening on the first
        candidate reached); None when the step must run."""
        if self.cleared is None and index in self.candidates and self.control_digest:
            self.cleared = screen(self.steps, self.candidates, self._clears(on_call), self.suspects)
        return self.control if self.cleared and index in self.cleared else None

    def ran(self, index: int, outcome: Outcome) -> None:
        """A step ran on its own: the control's outcome, or a candidate that changed the model."""
        step = self.steps[index]
        self.results[step.label] = outcome.digest
        if step.label == NOP:
            self.control = outcome
        elif self.control is None and self.reuse is not None and self.reuse.canaries:
            context = self.context
            self.control = self.reuse.canary_control(
                self.results, context.judged_as, context.digest, context.size
            )
        elif self.cleared is not None and index in self.candidates and outcome.digest != self.control_digest:
            self.suspects.add(step.passes[0])

    @property
    def control_digest(self) -> str:
        """The control's result; "" when it gave none (it raised or crashed): nothing is screened."""
        return self.control.digest if self.control is not None else ""

    def _clears(self, on_call: Callable[[], None]) -> Callable[[tuple[str, ...]], bool]:
        optimize = self.optimizer.optimize_bytes
        assert optimize is not None

        def clears(passes: tuple[str, ...]) -> bool:
            on_call()
            try:
                data = optimizer_call(self.context, lambda: optimize(self.context.data, passes, False))
            except MemoryError:
                raise  # the worker's own exit for memory: the parent resumes with each pass alone
            except Exception:  # a pass of the list raised: its own step says which, and what
                return False
            # a result of another length than the control's is another model: no hash needed
            size = self.context.result_sizes.get(self.control_digest)
            if size is not None and len(data) != size:
                return False
            return result_digest(self.context, bytes(data)) == self.control_digest

        return clears
