"""The same failure under most single passes, not in the control, is one bug in the optimizer's
shared code; a failure of its own under one pass stays that pass's."""

from __future__ import annotations

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.findings import SHARED_MIN_PASSES, findings_for, shared_failure
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import JobResult
from ditox_ci.report.bugs import group_bugs

PASSES = ("a", "b", "c", "d", "e")
STEPS = (
    Step("nop", ()),
    Step("default", PASSES),
    *(Step(f"pass:{name}", (name,)) for name in PASSES),
)


def _crash(tensor: str) -> Outcome:
    """The shared builder's error names the tensor it met: another one per model."""
    message = f"RuntimeError: rebuild_graph: tensor {tensor} has no producer"
    return Outcome("optimizer-error", message, {"message": message})


def _result(model: str, outcomes: dict[str, Outcome], steps: tuple[Step, ...] = STEPS) -> JobResult:
    """Every step ran; those not in `outcomes` left the model correct."""
    ref = ModelRef(id=model, source="dir", path=f"/nonexistent/{model}")
    return JobResult(ref=ref, status="ok", outcomes={**{s.label: Outcome(None) for s in steps}, **outcomes})


def _under(passes: tuple[str, ...], outcome: Outcome) -> dict[str, Outcome]:
    return {f"pass:{name}": outcome for name in passes}


def test_a_crash_under_most_passes_is_one_bug_in_the_shared_code_across_models():
    findings = [
        finding
        for model, tensor in (("m1.onnx", "conv1.weight_3"), ("m2.onnx", "onnx::Gemm_12"))
        for finding in findings_for(
            _result(model, {"default": _crash(tensor), **_under(PASSES[:4], _crash(tensor))}), STEPS
        )
    ]
    assert len(findings) == 10  # every config that showed it is still a finding …
    [bug] = group_bugs(findings)  # … of one bug
    assert {f.culprit.scope for f in findings} == {"shared"}
    assert bug.culprit.seen_under == ("a", "b", "c", "d") and bug.culprit.passes == ()
    assert "under 4 of 5 single passes" in bug.culprit.method


def test_a_crash_under_few_passes_stays_each_passs_own():
    few = _under(PASSES[:2], _crash("x_1"))
    assert shared_failure(_result("m.onnx", few), STEPS) is None
    findings = findings_for(_result("m.onnx", few), STEPS)
    assert {(f.culprit.scope, f.culprit.passes) for f in findings} == {("pass", ("a",)), ("pass", ("b",))}
    assert len(group_bugs(findings)) == 2


def test_most_means_more_than_half_of_the_passes_the_model_ran_and_at_least_three():
    six = (*STEPS, Step("pass:f", ("f",)))
    outcomes = _under(PASSES[:3], _crash("t_0"))
    assert shared_failure(_result("m.onnx", outcomes, six), six) is None  # 3 of 6
    assert shared_failure(_result("m.onnx", outcomes), STEPS) is not None  # 3 of 5
    # a model split by config: the passes it ran in this part are the ones counted
    assert shared_failure(_result("m.onnx", outcomes, STEPS[:5]), STEPS) is not None  # 3 of 3
    two_of_two = _under(PASSES[:2], _crash("t_0"))
    assert SHARED_MIN_PASSES == 3
    assert shared_failure(_result("m.onnx", two_of_two, STEPS[:4]), STEPS[:4]) is None


def test_another_cause_under_one_pass_and_the_controls_failure_keep_their_own_culprits():
    mismatch = Outcome("output-mismatch", "output 'y' differs", {"output": "y"}, changed=True)
    outcomes = {**_under(PASSES[:4], _crash("t_1")), "pass:e": mismatch, "default": mismatch}
    by_config = {f.config: f for f in findings_for(_result("m.onnx", outcomes), STEPS)}
    assert by_config["pass:e"].culprit.scope == "pass"
    assert by_config["default"].culprit.scope == "unknown"  # localized later, not blamed on shared code
    assert len(group_bugs(by_config.values())) == 3  # shared crash, pass e's mismatch, default's
    # the same crash in the nop control is infrastructure, reported once, as before
    control = _result("m.onnx", {"nop": _crash("t_1"), **_under(PASSES, _crash("t_1"))})
    [finding] = findings_for(control, STEPS)
    assert finding.culprit.scope == "infrastructure"


def _unused(count: int) -> Outcome:
    message = f"optimizer introduced {count} unused initializer(s)"
    return Outcome("warning", message, {"message": message, "ops_removed": ["Cast"], "ops_added": []})


def test_a_warning_a_pass_shows_alone_is_one_warning_with_default_and_fixed_point():
    """Warnings are not localized: default's and fixed-point's were each a cause of their own
    (culprit unknown), three warnings for one. They are blamed on the first of their passes that
    shows the same warning alone, and share its fingerprint."""
    steps = (*STEPS, Step("fixed-point", PASSES, fixed_point=True))
    outcomes = {"default": _unused(3), "fixed-point": _unused(2), "pass:c": _unused(1), "pass:d": _unused(1)}
    findings = findings_for(_result("m.onnx", outcomes, steps), steps)
    assert len(findings) == 4
    by_config = {f.config: f for f in findings}
    for config in ("default", "fixed-point"):
        assert (by_config[config].culprit.scope, by_config[config].culprit.passes) == ("pass", ("c",))
    assert (
        by_config["default"].fingerprint
        == by_config["fixed-point"].fingerprint
        == by_config["pass:c"].fingerprint
    )
    assert len(group_bugs(findings)) == 2  # c's (with default and fixed-point) and d's
    # another warning than any single pass shows stays the config's own, not localized
    other = Outcome("warning", "precision: the outputs differ only on …", {"message": "precision: …"})
    [alone] = findings_for(_result("m.onnx", {"default": other}, steps), steps)
    assert alone.culprit.scope == "unknown"
