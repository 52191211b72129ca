"""entrypoint.py as the container runs it: as root, in a workspace that belongs to the runner's
user, and as the process a cancelled job's SIGTERM reaches.

There is no Docker engine here, so the entrypoint runs directly, as root, beside a user made for
the test that owns the workspace (the runner's `runner` user in GitHub's setup), with a Python that
user can run too (the image's is /usr/local/bin/python) and the runner's files (HOME, the outputs
and summary files) in a folder it owns, as the runner has them.
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

from tests.helpers import ROOT
from tests.integration.action_models import write_models
from tests.integration.ci.action_runs import EVENTS, venv_over_this_env
from tests.integration.github_server import GitHubServer

RUNNER_USER = "ditox-runner"

TOKEN = "ghs_containertesttoken0123456789abcdef"

# An optimizer that records who it runs as and what it can read of the root process above it (the
# entrypoint, PID 1 in the container, whose environment holds the token the runner passed it).
PRYING = """\
import os
from pathlib import Path

import onnxoptimizer

get_available_passes = onnxoptimizer.get_available_passes
get_fuse_and_elimination_passes = onnxoptimizer.get_fuse_and_elimination_passes


def _status(pid, field):
    line = next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith(field))
    return int(line.split()[1])


def _root_ancestor_environ():
    pid = os.getppid()
    while pid > 1 and _status(pid, "Uid:") != 0:
        pid = _status(pid, "PPid:")
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except PermissionError:
        return "denied"


def _opens(path):
    try:
        os.close(os.open(path, os.O_WRONLY))
    except PermissionError:
        return "denied"
    return "opened"


def optimize(model, passes, fixed_point):
    here = Path(__file__).resolve().parent
    socket = _opens((here / "socket-path.txt").read_text())
    seen = f"{os.getuid()} {os.getgid()} {os.getgroups()} {socket}\\n{_root_ancestor_environ()}"
    here.joinpath("optimizer-saw.txt").write_text(seen)
    return onnxoptimizer.optimize(model, list(passes), fixed_point)
"""

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


# An optimizer that leaves a process behind (double fork, new session: the workers' death signal
# does not reach it) which looks, as the runner's user, for a later stage's environment holding
# the token, and when it sees the publish stage run notes it and rewrites the sweep's report.
LINGERING = """\
import os
import time
from pathlib import Path

import onnxoptimizer

get_available_passes = onnxoptimizer.get_available_passes
get_fuse_and_elimination_passes = onnxoptimizer.get_fuse_and_elimination_passes
HERE = Path(__file__).resolve().parent


def _watch(token):
    os.closerange(3, 65536)
    (HERE / "watcher-pid").write_text(str(os.getpid()))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            try:
                # a publish stage of this workspace: another test's, elsewhere on the machine, is not it
                publishing = b"publish" in (entry / "cmdline").read_bytes()
                if publishing and os.readlink(entry / "cwd") == str(HERE):
                    (HERE / "watcher-saw-publish").touch()
                    (HERE / "ditox-report" / "report.json").write_text("{}")
                if token in (entry / "environ").read_bytes():
                    (HERE / "stolen-token").touch()
                    os._exit(0)
            except OSError:
                continue
        time.sleep(0.02)
    os._exit(0)


def optimize(model, passes, fixed_point):
    if not (HERE / "watcher-forked").exists():
        (HERE / "watcher-forked").touch()
        token = (HERE / "token-to-look-for").read_bytes()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                _watch(token)
            os._exit(0)
        os.wait()
    return onnxoptimizer.optimize(model, list(passes), fixed_point)
