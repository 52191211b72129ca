"""The workspace is untrusted: the entrypoint runs in it as GitHub runs the container, and nothing
planted there may run, nor may the optimizer under test see a credential (threat model, items 1–2).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

from wheels import repack_installed

from tests.integration.action_models import write_models
from tests.integration.ci.action_runs import OFFLINE_PUBLISH, onnx_optimizer_checkout, run_sweep

# Each planted module leaves a mark before it raises, so even an import whose error something
# swallowed is seen.
PLANTED = """\
from pathlib import Path
Path(__file__).resolve().parent.joinpath("planted-{name}-ran").write_text("ran")
raise RuntimeError("planted {name} imported from the workspace")
"""

RUNNER_CREDENTIALS = {
    "GITHUB_TOKEN": "ghs_fromtheworkflowenv000000000000000",
    "ACTIONS_RUNTIME_TOKEN": "runtime-token",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-token",
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://oidc.invalid/token",
    "ACTIONS_CACHE_URL": "https://cache.invalid/",
}

# An optimizer that records which credential-like variables it can see, then optimizes for real.
SPY = """\
import json
import os
from pathlib import Path

import onnxoptimizer

SEEN = Path(__file__).resolve().parent / "optimizer-saw.json"


def optimize(model, passes, fixed_point):
    names = sorted(k for k in os.environ if "TOKEN" in k or k.startswith(("ACTIONS_", "INPUT_")))
    SEEN.write_text(json.dumps(names))
    return onnxoptimizer.optimize(model, list(passes), fixed_point)
"""


def _plant(folder: Path) -> None:
    (folder / "yaml.py").write_text(PLANTED.format(name="yaml"))
    package = folder / "onnxoptimizer"
    package.mkdir()
    (package / "__init__.py").write_text(PLANTED.format(name="onnxoptimizer"))


def test_modules_planted_in_the_workspace_never_run_in_any_stage(tmp_path: Path) -> None:
    write_models(tmp_path / "models")
    _plant(tmp_path)
    # mode all: the sweep (with its worker processes), then publish, which reads YAML
    process, outputs, _ = run_sweep(tmp_path, "release", mode="all", baseline="", **OFFLINE_PUBLISH)
    assert process.returncode == 0, process.stderr
    assert sorted(path.name for path in tmp_path.rglob("planted-*-ran")) == []
    assert outputs["report"] == "ditox-report/report.json"
    assert "would create check run" in process.stdout


def test_no_stage_but_publish_sees_a_credential(tmp_path: Path) -> None:
    write_models(tmp_path / "models")
    (tmp_path / "spy.py").write_text(SPY)
    process, _, _ = run_sweep(tmp_path, runner_env=RUNNER_CREDENTIALS, optimizer="spy.py:optimize")
    assert process.returncode == 0, process.stderr
    assert json.loads((tmp_path / "optimizer-saw.json").read_text()) == []


def test_the_action_sweeps_the_installed_wheel_inside_an_onnx_optimizer_checkout(
    tmp_path: Path, fresh_python: str
) -> None:
    workspace = tmp_path / "optimizer"
    onnx_optimizer_checkout(workspace)
    write_models(workspace / "models")
    wheel = repack_installed(workspace / "dist", "onnxoptimizer", "onnxoptimizer", "0.4.2+under.test")
    optimizer = str(wheel.relative_to(workspace))  # as the examples pass it: dist/<wheel>
    process, outputs, _ = run_sweep(workspace, python=fresh_python, optimizer=optimizer)
    assert process.returncode == 0, process.stderr
    report = json.loads((workspace / outputs["report"]).read_text())
    assert report["optimizer"]["version"] == "0.4.2+under.test"
    assert {model["status"] for model in report["models"]} == {"ok"}


# An optimizer that prints workflow commands when imported and when it runs, from Python and from
# native code (a C write to fd 1), as a PR's build could.
NOISY = """\
import ctypes
import os

import onnxoptimizer

print("::add-mask::imported")
print("  ::stop-commands::silenced", flush=True)
os.write(1, b"::warning title=forged::native print at import\\n")
get_available_passes = onnxoptimizer.get_available_passes
get_fuse_and_elimination_passes = onnxoptimizer.get_fuse_and_elimination_passes


