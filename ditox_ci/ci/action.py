"""GitHub runner environment I/O for the Action: its inputs (`ci.inputs`) → the stages' commands,
outputs, the gate, and the runner of the stages (each stage's environment, signals, the hand-over
of what they wrote).

The Action holds no logic of its own (cibuildwheel's rule): every input but those in
`ACTION_ONLY` becomes a `ditox-ci` flag, and the verdict is read back from the report the CLI
wrote. The environment is passed in.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import subprocess
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from ditox_ci.ci.inputs import (
    BISECT_FLAGS,
    FETCHED,
    HISTORY_FLAGS,
    MODES,
    PUBLISH_FLAGS,
    REPORT_FILE,
    SWEEP_FLAGS,
    WORKFLOW_PREFIX,
    ActionInputs,
    InputFlag,
    read_inputs,
)
from ditox_ci.ci.leftovers import become_subreaper, end_leftovers
from ditox_ci.errors import OptimizerLoadError
from ditox_ci.optimizers.install import adapter_lock
from ditox_ci.report.kinds import FIXED, KNOWN, NEW
from ditox_ci.report.model import Report
from ditox_ci.safewrite import append_bytes, folder, written_or_input_error

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
    """pip commands that put a built-in adapter's optimizer (onnxsim, onnxscript, onnx-ir,
    onnxslim) into the image, as root like the rest of the image: the exact files of its lock
    (`data/adapters/<name>.lock`, every sha256 pinned, nothing resolved at job time). A build the
    workflow names (a wheel, a checkout, a requirement) is not installed here: the sweep stage
    installs it into a folder of its own, as the workspace's owner and without any credential in
    its environment (`ditox_ci.optimizers.install`)."""
    lock = adapter_lock(spec)
    if lock is None:
        return []
    pip = [python, SAFE_PATH_FLAG, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check"]
    return [[*pip, "--require-hashes", "--no-deps", "-r", str(lock)]]


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
    # builds releases or commits and runs them: as the workspace's owner, like the sweep
    "bisect": lambda inputs, python: [
        *_install(python, inputs.optimizer),
        _cli(python, _argv("bisect", BISECT_FLAGS, inputs)),
    ],
    # appends the night to the nights before it: needs no token, writes only into `out`
    "history": lambda inputs, python: [_cli(python, _argv("history", HISTORY_FLAGS, inputs))],
}


def _download_steps(inputs: ActionInputs, python: str) -> list[Step]:
    """A `ditox-ci previous` download for each report input given as `workflow:…` that a stage of
    the mode reads (`previous`: sweep and publish; `reuse_from`: the sweep)."""
    stages = MODES[inputs.mode]
    reads = {"previous": bool({"sweep", "publish", "history"} & set(stages)), "reuse_from": "sweep" in stages}
    steps = []
    for name, into in FETCHED.items():
        given = str(getattr(inputs, name))
        if not given.startswith(WORKFLOW_PREFIX) or not reads[name]:
            continue
        workflow, _, branch = given[len(WORKFLOW_PREFIX) :].partition("@")
        argv = ["previous", "--workflow", workflow, "--artifact", inputs.artifact, "--out", str(into)]
        steps.append(_cli(python, argv + (["--branch", branch] if branch else []), needs_token=True))
    return steps


def plan(inputs: ActionInputs, python: str) -> list[Step]:
    """Every command the mode runs, in order: the report downloads, optimizer installs and
    `ditox-ci` stages."""
    stages = [step for stage in MODES[inputs.mode] for step in STAGES[stage](inputs, python)]
    return [*_download_steps(inputs, python), *stages]


def runnable(step: Step) -> tuple[str, ...]:
    """The step's command as it runs now: without `--previous` (or `--reuse-from`) when its download
    found no earlier run (the first night), so the stages run as if no such report was named."""
    command = list(step.command)
    for into in FETCHED.values():
        fetched = str(into / REPORT_FILE)
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
# What a stage's environment may hold besides: the workflow's `env:` may carry any secret under any
# name (AWS_SECRET_ACCESS_KEY, HF_API_KEY, PYPI_PASSWORD, GH_PAT), so a stage gets only what it
# needs by name: the system's, the runner's description of the job, ditox-ci's own settings, what
# Python, pip (a checkout's build) and the numeric libraries read, and proxies.
_KEPT_NAMES = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "CI", "HOSTNAME"}
    | {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}
)
_KEPT_PREFIXES = ("LC_", "GITHUB_", "RUNNER_", "DITOX_", "PYTHON", "PIP_", "OMP_", "MKL_", "OPENBLAS_")
# the runner's file commands: what a step writes there changes the job's later steps (GITHUB_ENV
# can set LD_PRELOAD or BASH_ENV for upload-artifact, which holds the runtime token; GITHUB_PATH
# the programs they find; an unclosed heredoc in GITHUB_OUTPUT corrupts this Action's outputs)
FILE_COMMANDS = ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY")


def is_credential(name: str) -> bool:
    """A variable no stage but publish may see: inputs (the token is one), tokens, runtime services."""
    upper = name.upper()
    return (
        upper.startswith("INPUT_")
        or "TOKEN" in upper
        or (upper.startswith("ACTIONS_") and upper not in _KEPT_ACTIONS_VARIABLES)
    )


def kept(name: str) -> bool:
    """Whether a stage's environment keeps the variable `name` (never a credential, `is_credential`)."""
    if is_credential(name):
        return False
    return name in _KEPT_NAMES or name in _KEPT_ACTIONS_VARIABLES or name.startswith(_KEPT_PREFIXES)


