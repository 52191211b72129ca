"""The nop control: a failure it already shows becomes ONE infrastructure finding."""

from dataclasses import replace

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.findings import coverage_of, findings_for
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import JobResult
from ditox_ci.engine.reuse import OriginalInfo

STEPS = (
    Step("nop", ("nop",)),
    Step("default", ("a", "b")),
    Step("pass:a", ("a",)),
    Step("pass:b", ("b",)),
)
REF = ModelRef(id="m.onnx", source="dir", path="/nonexistent/m.onnx", family="Conv")


def _result(**outcomes: Outcome) -> JobResult:
    labels = {"nop": "nop", "default": "default", "a": "pass:a", "b": "pass:b"}
    return JobResult(
        ref=REF, status="ok", sha256="orig", outcomes={labels[k]: v for k, v in outcomes.items()}
    )


def test_failure_in_nop_is_reported_once_as_infrastructure():
    broken = Outcome("runtime-error", "node 'x' failed at 0x7ffe", digest="d1", changed=True)
    same = Outcome("runtime-error", "node 'y' failed at 0x1234", digest="d2", changed=True)
    findings = findings_for(_result(nop=broken, default=same, a=same, b=same), STEPS)
    assert len(findings) == 1
    assert findings[0].culprit.scope == "infrastructure"
    assert findings[0].evidence["also_in"] == ["default", "pass:a", "pass:b"]


def test_pass_failure_different_from_nop_is_its_own_finding():
    nop_fail = Outcome("runtime-error", "boom", digest="d1", changed=True)
    mismatch = Outcome("output-mismatch", "output 'y' differs", digest="d3", changed=True)
    findings = findings_for(_result(nop=nop_fail, a=mismatch), STEPS)
    by_config = {f.config: f for f in findings}
    assert set(by_config) == {"nop", "pass:a"}
    assert by_config["pass:a"].culprit.scope == "pass"
    assert by_config["pass:a"].culprit.passes == ("a",)


def test_multi_pass_failure_is_unknown_until_localized_and_fingerprints_differ_by_config():
    mismatch = Outcome("output-mismatch", "output 'y' differs", digest="d3", changed=True)
    findings = findings_for(_result(nop=Outcome(None), default=mismatch, a=mismatch), STEPS)
    default, single = sorted(findings, key=lambda f: f.config)
    assert default.culprit.scope == "unknown"
    assert default.fingerprint != single.fingerprint


def test_coverage_counts_only_changes_beyond_the_nop_control():
    nop = Outcome(None, digest="nopdigest", changed=True)
    results = [
        _result(
            nop=nop,
            a=Outcome(None, digest="nopdigest", changed=True),
            b=Outcome(None, digest="new", changed=True),
        )
    ]
    coverage = coverage_of(results, STEPS)
    assert coverage.per_pass["a"] == {"models_changed": 0, "models_checked": 1}
    assert coverage.per_pass["b"] == {"models_changed": 1, "models_checked": 1}
    assert coverage.changed_by_family == {"a": {"Conv": 0}, "b": {"Conv": 1}}
    assert coverage.checked_by_family == {"a": {"Conv": 1}, "b": {"Conv": 1}}


def test_coverage_per_family_counts_the_models_each_pass_was_checked_on():
    """The picture's denominators: a skipped model, or one a pass never ran on, is not checked."""
    changed = Outcome(None, digest="new", changed=True)
    results = [
        _result(nop=Outcome(None), a=changed, b=Outcome(None)),
        replace(_result(nop=Outcome(None), a=Outcome(None)), ref=replace(REF, id="m2", family="Relu")),
        replace(_result(nop=Outcome(None), a=changed, b=changed), status="skipped"),
    ]
    coverage = coverage_of(results, STEPS)
    assert coverage.changed_by_family == {"a": {"Conv": 1, "Relu": 0}, "b": {"Conv": 0}}
    assert coverage.checked_by_family == {"a": {"Conv": 1, "Relu": 1}, "b": {"Conv": 1}}
    assert coverage.per_pass["a"] == {"models_changed": 1, "models_checked": 2}


def test_an_original_onnx_runtime_cannot_load_folds_every_configs_failure_into_the_control():
    """ONNX Runtime's own offline optimizer on a bf16 attention model ONNX Runtime cannot load: the
    control fails on one op, the default config on another; the original's limitation, one finding."""
    control = Outcome("optimizer-error", "NOT_IMPLEMENTED: Could not find an implementation for Expand(13)")
    default = Outcome("optimizer-error", "NOT_IMPLEMENTED: Could not find an implementation for Mul(14)")
    mismatch = Outcome("output-mismatch", "output 'y' differs", digest="d3", changed=True)
    unloadable = OriginalInfo("random", "reference", "ONNX Runtime cannot load the original: Mul(14)")
    outcomes = {"nop": control, "default": default, "pass:a": default, "pass:b": mismatch}
    result = JobResult(ref=REF, status="ok", outcomes=outcomes, info=unloadable)
    by_config = {f.config: f for f in findings_for(result, STEPS)}
    assert set(by_config) == {"nop", "pass:b"}  # the reference runner's mismatch stays a finding
    assert by_config["nop"].culprit.scope == "infrastructure"
    assert by_config["nop"].evidence["also_in"] == ["default", "pass:a"]
    assert by_config["nop"].evidence["original_fails"].startswith("ONNX Runtime cannot load")
    # an original ONNX Runtime runs: two messages, two findings, as before
    loaded = JobResult(ref=REF, status="ok", outcomes=outcomes, info=OriginalInfo("random", "onnxruntime"))
    assert {f.config for f in findings_for(loaded, STEPS)} == {"nop", "default", "pass:a", "pass:b"}
