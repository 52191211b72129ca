"""entrypoint.py as the container runs it: as root, in a workspace that belongs to the runner's
user, and as the process a cancelled job's SIGTERM reaches.

There is no Docker engine here, so the entrypoint runs directly, as root, beside a user made for
the test that owns the workspace (the runner's `runner` user in GitHub's setup).
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from action_models import write_models

ROOT = Path(__file__).resolve().parents[2]
EVENTS = Path(__file__).resolve().parent / "events"
RUNNER_USER = "ditox-runner"

# An optimizer that says where it runs, then hangs like a stuck pass until it is killed.
HANGING = """\
import os
import time
from pathlib import Path


def optimize(model, passes, fixed_point):
    Path(__file__).resolve().parent.joinpath("optimizer-pid").write_text(str(os.getpid()))
    time.sleep(600)
    return model
"""


def _as_root(argv: list[str], env: dict[str, str]) -> list[str]:
    """The command as root: directly when the tests are root, else through sudo (GitHub's runner)."""
    if os.geteuid() == 0:
        return argv
    return ["sudo", "-n", "env", "-i", *(f"{key}={value}" for key, value in env.items()), *argv]


def _as_runner(argv: list[str]) -> subprocess.CompletedProcess[str]:
    prefix = ["setpriv", "--reuid", RUNNER_USER, "--regid", RUNNER_USER, "--clear-groups"]
    if os.geteuid() != 0:
        prefix = ["sudo", "-n", "-u", RUNNER_USER]
    return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def runner_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(RUNNER_USER)
    except KeyError:
        subprocess.run(
            _as_root(["useradd", "--no-create-home", "--user-group", RUNNER_USER], {}), check=True
        )
        return pwd.getpwnam(RUNNER_USER)


@pytest.fixture()
def workspace(runner_user: pwd.struct_passwd) -> Iterator[Path]:
    """A workspace the runner's user owns, reachable by it (pytest's own tmp folders are not)."""
    folder = Path(tempfile.mkdtemp(prefix="ditox-workspace-", dir="/tmp"))
    write_models(folder / "models")
    subprocess.run(
        _as_root(["chown", "-R", f"{runner_user.pw_uid}:{runner_user.pw_gid}", str(folder)], {}), check=True
    )
    folder.chmod(0o755)
    yield folder
    subprocess.run(_as_root(["rm", "-rf", str(folder)], {}), check=True)


def _action_env(workspace: Path, run_dir: Path, **inputs: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(run_dir),
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_REPOSITORY": "onnx/optimizer",
        "GITHUB_API_URL": "http://127.0.0.1:9",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(EVENTS / "pull_request.json"),
        "GITHUB_SHA": "1111111111111111111111111111111111111111",
        "GITHUB_OUTPUT": str(run_dir / "github_output"),
        "GITHUB_STEP_SUMMARY": str(run_dir / "step_summary"),
        "DITOX_CACHE": str(run_dir / "cache"),
        "INPUT_JOBS": "1",
        "INPUT_GITHUB_TOKEN": "",
        **{f"INPUT_{name.upper()}": value for name, value in inputs.items()},
    }


def _start(workspace: Path, tmp_path: Path, **inputs: str) -> tuple[subprocess.Popen[bytes], Path]:
    env = _action_env(workspace, tmp_path, **inputs)
    log = tmp_path / "entrypoint.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(
            _as_root([sys.executable, str(ROOT / "entrypoint.py")], env),
            cwd=workspace,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    return process, log


def test_outputs_belong_to_the_workspace_owner_who_can_add_to_and_remove_them(
    workspace: Path, runner_user: pwd.struct_passwd, tmp_path: Path
) -> None:
    process, log = _start(
        workspace, tmp_path, mode="sweep", models="models", configs="default,single", fail_on="never"
    )
    assert process.wait(timeout=300) == 0, log.read_text()
    out = workspace / "ditox-report"
    written = [out, *out.rglob("*")]
    assert len(written) > 3
    assert {(path.lstat().st_uid, path.lstat().st_gid) for path in written} == {
        (runner_user.pw_uid, runner_user.pw_gid)
    }
    # what pr-fork.yml does next as the runner's user, then what the runner's cleanup does
    note = _as_runner(["sh", "-c", f"echo 12 > {out}/pr-number.txt"])
    assert note.returncode == 0, note.stderr
    removed = _as_runner(["rm", "-r", str(out)])
    assert removed.returncode == 0, removed.stderr


def test_an_output_folder_linked_out_of_the_workspace_is_not_handed_over(
    workspace: Path, tmp_path: Path
) -> None:
    outside = Path(tempfile.mkdtemp(prefix="ditox-outside-", dir="/tmp"))
    try:
        (workspace / "linked").symlink_to(outside)
        process, log = _start(
            workspace, tmp_path, mode="sweep", models="models", configs="default", out="linked"
        )
        assert process.wait(timeout=300) == 0, log.read_text()
        assert (outside / "report.json").is_file()
        assert {path.stat().st_uid for path in [outside, *outside.rglob("*")]} == {os.geteuid()}
    finally:
        subprocess.run(_as_root(["rm", "-rf", str(outside)], {}), check=True)


def test_sigterm_reaches_the_running_stage_and_no_later_stage_starts(workspace: Path, tmp_path: Path) -> None:
    hanging = tmp_path / "hanging.py"
    hanging.write_text(HANGING)
    hanging.chmod(0o644)
    process, log = _start(
        workspace,
        tmp_path,
        mode="all",  # sweep, then publish: publish must not start after the cancel
        models="models/relu.onnx",
        configs="default",
        optimizer=f"{hanging}:optimize",
        timeout="300",
        dry_run="true",
    )
    marker = tmp_path / "optimizer-pid"
    deadline = time.monotonic() + 120
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), log.read_text()
    optimizer_pid = int(marker.read_text())

    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    text = log.read_text()
    assert code == 128 + signal.SIGTERM, text
    assert time.monotonic() - started < 30
    assert "stopped by SIGTERM" in text
    assert "::group::ditox-ci publish" not in text
    deadline = time.monotonic() + 10
    while Path(f"/proc/{optimizer_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{optimizer_pid}").exists(), "the hanging optimizer outlived the stage"
    report = json.loads((workspace / "ditox-report" / "report.json").read_text())
    assert report["stats"].get("interrupted")
