"""The reduce stage: shrink a failing model to a minimal subgraph that still shows the same finding.

A candidate is a subset of the original's top-level nodes, rebuilt as a model: tensors it consumes
but no longer produces become graph inputs fed with the values the original computed for them (all
intermediates are recorded once, by running the original with every node output exposed), its
outputs are the values the original graph output or a dropped node consumed (never values that
were dead before, so passes that need an unused output still fire), and only the initializers it
uses stay. Strategies propose candidates (each output's cone, then delta debugging over the node
list) to `NodeShrinker`, the node-set kind of the shared core in `shrink`: one is accepted only if
it is strictly smaller, not tried before, checker-valid and still failing, until nothing smaller
fails or the time budget is spent. The smallest model's values then get short canonical names
(`X0`, `C0`, `Y0`, `t0`: `report/canonical.py`) when it still fails so, one more check: its bundle,
issue and script then name values alike; a bug that turns on names keeps the ones it was found with.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import onnx
from onnx import helper

from ditox_ci.engine import runner
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.values import Feeds, node_inputs, record_values
from ditox_ci.pinpoint.shrink import BudgetSpent, Shrinker, delta_debug
from ditox_ci.report.canonical import canonical_samples
from ditox_ci.report.evidence import Reduction, ReductionEnd

# a model left this big (not reduced) keeps its names: a renamed copy would double its memory
RENAME_MAX_BYTES = 16 << 20


class Verdict(Enum):
    """What checking a candidate said."""

    FAILS = "still fails the same way"
    PASSES = "no longer fails that way"
    # no verdict at all (its feeds cannot be written, the pool skipped it): for the model as found
    # that is no sign the failure went away
    UNJUDGED = "could not be judged"


StillFails = Callable[[onnx.ModelProto, Feeds], Verdict]
# a candidate's Outcome, or None when it could not be judged
Evaluate = Callable[[onnx.ModelProto, Feeds], Outcome | None]


@dataclass(frozen=True, eq=False)
class ReductionResult:
    """The smallest failing model found, the feeds it fails on, and how the search went.

    `record` is what the report keeps of it: the nodes before and after, the checks, why the
    search stopped (`ReductionEnd`) and how long it took. `names` maps the found model's names to
    the short ones `model` and `feeds` use ({} when they kept their names)."""

    model: onnx.ModelProto
    feeds: Feeds
    record: Reduction
    names: dict[str, str] = field(default_factory=dict)


def _value_info(name: str, samples: Sequence[np.ndarray]) -> onnx.ValueInfoProto:
    """Type from the recorded values; a dimension that varies between samples stays symbolic."""
    dtype = helper.np_dtype_to_tensor_dtype(samples[0].dtype)
    if len({s.ndim for s in samples}) != 1:
        return helper.make_tensor_value_info(name, dtype, None)
    dims = zip(*(s.shape for s in samples), strict=True)
    shape = [sizes[0] if len(set(sizes)) == 1 else None for sizes in dims]
    return helper.make_tensor_value_info(name, dtype, shape)


class Subgraphs:
    """Builds the model for a subset of the original's top-level nodes (by index)."""

    def __init__(self, model: onnx.ModelProto, recorded: Feeds) -> None:
        self.model = model
        self.nodes = list(model.graph.node)
        self.recorded = recorded
        self.initializers = {t.name: t for t in model.graph.initializer}
        self.graph_outputs = [v.name for v in model.graph.output]
        self.consumers: dict[str, set[int]] = {}
        for index, node in enumerate(self.nodes):
            for name in node_inputs(node):
                self.consumers.setdefault(name, set()).add(index)

    def outputs(self, kept: Sequence[int]) -> list[str]:
        """Values of `kept` the original graph output or a dropped node read."""
        inside = set(kept)
        names: list[str] = []
        for index in kept:
            for name in self.nodes[index].output:
                readers = self.consumers.get(name, set())
                if name and (name in self.graph_outputs or readers - inside) and name not in names:
                    names.append(name)
        return names

    def cone(self, kept: Sequence[int], output: str) -> tuple[int, ...]:
        """The nodes of `kept` that `output` depends on."""
        producer = {name: i for i in kept for name in self.nodes[i].output if name}
        wanted, stack = set(), [output]
        while stack:
            name = stack.pop()
            index = producer.get(name)
            if index is not None and index not in wanted:
                wanted.add(index)
                stack.extend(node_inputs(self.nodes[index]))
        return tuple(sorted(wanted))

    def build(self, kept: Sequence[int]) -> tuple[onnx.ModelProto, Feeds] | None:
        """The model and feeds for these nodes, or None when it cannot be fed or is invalid."""
        nodes = [self.nodes[i] for i in kept]
        produced = {name for node in nodes for name in node.output if name}
        reads: list[str] = []
        for node in nodes:
            reads.extend(n for n in node_inputs(node) if n not in produced and n not in reads)
        initializers = [self.initializers[n] for n in reads if n in self.initializers]
        fed = [n for n in reads if n not in self.initializers]
        outputs = self.outputs(kept)
        if not outputs or any(n not in sample for n in fed + outputs for sample in self.recorded):
            return None
        # only tensors are declared from what they hold: a cut through a sequence (a graph input
        # of the original that is one) cannot be fed
        if any(not isinstance(sample[n], np.ndarray) for n in fed + outputs for sample in self.recorded):
            return None
        graph = helper.make_graph(
            nodes,
            self.model.graph.name or "reduced",
            [_value_info(n, [s[n] for s in self.recorded]) for n in fed],
            [_value_info(n, [s[n] for s in self.recorded]) for n in outputs],
            initializers,
        )
        candidate = onnx.ModelProto()
        candidate.CopyFrom(self.model)
        candidate.graph.CopyFrom(graph)
        try:
            onnx.checker.check_model(candidate)
        except (onnx.checker.ValidationError, ValueError):
            return None
        return candidate, [{n: sample[n] for n in fed} for sample in self.recorded]


