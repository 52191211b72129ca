"""entrypoint.py run as the GitHub runner runs the container, and the folders and Pythons it runs in."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.helpers import ROOT, parse_github_output

EVENTS = Path(__file__).resolve().parents[1] / "events"
TOKEN = "ghs_integrationtesttoken0123456789"


def run_action(
    workspace: Path,
    event: str,
    python: str = sys.executable,
    runner_env: dict[str, str] | None = None,
    **inputs: str,
) -> tuple[subprocess.CompletedProcess[str], dict[str, str], str]:
    """Run the entrypoint in `workspace`; returns the process, its outputs and its step summary.
    `runner_env` adds variables the runner sets (credentials among them)."""
    run_dir = workspace / f"runner-{len(list(workspace.glob('runner-*')))}"
    run_dir.mkdir()
    output, summary = run_dir / "github_output", run_dir / "step_summary"
    commands = {name: run_dir / name.lower() for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_STATE")}
    for path in (output, summary, *commands.values()):
        path.touch()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workspace),
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_REPOSITORY": "onnx/optimizer",
        "GITHUB_API_URL": "http://127.0.0.1:9",
        "GITHUB_SERVER_URL": "http://127.0.0.1:9",
        "GITHUB_EVENT_NAME": event,
        "GITHUB_EVENT_PATH": str(EVENTS / f"{event}.json"),
        "GITHUB_SHA": "1111111111111111111111111111111111111111",
        "GITHUB_RUN_ID": "42",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        **{name: str(path) for name, path in commands.items()},
        "DITOX_CACHE": str(workspace / "cache"),
        "INPUT_GITHUB_TOKEN": TOKEN,
        "INPUT_JOBS": "1",
        **(runner_env or {}),
        **{f"INPUT_{name.upper()}": value for name, value in inputs.items()},
    }
    process = subprocess.run(
        [python, str(ROOT / "entrypoint.py")],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return process, parse_github_output(output.read_text()), summary.read_text()


# a sweep of the workspace's models/ folder in the default configuration, its gate never failing
SWEEP = {"mode": "sweep", "models": "models", "configs": "default", "fail_on": "never"}
# publish plans what it would do and sends nothing: no token, a dry run
OFFLINE_PUBLISH = {"dry_run": "true", "github_token": ""}


def run_sweep(
    workspace: Path,
    event: str = "pull_request",
    python: str = sys.executable,
    runner_env: dict[str, str] | None = None,
    **inputs: str,
) -> tuple[subprocess.CompletedProcess[str], dict[str, str], str]:
    """`run_action` with the inputs of `SWEEP`; `inputs` add to them or replace them."""
    return run_action(workspace, event, python, runner_env, **{**SWEEP, **inputs})


def onnx_optimizer_checkout(folder: Path) -> None:
    """The root of an onnx/optimizer clone: its source package, without the compiled extension
    a build puts there, beside the build files."""
    installed = Path(sysconfig.get_paths()["purelib"]) / "onnxoptimizer" / "__init__.py"
    package = folder / "onnxoptimizer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(installed.read_text())  # imports onnx_opt_cpp2py_export
    (package / "version.py").write_text("version = '0.0.0+checkout'\n")
    (package / "optimize.cc").write_text("// the C++ sources live here too\n")
    (folder / "third_party" / "onnx").mkdir(parents=True)
    (folder / "CMakeLists.txt").write_text("project(onnx_optimizer)\n")
    (folder / "setup.py").write_text("raise SystemExit('building the checkout is not this test')\n")
    (folder / "pyproject.toml").write_text("[build-system]\nrequires = ['setuptools']\n")


def venv_over_this_env(interpreter: str, venv: Path) -> str:
    """The Python of a new venv of `interpreter` at `venv` that sees the test environment's
    packages (ditox-ci's dependencies, pip) behind its own, through a .pth file."""
    subprocess.run([interpreter, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    own_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    shared_site = sysconfig.get_paths()["purelib"]
    Path(own_site, "shared-test-env.pth").write_text(f"import site; site.addsitedir({shared_site!r})\n")
    return str(python)
