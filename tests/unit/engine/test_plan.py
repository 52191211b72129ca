import pytest

from ditox_ci.control import sweep_flags
from ditox_ci.engine.plan import build_steps
from ditox_ci.errors import UsageError
from ditox_ci.report.header import OptimizerInfo
from tests.helpers import command_parser

INFO = OptimizerInfo("opt", "1", ("nop", "a", "b", "c"), ("a", "b"))


def test_nop_control_always_runs_first():
    steps = build_steps(["default"], [], INFO)
    assert [s.label for s in steps] == ["nop", "default"]
    assert steps[1].passes == ("a", "b") and not steps[1].fixed_point


def test_single_expands_every_pass_but_nop():
    labels = [s.label for s in build_steps(["single"], [], INFO)]
    assert labels == ["nop", "pass:a", "pass:b", "pass:c"]


def test_fixed_point_and_explicit_pass_list():
    steps = {s.label: s for s in build_steps(["fixed-point"], ["c", "a"], INFO)}
    assert steps["fixed-point"].fixed_point
    assert steps["passes:c,a"].passes == ("c", "a")


def test_unknown_pass_and_config_are_usage_errors():
    with pytest.raises(UsageError, match="unknown pass"):
        build_steps(["nop"], ["zzz"], INFO)
    with pytest.raises(UsageError, match="unknown config"):
        build_steps(["everything"], [], INFO)


def test_single_on_an_opaque_optimizer_says_it_has_no_passes():
    opaque = OptimizerInfo("custom.py:optimize", "unknown", (), ("default",), opaque=True)
    with pytest.raises(UsageError, match=r"custom\.py:optimize is opaque: it has no pass names"):
        build_steps(["single"], [], opaque)
    with pytest.raises(UsageError, match="--configs single,fixed-point has nothing to run"):
        build_steps(["single", "fixed-point"], [], opaque)
    # the default configs still run its default beside the control
    assert [s.label for s in build_steps(["default", "fixed-point", "nop", "single"], [], opaque)] == [
        "nop",
        "default",
    ]


def test_the_flags_that_run_a_config_again_run_that_config():
    """What the texts tell a reader to run (sweep_flags) goes through the sweep's own parser."""
    parser = command_parser("sweep")
    for step in build_steps(("default", "fixed-point", "single"), ("b", "a"), INFO):
        args = parser.parse_args(sweep_flags(step.label).split())
        again = build_steps(args.configs, args.passes or (), INFO)
        assert step in again, (step.label, sweep_flags(step.label))
