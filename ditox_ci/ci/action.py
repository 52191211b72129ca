"""GitHub runner environment I/O for the Action: INPUT_* → CLI argv, outputs, the gate, and the
runner of the stages (each stage's environment, signals, the hand-over of what they wrote).

The Action holds no logic of its own (cibuildwheel's rule): every input becomes a `ditox-ci` flag,
and the verdict is read back from the report the CLI wrote. The environment is passed in.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from ditox_ci.ci.leftovers import become_subreaper, end_leftovers
from ditox_ci.engine.runner import RUNNER_CHOICES
from ditox_ci.errors import ConfigError, OptimizerLoadError
from ditox_ci.optimizers import ADAPTERS
from ditox_ci.optimizers.spec import parse_spec
from ditox_ci.options import resolve
from ditox_ci.report.kinds import kind_gates
from ditox_ci.report.model import Report
from ditox_ci.safeload import one_line


@dataclass(frozen=True)
class ActionInputs:
    """The inputs of action.yml, by the same snake_case names."""

    mode: str = "all"
    models: tuple[str, ...] = ()
    configs: tuple[str, ...] = ()
    passes: tuple[str, ...] = ()
    optimizer: str = "onnxoptimizer"
    base_optimizer: str = ""
    baseline: str = ""
    previous: str = ""
    shard_index: int = 0
    shard_count: int = 1
    rtol: float | None = None
    atol: float | None = None
    max_skipped: float | None = None
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


# Which CLI stages each mode runs, in order.
MODES: dict[str, tuple[str, ...]] = {
    "sweep": ("sweep",),
    "merge": ("merge",),
    "publish": ("publish",),
    "all": ("sweep", "publish"),
}


def _failing(report: Report, statuses: tuple[str, ...]) -> int:
    """Findings with one of `statuses` of a kind that gates: warnings never fail a job (as in
    `ditox-ci sweep`)."""
    return sum(1 for f in report.findings if f.status in statuses and kind_gates(f.kind))


# fail_on → how many findings make the job fail (exit code 1).
GATES: dict[str, Callable[[Report], int]] = {
    "new": lambda report: _failing(report, ("new",)),
    "any": lambda report: _failing(report, ("new", "known")),
    "never": lambda report: 0,
}

def read_inputs(env: Mapping[str, str]) -> ActionInputs:
    """Resolve and validate the INPUT_* variables; a bad value is a ConfigError naming the input."""
    inputs = resolve(ActionInputs, env={k: v for k, v in env.items() if k.startswith("INPUT_")})
    choices: dict[str, tuple[str, ...]] = {
        "mode": tuple(MODES),
        "fail_on": tuple(GATES),
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
    if "sweep" in MODES[inputs.mode]:  # what the sweep will say, said before anything is installed
        parse_spec(inputs.optimizer, "input optimizer:")
        if inputs.base_optimizer:
            parse_spec(inputs.base_optimizer, "input base_optimizer:")
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


# `-P`: the working directory (the workspace, maybe a PR's checkout of the optimizer with its
# source package `onnxoptimizer/`, maybe a planted `yaml.py`) never goes on the import path.
SAFE_PATH_FLAG = "-P"


def wheel_warnings(*specs: str) -> list[str]:
    """Why a wheel may not import in the image: one built on the runner (platform tag
    `linux_x86_64`, the runner's glibc) rather than a manylinux wheel from cibuildwheel."""
    return [
        f"{spec} is a plain linux wheel, built against the glibc of the machine that built it; the "
        "image has Debian bookworm's (2.36). If it does not import, build a manylinux wheel with "
        "cibuildwheel (docs/action.md, the examples)"
        for spec in specs
        if spec.endswith(".whl") and spec.rsplit("-", 1)[-1].startswith("linux_")
    ]


def install_commands(spec: str, python: str) -> list[list[str]]:
    """pip commands that put a built-in adapter's optimizer (onnxsim, onnxscript, onnx-ir) into
    the image, at the version ditox-ci's extra pins: ditox-ci's own dependencies, installed as root
    like the rest of the image. A build the workflow names (a wheel, a checkout, a requirement) is
    not installed here: the sweep stage installs it into a folder of its own, as the workspace's
    owner and without any credential in its environment (`ditox_ci.optimizers.install`)."""
    if spec not in ADAPTERS:
        return []
    pip = [python, SAFE_PATH_FLAG, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check"]
    return [[*pip, ADAPTERS[spec].requirement]]


SARIF_FILE = "ditox.sarif"
JUNIT_FILE = "junit.xml"


def report_path(inputs: ActionInputs) -> Path:
    return Path(inputs.out) / "report.json"


# `previous: workflow:<file>[@<branch>]` names the report of that workflow's last successful run:
# a first step downloads it here (it alone besides publish gets the token, for `actions: read`)
FETCHED_PREVIOUS = Path(".ditox-previous")
_WORKFLOW_PREFIX = "workflow:"


def previous_report(inputs: ActionInputs) -> str:
    """What the stages get as --previous: the input's path, or where the download puts it."""
    if inputs.previous.startswith(_WORKFLOW_PREFIX):
        return str(FETCHED_PREVIOUS / "report.json")
    return inputs.previous


def _value(flag: str, value: Any) -> list[str]:
    """`flag VALUE`, left out when the input is empty: the CLI's own default then holds."""
    return [] if value is None or value == "" or value == () else [flag, str(value)]


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
    InputFlag("baseline"),
    InputFlag("previous", value=previous_report),
    InputFlag("rtol"),
    InputFlag("atol"),
    InputFlag("max_skipped"),
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
    # code scanning and test-report tools read these; the outputs `sarif` and `junit` name them
    InputFlag("sarif", _given, value=_below_out(SARIF_FILE), reads=("out",)),
    InputFlag("junit", _given, value=_below_out(JUNIT_FILE), reads=("out",)),
    InputFlag("close_fixed", _switch),
    InputFlag("pr_number", flag="--pr"),
    InputFlag("untrusted", _when_on),
    InputFlag("dry_run", _when_on),
)
# The inputs no stage's flag carries, and where they go instead.
ACTION_ONLY = {
    "mode": "which stages run (MODES)",
    "reports": "the merge stage's arguments",
    "github_token": "the publishing stage's environment, never a command line",
    "fail_on": "the job's exit code (GATES)",
}


def _argv(command: str, flags: tuple[InputFlag, ...], inputs: ActionInputs) -> list[str]:
    return [command, *(arg for flag in flags for arg in flag.argv(inputs))]


def _merge_argv(inputs: ActionInputs) -> list[str]:
    return ["merge", *inputs.reports, "--out", inputs.out]


@dataclass(frozen=True)
class Step:
    """One command of the plan; `failure_code` replaces its exit code when it fails (pip's codes
    mean nothing to the user), None passes the CLI's own code through."""

    title: str
    command: tuple[str, ...]
    failure_code: int | None = None
    # the one stage that talks to GitHub gets the token; pip, the optimizer and the sweep never do
    needs_token: bool = False
    # ditox-ci's stages run as the workspace's owner (see `workspace_owner`); pip stays root, it
    # installs into the image's environment, and so does a stage with the token: a process the
    # optimizer left behind runs as the workspace's owner and could read that user's environments
    as_workspace_owner: bool = True


_CLI = (SAFE_PATH_FLAG, "-m", "ditox_ci")


def _cli(python: str, argv: list[str], needs_token: bool = False) -> Step:
    command = (python, *_CLI, *argv)
    return Step(f"ditox-ci {argv[0]}", command, needs_token=needs_token, as_workspace_owner=not needs_token)


def _install(python: str, spec: str) -> list[Step]:
    return [
        Step(f"install optimizer {spec}", tuple(cmd), OptimizerLoadError.exit_code, as_workspace_owner=False)
        for cmd in install_commands(spec, python)
    ]


def _sweep_steps(inputs: ActionInputs, python: str) -> list[Step]:
    return [*_install(python, inputs.optimizer), _cli(python, _argv("sweep", SWEEP_FLAGS, inputs))]


STAGES: dict[str, Callable[[ActionInputs, str], list[Step]]] = {
    "sweep": _sweep_steps,
    "merge": lambda inputs, python: [_cli(python, _merge_argv(inputs))],
    "publish": lambda inputs, python: [_cli(python, _argv("publish", PUBLISH_FLAGS, inputs), True)],
}


def _previous_steps(inputs: ActionInputs, python: str) -> list[Step]:
    if not inputs.previous.startswith(_WORKFLOW_PREFIX) or inputs.mode == "merge":
        return []
    workflow, _, branch = inputs.previous[len(_WORKFLOW_PREFIX) :].partition("@")
    argv = ["previous", "--workflow", workflow, "--out", str(FETCHED_PREVIOUS)]
    return [_cli(python, argv + (["--branch", branch] if branch else []), needs_token=True)]


def plan(inputs: ActionInputs, python: str) -> list[Step]:
    """Every command the mode runs, in order: the previous report's download, optimizer installs
    and `ditox-ci` stages."""
    stages = [step for stage in MODES[inputs.mode] for step in STAGES[stage](inputs, python)]
    return [*_previous_steps(inputs, python), *stages]


def runnable(step: Step) -> tuple[str, ...]:
    """The step's command as it runs now: without `--previous` when the download found no earlier
    run (the first night), so the stages run as if no previous report was named."""
    command = list(step.command)
    fetched = str(FETCHED_PREVIOUS / "report.json")
    if fetched in command and not Path(fetched).is_file():
        at = command.index(fetched)
        del command[at - 1 : at + 1]
    return tuple(command)


def build_argv(env: Mapping[str, str]) -> list[list[str]]:
    """One `ditox-ci` argv (without the program name) per CLI stage of the requested mode."""
    steps = plan(read_inputs(env), "python")
    prefix = 1 + len(_CLI)
    return [list(step.command[prefix:]) for step in steps if step.command[1:prefix] == _CLI]


# The runner hands a container action its job's credentials: the token, and the ACTIONS_* runtime
# token and URLs (cache, artifacts, OIDC). Debug switches are the only ACTIONS_* a stage keeps.
_KEPT_ACTIONS_VARIABLES = frozenset({"ACTIONS_STEP_DEBUG", "ACTIONS_RUNNER_DEBUG"})


def is_credential(name: str) -> bool:
    """A variable no stage but publish may see: inputs (the token is one), tokens, runtime services."""
    upper = name.upper()
    return (
        upper.startswith("INPUT_")
        or "TOKEN" in upper
        or (upper.startswith("ACTIONS_") and upper not in _KEPT_ACTIONS_VARIABLES)
    )


def stage_env(inputs: ActionInputs, env: Mapping[str, str], step: Step) -> dict[str, str]:
    """A stage's environment: no GitHub credential, except the token for the step that publishes
    (as GITHUB_TOKEN, never on a command line); every Python it starts ignores the working directory.
    """
    child = {key: value for key, value in env.items() if not is_credential(key)}
    child["PYTHONSAFEPATH"] = "1"
    if step.needs_token and inputs.github_token:
        child["GITHUB_TOKEN"] = inputs.github_token
    return child


def workspace_owner(workspace: Path) -> tuple[int, int] | None:
    """The uid and gid ditox-ci's stages run as: the workspace's owner, when this process is root
    and the workspace is someone else's (a container action on GitHub's runners). The optimizer
    under test then cannot read root's processes (the entrypoint's environment still holds the
    token the runner passed it, /proc/1/environ) nor use what only root may (the Docker socket the
    runner mounts), and what the stages write belongs to the runner's later steps."""
    if os.geteuid() != 0:
        return None
    owner = workspace.stat()
    return None if owner.st_uid == 0 else (owner.st_uid, owner.st_gid)


def hand_over(out: Path, workspace: Path) -> None:
    """Give the output folder to the workspace's owner (the container runs as root, the runner's
    later steps do not: they may add files to it, upload it and clean it up).

    Only inside the workspace, and symlinks are changed themselves, never followed: a planted
    `out -> /etc` must not hand anything else over.
    """
    if os.geteuid() != 0 or not out.exists():
        return
    owner = workspace.stat()
    root = out.resolve()
    if owner.st_uid == 0 or not root.is_relative_to(workspace.resolve()):
        return
    os.lchown(out, owner.st_uid, owner.st_gid)
    # by folder descriptor: a process the optimizer left behind may swap a folder for a link while
    # this walks, and a walk by path would then follow it (fwalk checks each folder it enters)
    for _folder, dirs, files, folder_fd in os.fwalk(root, follow_symlinks=False):
        for name in (*dirs, *files):
            # a file that process deletes meanwhile is nothing to hand over, and must not replace
            # the job's exit code with a traceback (this runs in the entrypoint's `finally`)
            with contextlib.suppress(FileNotFoundError):
                os.chown(name, owner.st_uid, owner.st_gid, dir_fd=folder_fd, follow_symlinks=False)
    os.lchown(root, owner.st_uid, owner.st_gid)


def gate(report: Report, fail_on: str) -> int:
    """The job's exit code for a finished report: 1 when it holds findings `fail_on` rejects."""
    return 1 if GATES[fail_on](report) else 0


def outputs(report: Report, path: Path) -> dict[str, str]:
    return {
        "new": str(report.count("new")),
        "known": str(report.count("known")),
        "fixed": str(report.count("fixed")),
        "report": str(path),
    }


def format_outputs(values: Mapping[str, str]) -> str:
    """`name<<DELIM` heredoc blocks: safe for any value, multi-line or not, with a random delimiter
    that no value can contain (GitHub's own toolkit does the same)."""
    blocks = []
    for name, value in values.items():
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        while delimiter in value:
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
        blocks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    return "".join(blocks)


def write_outputs(values: Mapping[str, str], env: Mapping[str, str]) -> None:
    """Append to $GITHUB_OUTPUT; outside a runner there is nowhere to write them, so skip."""
    target = env.get("GITHUB_OUTPUT")
    if target:
        with Path(target).open("a", encoding="utf-8") as handle:
            handle.write(format_outputs(values))


class StageRunner:
    """Runs the plan's commands one at a time and forwards a stop signal to the running one.

    The entrypoint is PID 1 in the container: without handlers, SIGTERM and SIGINT would never
    reach it, the stage would run on until the runner's SIGKILL, and nothing of it would be kept.
    Creating a runner installs the handlers, so create one per process.
    """

    def __init__(self) -> None:
        self.running: subprocess.Popen[bytes] | None = None
        self.stopped_by: int | None = None
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._forward)
        become_subreaper()

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        self.stopped_by = signum
        if self.running is not None and self.running.poll() is None:
            self.running.send_signal(signum)

    def run(self, command: tuple[str, ...], env: dict[str, str], user: tuple[int, int] | None = None) -> int:
        """The command's exit code; `user` (uid, gid) runs it as that user, with no other group."""
        if self.stopped_by is not None:  # the signal came between two stages
            return 128 + self.stopped_by
        identity: dict[str, Any] = {}
        if user is not None:
            identity = {"user": user[0], "group": user[1], "extra_groups": []}
        # its own process group: a Ctrl-C in a terminal reaches the stage once, through here
        self.running = subprocess.Popen(command, env=env, start_new_session=True, **identity)
        if self.stopped_by is not None:  # ... or while this one was being started
            self.running.send_signal(self.stopped_by)
        try:
            return self.running.wait()
        finally:
            self.running = None
            end_leftovers()

