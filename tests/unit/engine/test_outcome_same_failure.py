"""One "same failure" matcher: kind plus evidence (output position, magnitude band, message, signal)."""

from collections.abc import Sequence

import numpy as np

from ditox_ci.compare import COMPARATORS
from ditox_ci.corpus import ModelRef
from ditox_ci.engine.findings import findings_for
from ditox_ci.engine.outcome import Outcome, Verdict, failure_fingerprint, magnitude_band
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import JobResult
from ditox_ci.pinpoint.localize import localize
from ditox_ci.report.model import Culprit, Finding
from ditox_ci.triage.base_optimizer import BY_BASE, judge_on_base

EXPECTED = [np.linspace(1.0, 2.0, 8, dtype=np.float32), np.linspace(-3.0, 3.0, 8, dtype=np.float32)]


def mismatch(drift: Sequence[float]) -> Outcome:
    """The tensor oracle's verdict when each output is off by the given relative amount."""
    actual = [value * np.float32(1.0 + change) for value, change in zip(EXPECTED, drift)]
    result = COMPARATORS["tensor"]({})([EXPECTED], [actual], ["first", "second"])
    assert not result.passed
    evidence = {**result.metrics, "output": result.output, "comparator": result.comparator}
    return Outcome("output-mismatch", result.message, evidence, changed=True)


MISCOMPILED_SECOND = mismatch([0.0, 0.5])
DRIFT_ON_FIRST = mismatch([0.003, 0.0])


def test_mismatches_on_other_outputs_or_of_another_magnitude_are_different_failures():
    assert not DRIFT_ON_FIRST.same_failure(MISCOMPILED_SECOND)
    assert not mismatch([0.0, 0.003]).same_failure(MISCOMPILED_SECOND)
    assert mismatch([0.0, 0.3]).same_failure(MISCOMPILED_SECOND)
    assert magnitude_band(MISCOMPILED_SECOND.evidence) == -1


def test_a_reduced_candidate_keeps_the_failure_whatever_its_outputs_are():
    on_first = mismatch([0.4, 0.0])
    assert not on_first.same_failure(MISCOMPILED_SECOND)
    assert on_first.same_failure(MISCOMPILED_SECOND, same_interface=False)
    assert not DRIFT_ON_FIRST.same_failure(MISCOMPILED_SECOND, same_interface=False)


def test_crashes_match_by_signal_and_other_kinds_by_normalized_message():
    segv = Outcome("optimizer-crash", "optimizer crashed (SIGSEGV)", {"signal": "SIGSEGV"})
    abort = Outcome("optimizer-crash", "optimizer crashed (SIGABRT)", {"signal": "SIGABRT"})
    assert not segv.same_failure(abort)
    checker = Outcome("invalid-model", "ValidationError: Field 'type' of 'out_3' is required")
    assert checker.same_failure(Outcome("invalid-model", "ValidationError: Field 'type' of 'y' is required"))
    assert not checker.same_failure(Outcome("invalid-model", "ValidationError: Node has no op_type"))


def test_a_pass_that_drifts_on_one_output_is_not_blamed_for_another_pass_miscompiling_another():
    outcomes = {"a": DRIFT_ON_FIRST, "b": MISCOMPILED_SECOND}

    def probe(passes: Sequence[str]) -> Outcome:
        return outcomes["b"] if "b" in passes else outcomes["a"] if "a" in passes else Outcome(None)

    culprit = localize(("a", "b", "c"), MISCOMPILED_SECOND, probe, single=outcomes, nop=Outcome(None))
    assert (culprit.scope, culprit.passes) == ("pass", ("b",))


def test_the_nop_control_folds_only_the_same_failure():
    ref = ModelRef(id="m", source="dir", path="/nonexistent/m.onnx")
    steps = (Step("nop", ("nop",)), Step("pass:a", ("a",)), Step("pass:b", ("b",)))
    result = JobResult(
        ref=ref,
        status="ok",
        outcomes={"nop": DRIFT_ON_FIRST, "pass:a": mismatch([0.004, 0.0]), "pass:b": MISCOMPILED_SECOND},
    )
    findings = {f.config: f for f in findings_for(result, steps)}
    assert set(findings) == {"nop", "pass:b"}
    assert findings["nop"].evidence["also_in"] == ["pass:a"]


def test_the_base_build_showing_another_mismatch_does_not_make_a_new_one_known():
    ref = ModelRef(id="m", source="dir", path="/nonexistent/m.onnx")
    finding = Finding("f" * 16, "output-mismatch", "m", "pass:b", Culprit("pass", ("b",)))
    ours = [JobResult(ref=ref, status="ok", outcomes={"pass:b": MISCOMPILED_SECOND})]
    for base_outcome, known in ((DRIFT_ON_FIRST, False), (mismatch([0.0, 0.6]), True)):
        base = [JobResult(ref=ref, status="ok", outcomes={"pass:b": base_outcome})]
        (judged,) = judge_on_base([finding], ours, base, "base")
        assert (judged.triage.known_by == BY_BASE) is known


def test_a_candidate_keeps_a_mismatch_only_at_least_as_severe_never_as_a_mere_drift():
    reshaped = Outcome("output-mismatch", "output 'v' shape differs", {"reason": "shape", "output_index": 0})
    assert reshaped.same_failure(MISCOMPILED_SECOND, same_interface=False)
    assert not reshaped.same_failure(MISCOMPILED_SECOND)
    # a miscompilation cut free of the ops that damped it shows larger; a drift does not stand for it
    assert MISCOMPILED_SECOND.same_failure(mismatch([0.0, 0.004]), same_interface=False)
    assert not DRIFT_ON_FIRST.same_failure(MISCOMPILED_SECOND, same_interface=False)


def test_a_runtime_refusal_beside_the_checkers_is_one_failure_with_it():
    """A round trip that drops value types is one failure whether or not ONNX Runtime needs the types
    of that model too: the refusal beside the checker's verdict does not make it another one, and
    the fingerprint keys on the checker's words alone."""
    dropped = "ValidationError: Field 'type' of 'value_info' is required but missing."
    alone = Outcome.of([Verdict("invalid-model", dropped)], {})
    refused = Outcome.of(
        [
            Verdict("runtime-load-error", "Model input (input_0) does not have type information."),
            Verdict("invalid-model", dropped),
        ],
        {},
    )
    assert refused.kinds == ("invalid-model", "runtime-load-error")
    assert refused.same_failure(alone) and alone.same_failure(refused)
    assert failure_fingerprint(refused, ()) == failure_fingerprint(alone, ())
    # beside another verdict, the checker's words (its first problem of several) do not count
    retyped = Verdict("interface-change", "graph output #0 ('y') element type changed: FLOAT -> DOUBLE")
    on_base = Outcome.of([Verdict("invalid-model", dropped), retyped], {})
    on_head = Outcome.of(
        [Verdict("invalid-model", "ValidationError: Inferred elem type differs"), retyped], {}
    )
    assert on_base.same_failure(on_head)
    assert failure_fingerprint(on_base, ("p",)) == failure_fingerprint(on_head, ("p",))
    assert failure_fingerprint(on_base, ("p",)) != failure_fingerprint(Outcome.of([retyped], {}), ("p",))
