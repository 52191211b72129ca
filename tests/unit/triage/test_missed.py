"""Whom a missed optimization blames (triage/missed.py): the pass of its own config, the passes
whose own configs miss too, the optimizer's round trip when the control misses, or nobody known."""

from __future__ import annotations

from dataclasses import replace

from ditox_ci.control import NOP
from ditox_ci.corpus import ModelRef
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import JobResult
from ditox_ci.report.effect import Effect, ModelEffect, Size
from ditox_ci.report.model import ModelEntry, Report
from ditox_ci.triage.missed import missed_optimizations
from tests.helpers import minimal_report

ORIGINAL = Size(4, 0, 100, {"Identity": 2, "Shape": 1, "Add": 1})
STEPS = (
    Step(NOP, ()),
    Step("default", ("eliminate_identity", "eliminate_shape_op")),
    Step("pass:eliminate_identity", ("eliminate_identity",)),
    Step("pass:eliminate_shape_op", ("eliminate_shape_op",)),
)


def _head(**left: dict[str, int]) -> JobResult:
    """The build under test's result: per config label, the op counts its result left."""
    outcomes = {
        label.replace("_", ":", 1) if label.startswith("pass_") else label: Outcome(
            None, digest=label, changed=True, size=Size(sum(ops.values()), 0, 90, ops)
        )
        for label, ops in left.items()
    }
    return JobResult(
        ModelRef(id="m", source="test", path="m.onnx"), "ok", sha256="s", outcomes=outcomes, size=ORIGINAL
    )


def _reference(**did: dict[str, int]) -> Report:
    """A reference report whose model `m` had, per config, these op count changes."""
    configs = {
        (label.replace("_", ":", 1) if label.startswith("pass_") else label): Effect(
            sum(ops.values()), 0, -10, ops
        )
        for label, ops in did.items()
    }
    entry = ModelEntry(id="m", source="test", sha256="s", effect=ModelEffect(4, 0, 100, configs))
    report = minimal_report()
    return replace(report, models=(entry,), stats={"configs": [step.label for step in STEPS]})


def _missed(head: JobResult, reference: Report) -> dict[str, tuple[str, tuple[str, ...]]]:
    found = missed_optimizations([head], STEPS, reference).findings
    return {f.config: (f.culprit.scope, f.culprit.passes) for f in found}


KEEP = {"Identity": 2, "Shape": 1, "Add": 1}
NO_IDENTITY = {"Shape": 1, "Add": 1}


def test_a_pass_that_stopped_is_blamed_in_its_config_and_in_the_default_set() -> None:
    head = _head(nop=KEEP, default=KEEP, pass_eliminate_identity=KEEP, pass_eliminate_shape_op=KEEP)
    reference = _reference(default={"Identity": -2}, pass_eliminate_identity={"Identity": -2})
    assert _missed(head, reference) == {
        "default": ("pass", ("eliminate_identity",)),
        "pass:eliminate_identity": ("pass", ("eliminate_identity",)),
    }


def test_what_the_round_trip_no_longer_does_is_the_infrastructures() -> None:
    head = _head(nop=KEEP, default=NO_IDENTITY, pass_eliminate_identity=NO_IDENTITY)
    did = {"Identity": -2, "Shape": -1}
    reference = _reference(nop={"Shape": -1}, default=did, pass_eliminate_identity=did)
    missed = _missed(head, reference)
    assert set(missed) == {NOP, "default", "pass:eliminate_identity"}
    assert set(missed.values()) == {("infrastructure", ())}


def test_what_no_single_pass_did_alone_is_blamed_on_nobody() -> None:
    head = _head(nop=KEEP, default=NO_IDENTITY, pass_eliminate_identity=NO_IDENTITY)
    reference = _reference(default={"Identity": -2, "Shape": -1}, pass_eliminate_identity={"Identity": -2})
    assert _missed(head, reference) == {"default": ("unknown", ())}