"""


def _as_root(argv: list[str], env: dict[str, str]) -> list[str]:
    """The command as root: directly when the tests are root, else through sudo (GitHub's runner)."""
    if os.geteuid() == 0:
        return argv
    return ["sudo", "-n", "env", "-i", *(f"{key}={value}" for key, value in env.items()), *argv]


def _as_runner(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """The command as the runner's user, as the kernel sees that user (no capability kept)."""
    if os.geteuid() != 0:
        argv = ["sudo", "-n", "-u", RUNNER_USER, *argv]
    identity = {} if os.geteuid() != 0 else {"user": RUNNER_USER, "group": RUNNER_USER, "extra_groups": []}
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, **identity)  # type: ignore[call-overload]
    except PermissionError as exc:  # the program itself is out of the user's reach
        return subprocess.CompletedProcess(argv, 126, "", str(exc))


@pytest.fixture(scope="module")
def runner_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(RUNNER_USER)
    except KeyError:
        subprocess.run(
            _as_root(["useradd", "--no-create-home", "--user-group", RUNNER_USER], {}), check=True
        )
        return pwd.getpwnam(RUNNER_USER)


def _runner_folder(runner_user: pwd.struct_passwd, prefix: str) -> Path:
    """A folder the runner's user owns, reachable by it (pytest's own tmp folders are not)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    folder.chmod(0o755)
    return folder


def _give(folder: Path, runner_user: pwd.struct_passwd) -> None:
    owner = f"{runner_user.pw_uid}:{runner_user.pw_gid}"
    subprocess.run(_as_root(["chown", "-R", owner, str(folder)], {}), check=True)


@pytest.fixture(scope="module")
def python(runner_user: pwd.struct_passwd) -> Iterator[str]:
    """A virtual environment of an interpreter the runner's user can run, seeing the test
    environment's packages (ditox-ci's dependencies, onnxoptimizer) through a .pth file."""
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3.11"):
        check = "import sys; assert sys.version_info[:2] == (3, 11)"
        if _as_runner([candidate, "-c", check]).returncode == 0:
            break
    else:
        raise AssertionError("no Python 3.11 the runner's user can run")
    folder = _runner_folder(runner_user, "ditox-python-")
    yield venv_over_this_env(candidate, folder / "venv")
    subprocess.run(_as_root(["rm", "-rf", str(folder)], {}), check=True)


@pytest.fixture()
def workspace(runner_user: pwd.struct_passwd) -> Iterator[Path]:
    folder = _runner_folder(runner_user, "ditox-workspace-")
    write_models(folder / "models")
    _give(folder, runner_user)
    yield folder
    subprocess.run(_as_root(["rm", "-rf", str(folder)], {}), check=True)


@pytest.fixture()
def run_dir(runner_user: pwd.struct_passwd) -> Iterator[Path]:
    """The runner's own files: HOME, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, all the runner user's."""
    folder = _runner_folder(runner_user, "ditox-runner-files-")
    for name in ("github_output", "step_summary"):
        (folder / name).touch()
    _give(folder, runner_user)
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
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(EVENTS / "pull_request.json"),
        "GITHUB_SHA": "1111111111111111111111111111111111111111",
        "GITHUB_OUTPUT": str(run_dir / "github_output"),
        "GITHUB_STEP_SUMMARY": str(run_dir / "step_summary"),
        "DITOX_CACHE": str(run_dir / "cache"),
        "INPUT_JOBS": "1",
        "INPUT_GITHUB_TOKEN": TOKEN,
        "ACTIONS_RUNTIME_TOKEN": "runtime-" + TOKEN,
        **{f"INPUT_{name.upper()}": value for name, value in inputs.items()},
    }


def _start(
    python: str, workspace: Path, run_dir: Path, log: Path, api_url: str = "http://127.0.0.1:9", **inputs: str
) -> tuple[subprocess.Popen[bytes], Path]:
    env = {**_action_env(workspace, run_dir, **inputs), "GITHUB_API_URL": api_url}  # default: nothing there
    with log.open("wb") as handle:
        process = subprocess.Popen(
            _as_root([python, str(ROOT / "entrypoint.py")], env),
            cwd=workspace,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    return process, log


def test_outputs_belong_to_the_workspace_owner_who_can_add_to_and_remove_them(
    python: str, workspace: Path, run_dir: Path, runner_user: pwd.struct_passwd, tmp_path: Path
) -> None:
    process, log = _start(
        python, workspace, run_dir, tmp_path / "log", mode="sweep", models="models", configs="default,single"
    )
    assert process.wait(timeout=300) == 0, log.read_text()
    out = workspace / "ditox-report"
    written = [out, *out.rglob("*")]
    assert len(written) > 3
    assert {(path.lstat().st_uid, path.lstat().st_gid) for path in written} == {
        (runner_user.pw_uid, runner_user.pw_gid)
    }
    # a later step adds a file as the runner's user, then what the runner's cleanup does
    note = _as_runner(["sh", "-c", f"echo 12 > {out}/note.txt"])
    assert note.returncode == 0, note.stderr
    removed = _as_runner(["rm", "-r", str(out)])
    assert removed.returncode == 0, removed.stderr


def test_the_optimizer_runs_as_the_workspace_owner_and_cannot_read_the_token_above_it(
    python: str, workspace: Path, run_dir: Path, runner_user: pwd.struct_passwd, tmp_path: Path
) -> None:
    (workspace / "prying.py").write_text(PRYING)
    # a stand-in for the Docker socket the runner mounts: root's, writable by the workspace's group
    # (on GitHub's runners `docker` owns both)
    socket = run_dir / "docker.sock"
    socket.touch()
    subprocess.run(_as_root(["chown", f"0:{workspace.stat().st_gid}", str(socket)], {}), check=True)
    subprocess.run(_as_root(["chmod", "660", str(socket)], {}), check=True)
    (workspace / "socket-path.txt").write_text(str(socket))
    process, log = _start(
        python, workspace, run_dir, tmp_path / "log",
        mode="sweep", models="models/relu.onnx", configs="default", optimizer="prying.py:optimize",
    )
    assert process.wait(timeout=300) == 0, log.read_text()
    identity, environ = (workspace / "optimizer-saw.txt").read_text().split("\n", 1)
    uid, gid, groups, socket_opened = identity.split(" ", 3)
    assert int(uid) == runner_user.pw_uid
    assert int(gid) != workspace.stat().st_gid and groups == "[]"
    assert socket_opened == "denied"
    assert environ == "denied"


def test_an_output_folder_linked_out_of_the_workspace_is_not_handed_over(
    python: str, workspace: Path, run_dir: Path, tmp_path: Path
) -> None:
    outside = Path(tempfile.mkdtemp(prefix="ditox-outside-", dir="/tmp"))
    outside.chmod(0o777)  # the stage may write there; root must not hand the folder over
    try:
        (workspace / "linked").symlink_to(outside)
        process, log = _start(
            python, workspace, run_dir, tmp_path / "log", mode="sweep", models="models", out="linked"
        )
        assert process.wait(timeout=300) == 0, log.read_text()
        assert (outside / "report.json").is_file()
        assert outside.stat().st_uid == os.geteuid()
    finally:
        subprocess.run(_as_root(["rm", "-rf", str(outside)], {}), check=True)


def test_sigterm_reaches_the_running_stage_and_no_later_stage_starts(
    python: str, workspace: Path, run_dir: Path, tmp_path: Path
) -> None:
    (workspace / "hanging.py").write_text(HANGING)
    process, log = _start(
        python,
        workspace,
        run_dir,
        tmp_path / "log",
        mode="all",  # sweep, then publish: publish must not start after the cancel
        models="models/relu.onnx",
        configs="default",
        optimizer="hanging.py:optimize",
        timeout="300",
        dry_run="true",
        github_token="",
    )
    marker = workspace / "optimizer-pid"
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


def test_a_process_the_optimizer_leaves_behind_cannot_read_the_token_of_the_publish_stage(
    python: str, workspace: Path, run_dir: Path, runner_user: pwd.struct_passwd, tmp_path: Path
) -> None:
    token = f"ghs_lingering{os.getpid()}x{time.monotonic_ns()}"
    (workspace / "lingering.py").write_text(LINGERING)
    (workspace / "token-to-look-for").write_text(token)
    _give(workspace, runner_user)
    with GitHubServer("onnx/optimizer") as server:
        server.open_pull(7, "1" * 40)
        server.tokens[token] = "write"
        server.identities[token] = "github-actions[bot]"
        process, log = _start(
            python,
            workspace,
            run_dir,
            tmp_path / "log",
            api_url=server.url,
            mode="all",
            models="models/relu.onnx",
            configs="default",
            optimizer="lingering.py:optimize",
            dry_run="true",
            github_token=token,
        )
        code = process.wait(timeout=300)
    watcher = workspace / "watcher-pid"
    try:
        assert code == 0, log.read_text()
        # it ran, and was killed when the sweep stage ended: it never saw publish nor its report
        assert watcher.is_file() and not Path(f"/proc/{watcher.read_text()}").exists(), log.read_text()
        assert not (workspace / "watcher-saw-publish").exists()
        assert json.loads((workspace / "ditox-report" / "report.json").read_text())["findings"] == []
        assert not (workspace / "stolen-token").exists()
    finally:
        if watcher.is_file():
            subprocess.run(_as_root(["kill", "-9", watcher.read_text()], {}), check=False)


def test_a_folder_of_the_corpus_the_user_may_not_read_is_a_model_skipped_with_why(
    python: str, workspace: Path, runner_user: pwd.struct_passwd
) -> None:
    """Walked as the workspace's owner, a folder it may not enter was left out without a word (the
    glob ignored it): its models were never judged and nothing said so."""
    locked = workspace / "models" / "locked"
    locked.mkdir()
    (locked / "hidden.onnx").write_bytes((workspace / "models" / "relu.onnx").read_bytes())
    subprocess.run(_as_root(["chown", "0:0", str(locked)], {}), check=True)
    subprocess.run(_as_root(["chmod", "000", str(locked)], {}), check=True)
    listed = _as_runner(
        [python, "-m", "ditox_ci", "corpus", "list", "--json", "--models", str(workspace / "models"),
         "--cache-dir", str(workspace / "cache")]
    )
    assert listed.returncode == 0, listed.stderr
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    assert "relu.onnx" in rows and "locked/hidden.onnx" not in rows
    assert rows["locked/"]["unavailable"] == "cannot read the folder locked: Permission denied"
