"""The options of the commands that run models, resolved once into typed values: the shard parsed
once, the tolerances given or left to each output's dtype, one constructor of the engine's settings
for the sweep and for reduce."""

from __future__ import annotations

import pytest

from ditox_ci.compare.tensor import DEFAULT_ATOL, DEFAULT_RTOL, Tolerances
from ditox_ci.engine.pool import DEFAULT_MEMORY_LIMIT_MB, available_memory_mb
from ditox_ci.engine.screen import SCREEN_MIN_MB
from ditox_ci.engine.shard import Shard
from ditox_ci.errors import ConfigError, UsageError
from ditox_ci.optimizers import load_optimizer
from ditox_ci.optimizers.install import Installation
from ditox_ci.options import resolve
from ditox_ci.sweep import setup
from ditox_ci.sweep.setup import PARENT_SHARE_MB, ReduceOptions, SweepOptions, worker_config

BUILD = Installation("onnxoptimizer", "onnxoptimizer", None, load_optimizer("onnxoptimizer").info)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"flags": {"shard": "2/4"}}, Shard(2, 4)),
        ({"env": {"INPUT_SHARD": " 1 / 3 "}}, Shard(1, 3)),
        ({"config": {"shard": "0/2"}}, Shard(0, 2)),
        ({}, Shard(0, 1)),
    ],
)
def test_the_shard_is_parsed_once_wherever_it_comes_from(source: dict, expected: Shard) -> None:
    shard = resolve(SweepOptions, **source).shard
    assert shard == expected and isinstance(shard, Shard)


@pytest.mark.parametrize(
    ("source", "error", "needle"),
    [
        ({"flags": {"shard": "4/4"}}, UsageError, "out of range; the index must be 0 … 3"),
        ({"flags": {"shard": "1/0"}}, UsageError, "out of range"),
        # from the environment or a config file, exit 3 naming where (it was exit 2, as a flag's)
        ({"env": {"DITOX_SHARD": "a/b"}}, ConfigError, "environment DITOX_SHARD: shard 'a/b' is not I/N"),
        ({"config": {"shard": "-1/3"}}, ConfigError, "config file: shard '-1/3' is not I/N"),
        ({"config": {"shard": "5/4"}}, ConfigError, "config file: shard '5/4' is out of range"),
    ],
)
def test_a_bad_shard_is_an_error_of_where_it_was_given_naming_the_form(
    source: dict, error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=needle):
        resolve(SweepOptions, **source)


def test_a_shard_out_of_range_cannot_be_built() -> None:
    with pytest.raises(UsageError, match="out of range"):
        Shard(2, 2)


def test_tolerances_not_given_are_left_to_each_dtype_and_are_float32_s_where_one_is_needed() -> None:
    tolerances = resolve(SweepOptions).tolerances
    assert tolerances == Tolerances(None, None)
    assert tolerances.oracle_options() == {"rtol": None, "atol": None}
    assert tolerances.scalar() == (DEFAULT_RTOL, DEFAULT_ATOL)


def test_a_tolerance_given_is_the_one_everything_uses() -> None:
    tolerances = resolve(SweepOptions, env={"INPUT_RTOL": "0.05"}).tolerances
    assert tolerances.oracle_options() == {"rtol": 0.05, "atol": None}
    assert tolerances.scalar() == (0.05, DEFAULT_ATOL)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_a_tolerance_that_would_pass_everything_cannot_be_built(value: float) -> None:
    with pytest.raises(UsageError, match="--atol must be a finite number"):
        Tolerances(atol=value)


def test_the_sweep_and_reduce_build_the_engine_s_settings_the_same_way() -> None:
    flags = {"rtol": 0.01, "timeout": 5.0}
    sweep = worker_config(resolve(SweepOptions, flags=flags), BUILD)
    reduce = worker_config(resolve(ReduceOptions, flags={**flags, "passes": "a,b"}), BUILD)
    assert sweep.settings.tolerances == reduce.settings.tolerances == Tolerances(0.01, None)
    assert sweep.timeout_s == reduce.timeout_s == 5.0
    # each command keeps its own defaults (reduce: two samples) over the same settings
    assert (sweep.settings.samples, reduce.settings.samples) == (1, 2)
    assert worker_config(resolve(SweepOptions), BUILD, timeout_s=2.0).timeout_s == 2.0


def test_screening_is_the_workers_setting_and_the_flag_or_environment_turns_it_off() -> None:
    assert worker_config(resolve(SweepOptions), BUILD).screen_min_mb == SCREEN_MIN_MB
    assert worker_config(resolve(SweepOptions, flags={"screen": "off"}), BUILD).screen_min_mb is None
    assert worker_config(resolve(SweepOptions, env={"DITOX_SCREEN": "off"}), BUILD).screen_min_mb is None


def test_reduce_takes_its_passes_as_a_comma_list_and_refuses_none() -> None:
    assert resolve(ReduceOptions, flags={"passes": "fuse_bn_into_conv, eliminate_identity"}).passes == (
        "fuse_bn_into_conv",
        "eliminate_identity",
    )
    with pytest.raises(UsageError, match="--passes is empty"):
        resolve(ReduceOptions, flags={"passes": " , "})
    with pytest.raises(UsageError, match="--budget must be > 0"):
        resolve(ReduceOptions, flags={"passes": "a", "budget": 0.0})
    with pytest.raises(ConfigError, match="unknown key 'shard'"):
        resolve(ReduceOptions, config={"passes": "a", "shard": "0/1"})


def test_a_memory_limit_given_caps_the_pool_and_none_lets_it_share_what_the_machine_has_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert available_memory_mb() > 0  # /proc/meminfo is readable here
    # the machine's free memory, fixed: another test's workers must not move the figure read
    monkeypatch.setattr(setup, "available_memory_mb", lambda: 20_000.0)
    given = worker_config(resolve(SweepOptions, env={"DITOX_MEMORY_LIMIT": "4608"}), BUILD)
    assert (given.memory_limit_mb, given.budget_mb) == (4608, 0)
    default = worker_config(resolve(SweepOptions), BUILD)
    assert (default.memory_limit_mb, default.budget_mb) == (DEFAULT_MEMORY_LIMIT_MB, 20_000 - PARENT_SHARE_MB)
    with pytest.raises(UsageError, match="--memory-limit must be positive"):
        resolve(SweepOptions, flags={"memory_limit": 0})
