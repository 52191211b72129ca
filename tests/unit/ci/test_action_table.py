"""The Action maps its inputs to the stages' flags from one table: every input of action.yml is
carried by a flag of the table or named as the Action's own, every flag of the table is one the
CLI's command takes, for the option of the same name, and what action.yml says an input of the
sweep's defaults to is that option's default."""

from __future__ import annotations

import dataclasses
import re

import yaml

from ditox_ci.ci.action import build_argv
from ditox_ci.ci.inputs import (
    ACTION_ONLY,
    BISECT_FLAGS,
    HISTORY_FLAGS,
    PUBLISH_FLAGS,
    SWEEP_FLAGS,
    ActionInputs,
    InputFlag,
)
from ditox_ci.cli.history import HistoryOptions
from ditox_ci.cli.publish import PublishSettings
from ditox_ci.options import resolve
from ditox_ci.sweep.setup import BisectOptions, SweepOptions
from tests.helpers import ROOT, option_names

INPUTS = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["inputs"]
TABLES = {
    "sweep": (SWEEP_FLAGS, SweepOptions),
    "publish": (PUBLISH_FLAGS, PublishSettings),
    "bisect": (BISECT_FLAGS, BisectOptions),
    "history": (HISTORY_FLAGS, HistoryOptions),
}


def test_every_input_of_action_yml_is_mapped_by_the_table_or_the_action_s_own() -> None:
    carried = {name for flags, _ in TABLES.values() for flag in flags for name in flag.inputs}
    assert set(INPUTS) == carried | set(ACTION_ONLY)
    assert not carried & set(ACTION_ONLY)
    assert set(INPUTS) == {field.name for field in dataclasses.fields(ActionInputs)}


# every input given, every switch on (reuse and carry, on by default, off); then every switch off
GIVEN = ActionInputs(
    models=("m",),
    configs=("c",),
    passes=("p",),
    base_optimizer="base",
    baseline="baseline.yml",
    previous="previous.json",
    reuse=False,
    carry=False,
    reuse_from="base.json",
    shard_count=2,
    rtol=0.1,
    atol=0.1,
    max_skipped=0.1,
    gate_tiers=("wrong-result",),
    gate_missed=True,
    jobs=1,
    runner="reference",
    timeout=1.0,
    exercise_budget=5.0,
    pr_number=1,
    file_issues=True,
    close_fixed=True,
    dry_run=True,
    untrusted=True,
    bisect_budget=30.0,
)
OFF = ActionInputs(comment=False, check=False)


def test_every_flag_of_the_table_is_the_command_s_option_of_that_name() -> None:
    for command, (flags, options) in TABLES.items():
        known = option_names(command)
        fields = {field.name for field in dataclasses.fields(options)}
        for flag in flags:
            for inputs in (GIVEN, OFF):
                argv = flag.argv(inputs)
                if argv:
                    assert argv[0] in known, (command, flag, argv)
                    assert known[argv[0]] in fields, (command, flag, argv)
            assert flag.argv(GIVEN), f"{flag.input} gives no flag even when set"


def test_an_input_the_table_carries_reaches_its_stage() -> None:
    flag = InputFlag("timeout")
    assert flag.argv(ActionInputs(timeout=9.0)) == ["--timeout", "9.0"]
    assert flag.argv(ActionInputs()) == []
    [sweep] = build_argv({"INPUT_MODE": "sweep", "INPUT_ATOL": "0.5", "INPUT_PASSES": "a, b"})
    assert sweep[sweep.index("--atol") + 1] == "0.5" and sweep[sweep.index("--passes") + 1] == "a,b"


def test_the_action_s_defaults_of_the_sweep_s_options_are_the_sweep_s() -> None:
    """An input's default (or the one its description states) is the sweep's own: the Action cannot
    sweep with another default than `ditox-ci sweep`, nor tell users another one."""
    defaults = resolve(SweepOptions, env={})
    stated = 0
    for flag in SWEEP_FLAGS:
        name = flag.input  # the shard's is two inputs of their own, no option's
        if name not in INPUTS or name not in {field.name for field in dataclasses.fields(SweepOptions)}:
            continue
        given = str(INPUTS[name].get("default", ""))
        if given:
            as_input = resolve(SweepOptions, env={f"INPUT_{name.upper()}": given})
            assert getattr(as_input, name) == getattr(defaults, name), name
            stated += 1
        said = re.search(r"\((?:default|empty:) ([0-9.]+)\b", INPUTS[name]["description"])
        if said:
            assert float(said.group(1)) == getattr(defaults, name), name
            stated += 1
    assert stated >= 6  # optimizer, reuse, gate_missed, runner, out; timeout's and exercise_budget's words
