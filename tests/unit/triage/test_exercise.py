"""Which passes a PR check exercises, and whose generated models each one gets (no processes)."""

from ditox_ci.engine.plan import Step
from ditox_ci.fuzz import GENERATORS
from ditox_ci.report.header import OptimizerInfo
from ditox_ci.triage.exercise import _runnable, generators_for, passes_to_exercise

HEAD = OptimizerInfo("onnxoptimizer", "0.4.2", ("nop", "a", "b", "fuse_new"), ("a",))
BASE = OptimizerInfo("onnxoptimizer", "0.4.2", ("nop", "a", "b"), ("a",))


def test_passes_the_base_lacks_are_new_and_touched_ones_changed() -> None:
    assert passes_to_exercise(HEAD, BASE, ()) == {"fuse_new": "new"}
    assert passes_to_exercise(HEAD, BASE, ("b", "fuse_new")) == {"fuse_new": "new", "b": "changed"}
    # a touched file of a pass the head no longer has names nothing to run
    assert passes_to_exercise(BASE, HEAD, ("gone",)) == {}


def test_a_pass_gets_its_own_generator_else_the_closest_by_name_else_all() -> None:
    assert generators_for("fuse_bn_into_conv") == ("fuse_bn_into_conv",)
    among = [name for name, g in GENERATORS.items() if "onnxoptimizer" in g.optimizers]
    close = generators_for("fuse_consecutive_unsqueeze_squeeze", among)
    assert "fuse_consecutive_squeezes" in close and "fuse_consecutive_unsqueezes" in close
    assert len(close) <= 3
    # the other optimizers' generators are no candidates for onnxoptimizer's new pass
    assert "fuse_consecutive_squeeze_unsqueeze" not in close
    assert generators_for("zz_nothing_alike", among) == tuple(sorted(among))
    assert generators_for("zz_nothing_alike") == tuple(sorted(GENERATORS))


def test_only_a_pass_the_sweep_runs_alone_is_run() -> None:
    steps = (Step("nop", ("nop",)), Step("default", ("a",)), Step("pass:fuse_new", ("fuse_new",)))
    assert _runnable({"fuse_new": "new", "b": "changed"}, steps) == {"fuse_new": steps[2]}
