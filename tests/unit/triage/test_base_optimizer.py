"""--base-optimizer without processes: which steps run on the base, and what its outcomes decide."""

from pathlib import Path

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step, step_on_build
from ditox_ci.engine.pool import JobResult
from ditox_ci.optimizers.install import cache_key
from ditox_ci.report.header import OptimizerInfo
from ditox_ci.report.model import Culprit, Finding
from ditox_ci.triage.base_optimizer import BY_BASE, base_job, judge_on_base

HEAD = OptimizerInfo("onnxoptimizer", "0.4", ("nop", "a", "b", "new"), ("a", "new"))
BASE = OptimizerInfo("onnxoptimizer", "0.3", ("nop", "a", "b"), ("a", "b"))
STEPS = (
    Step("nop", ("nop",)),
    Step("default", HEAD.default_passes),
    Step("fixed-point", HEAD.default_passes, fixed_point=True),
    Step("pass:a", ("a",)),
    Step("pass:new", ("new",)),
    Step("passes:a,b", ("a", "b")),
)
REFS = [ModelRef(id=f"m{i}", source="dir", path=f"/nonexistent/m{i}.onnx") for i in range(3)]
CRASH = Outcome("optimizer-crash", "optimizer crashed (SIGSEGV)", {"signal": "SIGSEGV"})
ERROR = Outcome("optimizer-error", "RuntimeError: bad axis 3 at 0x7ffe")


def _finding(model: str, config: str, kind: str = "optimizer-crash") -> Finding:
    return Finding("f" * 16, kind, model, config, Culprit("pass"), measured={"message": "x"})


def _result(ref: ModelRef, status: str = "ok", **outcomes: Outcome) -> JobResult:
    return JobResult(ref=ref, status=status, outcomes={k.replace("_", ":"): v for k, v in outcomes.items()})


def test_role_configs_use_the_base_builds_own_lists_and_explicit_ones_need_every_pass():
    by_label = {step.label: step_on_build(step, BASE) for step in STEPS}
    assert by_label["default"] == Step("default", ("a", "b"))
    assert by_label["fixed-point"] == Step("fixed-point", ("a", "b"), fixed_point=True)
    assert by_label["pass:a"] == Step("pass:a", ("a",))
    assert by_label["passes:a,b"] == Step("passes:a,b", ("a", "b"))
    assert by_label["pass:new"] is None


def test_a_model_runs_on_the_base_only_its_failing_configs_the_base_has_afresh():
    first = base_job(_result(REFS[0]), ["pass:a", "pass:new"], STEPS, BASE)
    assert [step.label for step in first.steps] == ["nop", "pass:a"] and first.fresh
    second = base_job(_result(REFS[2]), ["default"], STEPS, BASE)
    assert second.steps == (Step("nop", ("nop",)), Step("default", ("a", "b")))


def test_a_failure_the_base_shows_in_a_later_try_is_known():
    ours = [_result(REFS[0], pass_a=CRASH)]
    tries = [_result(REFS[0], pass_a=Outcome(None)), _result(REFS[0], pass_a=CRASH)]
    (judged,) = judge_on_base([_finding("m0", "pass:a")], ours, tries, "base")
    assert judged.status == "known"
    (judged,) = judge_on_base([_finding("m0", "pass:a")], ours, tries[:1] * 3, "base")
    assert judged.status == "new" and judged.evidence["base_tries"] == 3


def test_the_same_failure_on_the_base_is_known_and_anything_else_stays_new():
    findings = [
        _finding("m0", "pass:a"),
        _finding("m0", "default"),
        _finding("m1", "pass:a", "optimizer-error"),
        _finding("m2", "pass:a"),
    ]
    ours = [
        _result(REFS[0], pass_a=CRASH, default=CRASH),
        _result(REFS[1], pass_a=ERROR),
        _result(REFS[2], pass_a=CRASH),
    ]
    theirs = [
        _result(REFS[0], pass_a=CRASH, default=Outcome(None)),
        # the same error with another address is the same failure
        _result(REFS[1], pass_a=Outcome("optimizer-error", "RuntimeError: bad axis 3 at 0x1234")),
        _result(REFS[2], "skipped"),
    ]
    judged = {
        (f.model, f.config): f for f in judge_on_base(findings, ours, theirs, "onnxoptimizer==0.3 (0.3)")
    }
    known = judged[("m0", "pass:a")]
    assert known.status == "known" and known.triage.known_by == BY_BASE
    assert known.evidence["known_by"] == BY_BASE.to_json()  # as report.json writes it
    assert known.evidence["base_optimizer"] == "onnxoptimizer==0.3 (0.3)"
    assert judged[("m1", "pass:a")].status == "known"
    assert judged[("m0", "default")].status == "new"
    assert judged[("m0", "default")].evidence["on_base"] == "no failure"
    assert judged[("m2", "pass:a")].status == "new"
    assert judged[("m2", "pass:a")].evidence["on_base"].startswith("not checked")


def test_a_config_the_base_cannot_run_stays_new_with_the_reason():
    ours = [_result(REFS[0], pass_new=CRASH)]
    theirs = [_result(REFS[0], nop=Outcome(None))]
    (judged,) = judge_on_base([_finding("m0", "pass:new")], ours, theirs, "base")
    assert judged.status == "new"
    assert "lacks a pass" in judged.evidence["on_base"]


def test_only_a_build_that_cannot_change_is_cached(tmp_path: Path):
    wheel = tmp_path / "opt-1.0-py3-none-any.whl"
    wheel.write_bytes(b"one")
    first = cache_key(str(wheel))
    wheel.write_bytes(b"two")
    assert first and cache_key(str(wheel)) not in (None, first)
    assert cache_key("onnxoptimizer==0.3.13") == cache_key(" onnxoptimizer==0.3.13 ")
    assert cache_key("onnxoptimizer==0.3.13") != cache_key("onnxoptimizer==0.3.12")
    for moving in ("onnxoptimizer", "onnxoptimizer>=0.3", "onnxoptimizer==0.3.*", "git+https://x/y.git"):
        assert cache_key(moving) is None, moving
    assert cache_key(str(tmp_path)) is None  # a source checkout
