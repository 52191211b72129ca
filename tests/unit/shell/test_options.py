import pytest

from ditox_ci.cli.publish import PublishSettings
from ditox_ci.errors import ConfigError, UsageError
from ditox_ci.options import resolve
from ditox_ci.sweep.setup import SweepOptions


def test_precedence_defaults_config_env_flags():
    options = resolve(
        SweepOptions,
        config={"samples": 2, "rtol": 0.5, "timeout": 9},
        env={"DITOX_SAMPLES": "3", "INPUT_RTOL": "0.25"},
        flags={"rtol": 0.125, "seed": None},
    )
    assert options.samples == 3
    assert options.rtol == 0.125
    assert options.timeout == 9
    assert options.seed == 0


def test_unknown_config_key_is_an_error():
    with pytest.raises(ConfigError, match="unknown key 'sample'"):
        resolve(SweepOptions, config={"sample": 2})


def test_bad_values_are_errors_not_defaults():
    with pytest.raises(ConfigError, match="'jobs' must be int"):
        resolve(SweepOptions, env={"INPUT_JOBS": "many"})
    with pytest.raises(UsageError):
        resolve(SweepOptions, flags={"samples": 0})


def test_list_values_from_env_and_flags():
    options = resolve(
        SweepOptions, env={"INPUT_MODELS": "a.onnx\nb_dir"}, flags={"configs": ["nop"]}
    )
    assert options.models == ("a.onnx", "b_dir")
    assert options.configs == ("nop",)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        ({"rtol": float("nan")}, "--rtol must be a finite number"),
        ({"atol": float("inf")}, "--atol must be a finite number"),
        ({"atol": -1e-4}, "--atol must be a finite number"),
        ({"timeout": float("nan")}, "--timeout must be a finite number"),
        ({"timeout": 0.0}, "--timeout must be > 0"),
        ({"max_skipped": 1.5}, "--max-skipped must be a fraction"),
        ({"max_skipped": float("nan")}, "--max-skipped must be a finite number"),
    ],
)
def test_tolerances_that_would_pass_everything_and_bad_fractions_are_usage_errors(flags, needle):
    with pytest.raises(UsageError, match=needle):
        resolve(SweepOptions, flags=flags)
    assert resolve(SweepOptions, env={"DITOX_MAX_SKIPPED": "0.25"}).max_skipped == 0.25


def test_an_unknown_comparator_is_a_usage_error_listing_the_registered_ones():
    with pytest.raises(UsageError, match=r"unknown comparator 'nosuch'; known: .*classification.*tensor"):
        resolve(SweepOptions, flags={"comparator": "nosuch"}, env={}, config={})


@pytest.mark.parametrize(
    ("source", "origin"),
    [
        ({"env": {"DITOX_TIMEOUT": "0"}}, "environment DITOX_TIMEOUT: --timeout must be > 0"),
        ({"env": {"INPUT_JOBS": "-1"}}, "environment INPUT_JOBS: --jobs must be 0 \\(every core\\) or more"),
        ({"config": {"max-skipped": 1.5}}, "config file: --max-skipped must be a fraction"),
    ],
)
def test_a_value_out_of_range_from_a_config_file_or_the_environment_is_a_config_error_naming_it(
    source, origin
):
    """Exit 3 as the README says, naming where the value came from: the user gave no such flag."""
    with pytest.raises(ConfigError, match=origin):
        resolve(SweepOptions, **source)
    # a flag that overrides it leaves nothing wrong
    assert resolve(SweepOptions, flags={"timeout": 5.0, "jobs": 2, "max_skipped": 0.5}, **source).jobs == 2


def test_a_flag_out_of_range_stays_a_usage_error_beside_values_from_the_environment():
    """The environment's valid value is not blamed for the flag's error, nor for one of two."""
    with pytest.raises(UsageError, match="--timeout must be > 0"):
        resolve(SweepOptions, flags={"timeout": 0.0}, env={"DITOX_SEED": "1"})
    with pytest.raises(UsageError, match="--timeout must be > 0"):
        resolve(SweepOptions, flags={"timeout": 0.0}, env={"DITOX_JOBS": "-1"})


def test_a_negative_publish_limit_is_refused_where_it_was_given():
    with pytest.raises(UsageError, match="--max-new-issues must be 0 or more, got -1"):
        resolve(PublishSettings, flags={"max_new_issues": -1})
    with pytest.raises(ConfigError, match="config file: --max-writes must be 0 or more"):
        resolve(PublishSettings, config={"max-writes": -5})