def optimize(model, passes, fixed_point):
    print("::error::from the worker", flush=True)
    ctypes.CDLL(None).puts(b"::add-mask::native in the worker")
    return onnxoptimizer.optimize(model, list(passes), fixed_point)
"""


def test_what_the_optimizer_prints_never_reaches_the_log_as_a_command(tmp_path: Path) -> None:
    write_models(tmp_path / "models")
    (tmp_path / "noisy.py").write_text(NOISY)
    process, _, _ = run_sweep(tmp_path, optimizer="noisy.py:optimize")
    assert process.returncode == 0, process.stderr
    log = (process.stdout + process.stderr).splitlines()
    commands = [line for line in log if line.lstrip().startswith("::")]
    ours = ("::group::", "::endgroup::", "::notice::", "::warning::", "::error::", "::add-mask::ghs_")
    assert [line for line in commands if not line.startswith(ours)] == []
    assert not [line for line in commands if "imported" in line or "worker" in line or "forged" in line]
    assert "  | ::add-mask::imported" in log  # quoted, so it still shows


# An optimizer that writes the runner's file commands by their paths (it is given none of them:
# it finds them beside the workspace, as any process of the runner's user can).
WRITES_FILE_COMMANDS = """\
from pathlib import Path

import onnxoptimizer

RUNNER = Path(__file__).resolve().parent / "runner-0"


def optimize(model, passes, fixed_point):
    for name, line in (("github_env", "LD_PRELOAD=/tmp/evil.so"), ("github_path", "/tmp/evil-bin"),
                       ("github_output", "report<<EOF"), ("step_summary", "forged")):
        with open(RUNNER / name, "a") as sink:
            sink.write(line + "\\n")
    return onnxoptimizer.optimize(model, list(passes), fixed_point)
"""

# An optimizer that starts a chain of 130 processes, each the child of the one before, that would
# outlive its stage.
STARTS_A_CHAIN = """\
import subprocess
import time
from pathlib import Path

import onnxoptimizer

CHAIN = Path(__file__).resolve().parent / "chain.sh"
SCRIPT = "n=$1; if [ $n -gt 0 ]; then sh $0 $((n-1)) & fi; sleep 300"


def optimize(model, passes, fixed_point):
    if not CHAIN.exists():
        CHAIN.write_text(SCRIPT)
        subprocess.Popen(["sh", str(CHAIN), "130"], start_new_session=True)
        time.sleep(2)  # the whole chain is up before the stage ends
    return onnxoptimizer.optimize(model, list(passes), fixed_point)
"""


def _chain_processes() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"chain.sh" in (entry / "cmdline").read_bytes():
                found.append(entry.name)
        except OSError:
            continue
    return found


def test_what_the_optimizers_stage_writes_to_the_runners_file_commands_is_put_back(tmp_path: Path) -> None:
    """The optimizer's stage appended to GITHUB_ENV, GITHUB_PATH and GITHUB_OUTPUT (LD_PRELOAD for
    the job's later steps, upload-artifact among them; an unclosed heredoc in the Action's
    outputs). They are put back as they were before the stage, and the sweep's summary (which the
    entrypoint writes now) is the step summary."""
    write_models(tmp_path / "models")
    (tmp_path / "writes.py").write_text(WRITES_FILE_COMMANDS)
    process, outputs, summary = run_sweep(tmp_path, optimizer="writes.py:optimize")
    assert process.returncode == 0, process.stderr
    runner = tmp_path / "runner-0"
    assert (runner / "github_env").read_text() == "" and (runner / "github_path").read_text() == ""
    assert outputs["report"] == "ditox-report/report.json" and "EOF" not in outputs
    assert "forged" not in summary and "## ditox-ci sweep" in summary
    assert "wrote to the runner's file command" in process.stderr


def test_a_chain_of_processes_the_optimizer_starts_does_not_outlive_its_stage(tmp_path: Path) -> None:
    """Each process of a chain the entrypoint kills hands it the next: it gave up silently after
    100 rounds, and a 130-deep chain left 30 processes running into the next stage."""
    write_models(tmp_path / "models")
    (tmp_path / "chain.py").write_text(STARTS_A_CHAIN)
    try:
        process, _, _ = run_sweep(tmp_path, optimizer="chain.py:optimize")
        left = _chain_processes()
    finally:
        for pid in _chain_processes():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
    assert process.returncode == 0, process.stderr
    assert (tmp_path / "chain.sh").exists() and left == []