class NodeShrinker(Shrinker[int]):
    """The shrinker over sets of node indices (kept in graph order): a judgement builds the
    candidate and checks it, until the deadline; a candidate that cannot be built (no feeds, no
    output, checker-invalid) is not failing and costs no check."""

    def __init__(self, subgraphs: Subgraphs, still_fails: StillFails, deadline: float, checks: int) -> None:
        super().__init__(range(len(subgraphs.nodes)))
        self.subgraphs = subgraphs
        self.still_fails = still_fails
        self.deadline = deadline
        self.checks = checks

    def key(self, candidate: Sequence[int]) -> tuple[int, ...]:
        return tuple(sorted(candidate))

    def spend(self) -> None:
        if time.monotonic() > self.deadline:
            raise BudgetSpent

    def still_failing(self, key: tuple[int, ...]) -> bool:
        built = self.subgraphs.build(key)
        if built is None:
            return False
        self.checks += 1
        return self.still_fails(*built) is Verdict.FAILS

    def best(self) -> tuple[onnx.ModelProto, Feeds] | None:
        """The current candidate's model and feeds; None while no node could go."""
        if len(self.current) == len(self.subgraphs.nodes):
            return None
        return self.subgraphs.build(self.current)

    def cones(self) -> bool:
        """Keep only what one output needs: big cuts for one check each."""
        return any(
            self.offer(self.subgraphs.cone(self.current, name))
            for name in self.subgraphs.outputs(self.current)
        )

    def ddmin(self) -> bool:
        """One round of delta debugging over the current node list; True when it shrank."""
        return delta_debug(lambda: self.current, self.offer)

    def run(self) -> None:
        """Alternate both strategies until neither finds a smaller failing candidate."""
        while self.cones() or self.ddmin():
            pass


def same_finding(evaluate: Evaluate, failure: Outcome) -> StillFails:
    """A `still_fails` from an evaluator that returns the Outcome of a candidate on its feeds (None
    when it has no verdict): the same failure by `Outcome.same_failure`, except the output position
    (a candidate has other outputs than the model it was cut from)."""

    def still_fails(model: onnx.ModelProto, feeds: Feeds) -> Verdict:
        outcome = evaluate(model, feeds)
        if outcome is None:
            return Verdict.UNJUDGED
        return Verdict.FAILS if outcome.same_failure(failure, same_interface=False) else Verdict.PASSES

    return still_fails


def reduce(
    model: onnx.ModelProto,
    feeds: Feeds,
    still_fails: StillFails,
    budget_s: float,
    runner_name: str = "onnxruntime",
) -> ReductionResult:
    """Shrink `model` while `still_fails(candidate, candidate_feeds)` holds, for at most budget_s.

    `still_fails` must check the same finding on all samples (same kind; for mismatches, still
    beyond tolerance) under the culprit passes; it should never raise: a candidate it cannot judge
    is Verdict.UNJUDGED. Intermediate values, the
    inputs of subgraph candidates, are recorded with `runner_name`, the runner that judged it."""
    start = time.monotonic()
    before = len(model.graph.node)

    def result(
        found: onnx.ModelProto,
        found_feeds: Feeds,
        checks: int,
        reason: ReductionEnd,
        names: dict[str, str] | None = None,
    ) -> ReductionResult:
        elapsed_s = round(time.monotonic() - start, 3)
        record = Reduction(before, len(found.graph.node), checks, reason, elapsed_s)
        return ReductionResult(model=found, feeds=found_feeds, record=record, names=names or {})

    verdict = still_fails(model, feeds)
    if verdict is Verdict.UNJUDGED:
        return result(model, feeds, 1, ReductionEnd.UNJUDGEABLE)
    if verdict is Verdict.PASSES:
        return result(model, feeds, 1, ReductionEnd.NOT_REPRODUCIBLE)
    try:
        recorded = record_values(model, feeds, runner_name)
    except (runner.RuntimeLoadError, runner.RuntimeRunError):
        return result(model, feeds, 1, ReductionEnd.UNRECORDABLE)
    # a candidate that cannot be judged is one that does not fail
    reducer = NodeShrinker(Subgraphs(model, recorded), still_fails, start + budget_s, checks=1)
    reason = ReductionEnd.MINIMAL
    try:
        reducer.run()
    except BudgetSpent:
        reason = ReductionEnd.BUDGET
    found, found_feeds = reducer.best() or (model, feeds)
    if found.ByteSize() > RENAME_MAX_BYTES:
        return result(found, found_feeds, reducer.checks, reason)
    renamed, renamed_feeds, mapping = canonical_samples(found, found_feeds)
    names = {old: new for old, new in mapping.items() if old != new}
    if not names:  # short already, or a subgraph's name would clash
        return result(found, found_feeds, reducer.checks, reason)
    if still_fails(renamed, renamed_feeds) is Verdict.FAILS:
        return result(renamed, renamed_feeds, reducer.checks + 1, reason, names)
    return result(found, found_feeds, reducer.checks + 1, reason)
