"""The Action's inputs: action.yml's inputs as one frozen dataclass, read and checked through the
options resolver, what `mode` and `fail_on` mean, and the table that maps the other inputs to the
flags of the stages' commands (`SWEEP_FLAGS`, `PUBLISH_FLAGS`, `BISECT_FLAGS`, `HISTORY_FLAGS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ditox_ci.engine.runner import RUNNER_CHOICES
from ditox_ci.errors import ConfigError
from ditox_ci.optimizers import DEFAULT_OPTIMIZER
from ditox_ci.optimizers.spec import parse_spec
from ditox_ci.options import resolve
from ditox_ci.report.kinds import FAIL_ON
from ditox_ci.report.outputs import REPORT_ARTIFACT
from ditox_ci.safeload import one_line


@dataclass(frozen=True)
class ActionInputs:
    """The inputs of action.yml, by the same snake_case names."""

    mode: str = "all"
    models: tuple[str, ...] = ()
    configs: tuple[str, ...] = ()
    passes: tuple[str, ...] = ()
    optimizer: str = DEFAULT_OPTIMIZER
    base_optimizer: str = ""
    exercise_budget: float | None = None
    baseline: str = ""
    previous: str = ""
    reuse: bool = True
    carry: bool = True
    reuse_from: str = ""
    artifact: str = REPORT_ARTIFACT
    shard_index: int = 0
    shard_count: int = 1
    rtol: float | None = None
    atol: float | None = None
    max_skipped: float | None = None
    gate_tiers: tuple[str, ...] = ()
    gate_missed: bool = False
    jobs: int | None = None
    runner: str = "auto"
    timeout: float | None = None
    out: str = "ditox-report"
    reports: tuple[str, ...] = ()
    github_token: str = ""
    pr_number: int | None = None
    comment: bool = True
    file_issues: bool = False
    close_fixed: bool = False
    fail_on: str = "new"
    dry_run: bool = False
    untrusted: bool = False
    check: bool = True
    check_name: str = "ditox-ci"
    comment_key: str = "default"
    max_new_issues: int = 10
    bisect_budget: float | None = None


# Which CLI stages each mode runs, in order.
MODES: dict[str, tuple[str, ...]] = {
    "sweep": ("sweep",),
    "merge": ("merge",),
    "publish": ("publish",),
    "all": ("sweep", "publish"),
    "bisect": ("bisect",),
    "history": ("history",),
}


def read_inputs(env: Mapping[str, str]) -> ActionInputs:
    """Resolve and validate the INPUT_* variables; a bad value is a ConfigError naming the input."""
    inputs = resolve(ActionInputs, env={k: v for k, v in env.items() if k.startswith("INPUT_")})
    choices: dict[str, tuple[str, ...]] = {
        "mode": tuple(MODES),
        "fail_on": tuple(FAIL_ON),
        "runner": RUNNER_CHOICES,
    }
    for name, allowed in choices.items():
        value = getattr(inputs, name)
        if value not in allowed:
            raise ConfigError(
                f"input {name}: '{value}' is not one of {', '.join(allowed)}; fix the `with:` block"
            )
    if inputs.shard_count < 1 or not 0 <= inputs.shard_index < inputs.shard_count:
        raise ConfigError(
            f"inputs shard_index={inputs.shard_index} shard_count={inputs.shard_count}: the index "
            "must be 0 … shard_count-1 (use strategy.job-index and strategy.job-total)"
        )
    if inputs.mode == "all" and inputs.shard_count > 1:
        raise ConfigError(
            "mode 'all' publishes the report of one job, so it cannot run a shard; use mode "
            "'sweep' in the shard jobs and 'merge' then 'publish' in a job that needs them"
        )
    if inputs.mode == "merge" and not inputs.reports:
        raise ConfigError("mode 'merge' needs the `reports` input: the shard report folders")
    _refuse_option_like(inputs)
    if {"sweep", "bisect"} & set(MODES[inputs.mode]):  # said before anything is installed
        # as checked (stripped: a trailing newline of a YAML block once skipped the install step)
        optimizer = parse_spec(inputs.optimizer, "input optimizer:").text
        base = inputs.base_optimizer and parse_spec(inputs.base_optimizer, "input base_optimizer:").text
        inputs = replace(inputs, optimizer=optimizer, base_optimizer=base)
    return inputs


def _refuse_option_like(inputs: ActionInputs) -> None:
    """A value that starts with `-` would reach the CLI as an option of its own (`models:
    ok.onnx,--out=/x` set the sweep's out): `models` may be built from text a PR controls, such as
    its list of changed files. The token is no value of a command line."""
    for name, value in vars(inputs).items():
        values = value if isinstance(value, tuple) else (value,)
        for item in values:
            if name != "github_token" and isinstance(item, str) and item.startswith("-"):
                raise ConfigError(
                    f"input {name}: {one_line(item, 80)!r} starts with '-' and would be read as an "
                    "option; name a file that starts with '-' as ./NAME"
                )


SARIF_FILE = "ditox.sarif"
JUNIT_FILE = "junit.xml"


def report_path(inputs: ActionInputs) -> Path:
    return Path(inputs.out) / "report.json"


# `previous:` or `reuse_from:` as `workflow:<file>[@<branch>]` names the report of that workflow's
# last finished run: a first step downloads it into the input's folder (it alone besides publish
# gets the token, for `actions: read`)
FETCHED = {"previous": Path(".ditox-previous"), "reuse_from": Path(".ditox-reuse")}
# the report a download writes there
REPORT_FILE = "report.json"
WORKFLOW_PREFIX = "workflow:"


def _fetched_or_given(name: str) -> Callable[[ActionInputs], str]:
    """What the stages get for a report input: its path, or where its download puts it."""

    def report(inputs: ActionInputs) -> str:
        given = str(getattr(inputs, name))
        return str(FETCHED[name] / REPORT_FILE) if given.startswith(WORKFLOW_PREFIX) else given

    return report


previous_report = _fetched_or_given("previous")
reuse_report = _fetched_or_given("reuse_from")


def _value(flag: str, value: Any) -> list[str]:
    """`flag VALUE`, left out when the input is empty: the CLI's own default then holds."""
    return [] if value is None or value == "" else [flag, str(value)]


def _given(flag: str, value: Any) -> list[str]:
    return [flag, str(value)]


def _listed(flag: str, values: tuple[str, ...]) -> list[str]:
    return [flag, *values] if values else []


def _joined(flag: str, values: tuple[str, ...]) -> list[str]:
    return [flag, ",".join(values)] if values else []


def _switch(flag: str, on: bool) -> list[str]:
    return [flag if on else f"--no-{flag[2:]}"]


def _when_on(flag: str, on: bool) -> list[str]:
    return [flag] if on else []


def _when_off(flag: str, on: bool) -> list[str]:
    return [] if on else [f"--no-{flag[2:]}"]


@dataclass(frozen=True)
class InputFlag:
    """How inputs of action.yml reach a stage's command line: `form` turns the value into argv.

    The flag is `--<input>` unless named; the value is the input's own unless `value` derives it
    from the inputs (the shard from two inputs, a file's path below `out`). `reads` names the
    inputs it takes, which a test checks against action.yml."""

    input: str
    form: Callable[[str, Any], list[str]] = _value
    flag: str = ""
    value: Callable[[ActionInputs], Any] | None = None
    reads: tuple[str, ...] = ()

    def argv(self, inputs: ActionInputs) -> list[str]:
        value = self.value(inputs) if self.value is not None else getattr(inputs, self.input)
        return self.form(self.flag or f"--{self.input.replace('_', '-')}", value)

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.reads or (self.input,)


def _shard(inputs: ActionInputs) -> str:
    return f"{inputs.shard_index}/{inputs.shard_count}" if inputs.shard_count > 1 else ""


def _below_out(name: str) -> Callable[[ActionInputs], str]:
    return lambda inputs: str(Path(inputs.out) / name)


# In the order the stages' command lines give them.
SWEEP_FLAGS = (
    InputFlag("out", _given),
    InputFlag("optimizer", _given),
    InputFlag("models", _listed),
    InputFlag("configs", _joined),
    InputFlag("passes", _joined),
    InputFlag("shard", value=_shard, reads=("shard_index", "shard_count")),
    # the CLI installs each build into a folder of its own (`ditox_ci.optimizers.install`)
    InputFlag("base_optimizer"),
    InputFlag("exercise_budget"),
    InputFlag("baseline"),
    InputFlag("previous", value=previous_report),
    InputFlag("reuse", _when_off),
    InputFlag("carry", _when_off),
    InputFlag("reuse_from", value=reuse_report),
    InputFlag("rtol"),
    InputFlag("atol"),
    InputFlag("max_skipped"),
    InputFlag("gate_tiers", _joined),
    InputFlag("gate_missed", _when_on),
    InputFlag("jobs"),
    InputFlag("runner", value=lambda inputs: "" if inputs.runner == "auto" else inputs.runner),
    InputFlag("timeout"),
)
PUBLISH_FLAGS = (
    InputFlag("report", _given, value=lambda inputs: str(report_path(inputs)), reads=("out",)),
    # publish classifies again: with the sweep's baseline it lists that baseline's stale entries
    InputFlag("baseline"),
    InputFlag("previous", value=previous_report),
    InputFlag("comment", _switch),
    InputFlag("check", _switch),
    InputFlag("check_name", _given),
    InputFlag("comment_key", _given),
    InputFlag("file_issues", _switch),
    InputFlag("max_new_issues", _given),
    # the texts tell readers to download it; `previous: workflow:` downloads it (its own --artifact)
    InputFlag("artifact", _given),
    # code scanning and test-report tools read these; the outputs `sarif` and `junit` name them
    InputFlag("sarif", _given, value=_below_out(SARIF_FILE), reads=("out",)),
    InputFlag("junit", _given, value=_below_out(JUNIT_FILE), reads=("out",)),
    InputFlag("close_fixed", _switch),
    InputFlag("pr_number", flag="--pr"),
    InputFlag("untrusted", _when_on),
    InputFlag("dry_run", _when_on),
    # the check's conclusion follows the job's gate (the job's exit code reads it too)
    InputFlag("fail_on", _given),
)
BISECT_FLAGS = (
    InputFlag("report", _given, value=lambda inputs: str(report_path(inputs)), reads=("out",)),
    InputFlag("optimizer", _given),
    # over the optimizer's releases (wheels: nothing built); its commits need git and the
    # optimizer's compiler, which the runner has and the image has not (docs/bisect.md)
    InputFlag("bisect_budget", flag="--budget"),
    InputFlag("rtol"),
    InputFlag("atol"),
    InputFlag("runner", value=lambda inputs: "" if inputs.runner == "auto" else inputs.runner),
    InputFlag("timeout"),
)
HISTORY_FLAGS = (
    InputFlag("report", _given, value=lambda inputs: str(Path(inputs.out)), reads=("out",)),
    # the previous night's download holds its history.json beside its report.json
    InputFlag("previous", value=previous_report),
)
# The inputs no stage's flag carries, and where they go instead.
ACTION_ONLY = {
    "mode": "which stages run (MODES)",
    "reports": "the merge stage's arguments",
    "github_token": "the publishing stage's environment, never a command line",
}