def stage_env(inputs: ActionInputs, env: Mapping[str, str], step: Step) -> dict[str, str]:
    """A stage's environment: only what it needs by name (`kept`), no GitHub credential, except the
    token for the step that publishes (as GITHUB_TOKEN, never on a command line), and for a stage
    that runs the optimizer under test none of the runner's file commands (the entrypoint writes
    its step summary, `append_summary`); every Python it starts ignores the working directory."""
    child = {key: value for key, value in env.items() if kept(key)}
    if step.as_workspace_owner:
        for name in FILE_COMMANDS:
            child.pop(name, None)
    child["PYTHONSAFEPATH"] = "1"
    if step.needs_token and inputs.github_token:
        child["GITHUB_TOKEN"] = inputs.github_token
    return child


# The group ditox-ci's stages run in (Debian's nogroup): never the workspace's. On GitHub's runners
# the runner's user is in group `docker`, which owns both the workspace and the Docker socket the
# runner mounts into a container action; that group may command the host's Docker, and with it
# read this job's token from the container's environment.
STAGE_GID = 65534


def workspace_owner(workspace: Path) -> tuple[int, int] | None:
    """The uid and gid ditox-ci's stages run as: the workspace owner's uid in group STAGE_GID,
    when this process is root and the workspace is someone else's (a container action on GitHub's
    runners). The optimizer under test then cannot read root's processes (the entrypoint's
    environment still holds the token the runner passed it, /proc/1/environ) nor use what only
    root or a group may (the Docker socket the runner mounts), and what the stages write is the
    runner's later steps' (by its owner; `hand_over` gives the output folder the workspace's group)."""
    if os.geteuid() != 0:
        return None
    owner = workspace.stat()
    return None if owner.st_uid == 0 else (owner.st_uid, STAGE_GID)


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


# the file commands as root opens them: through no link, never blocking, and only regular files
_FILE_COMMAND_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class FileCommands:
    """What the runner's file commands held before a stage: each regular file's bytes by path."""

    held: Mapping[Path, bytes]

    @classmethod
    def read(cls, env: Mapping[str, str]) -> FileCommands:
        held = {}
        for name in FILE_COMMANDS:
            if env.get(name):
                with contextlib.suppress(OSError):
                    held[Path(env[name])] = _read_regular(Path(env[name]))
        return cls(held)

    def restore(self) -> list[Path]:
        """Put back every file a stage changed (the stage's own writes, by the optimizer under test
        or what it left running, do not survive it); the files put back."""
        restored = []
        for path, data in self.held.items():
            with contextlib.suppress(OSError):
                if _read_regular(path) == data:
                    continue
                with folder(path.parent) as folder_fd:
                    fd = os.open(path.name, os.O_WRONLY | _FILE_COMMAND_OPEN, dir_fd=folder_fd)
                with os.fdopen(fd, "wb") as sink:
                    if stat.S_ISREG(os.fstat(fd).st_mode):
                        os.ftruncate(fd, 0)
                        sink.write(data)
                        restored.append(path)
        return restored


def _read_regular(path: Path) -> bytes:
    with folder(path.parent) as folder_fd:
        fd = os.open(path.name, os.O_RDONLY | _FILE_COMMAND_OPEN, dir_fd=folder_fd)
    with os.fdopen(fd, "rb") as source:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"not a regular file: {path}")
        return source.read()


# the stages whose summary the entrypoint writes to the step summary (they get no GITHUB_STEP_SUMMARY)
SUMMARY_STAGES = ("ditox-ci sweep", "ditox-ci merge")


def stage_summary(step: Step, inputs: ActionInputs, started: float) -> str | None:
    """The summary a sweep or merge stage wrote for this run (`out/summary.md`, written since
    `started`), for the entrypoint to append to the step summary; None for another stage or when
    it wrote none."""
    if step.title not in SUMMARY_STAGES:
        return None
    path = Path(inputs.out) / "summary.md"
    with contextlib.suppress(OSError):
        if path.stat().st_mtime >= started:
            return _read_regular(path).decode("utf-8", "backslashreplace")
    return None


def gate(report: Report, fail_on: str) -> int:
    """The job's exit code for a finished report: 1 when its gate closes under `fail_on`."""
    return 1 if report.closes_gate(fail_on) else 0


def outputs(report: Report, path: Path) -> dict[str, str]:
    return {
        "new": str(report.count(NEW)),
        "known": str(report.count(KNOWN)),
        "fixed": str(report.count(FIXED)),
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
        try:
            append_bytes(Path(target), format_outputs(values).encode("utf-8"))
        except OSError as exc:
            raise written_or_input_error(Path(target), exc) from None


class StageRunner:
    """Runs the plan's commands one at a time and forwards a stop signal to the running one.

    The entrypoint is PID 1 in the container: without handlers, SIGTERM and SIGINT would never
    reach it, the stage would run on until the runner's SIGKILL, and nothing of it would be kept.
    Creating a runner installs the handlers, so create one per process.
    """

    def __init__(self) -> None:
        self.running: subprocess.Popen[bytes] | None = None
        self.stopped_by: int | None = None
        # processes the last stage left that would not end (`end_leftovers`): no later stage runs
        self.left_running = 0
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
            self.left_running = end_leftovers()

