"""The image under the conditions the examples do not show: GitHub out of reach, a cancelled job
(SIGTERM through `podman stop`, as the runner stops a container), and an optimizer built from a
source checkout whose setup.py looks for credentials."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from tests.helpers import ROOT
from tests.image.replay import RUNNER_UID, TOKEN, Runner, chown_tree, not_the_runners
from tests.image.test_examples import SCHEDULE
from tests.integration.github_fixtures import BUG_A, report, write


def _job_folder(runner: Runner, name: str) -> Path:
    base = runner.root / name
    for folder in ("workspace", "home", "workflow", "file_commands"):
        (base / folder).mkdir(parents=True)
    (base / "workflow" / "event.json").write_text(json.dumps(SCHEDULE.payload))
    return base


def test_publish_with_github_out_of_reach_is_one_line_and_exit_7(runner: Runner):
    base = _job_folder(runner, "offline")
    write(base / "workspace" / "ditox-report", "report.json", report(BUG_A))
    runner.api_url = "http://127.0.0.1:9"  # nothing listens there
    done = runner.action(base, "nightly.yml", SCHEDULE, 1, {"mode": "publish", "file_issues": "true"})
    assert done.code == 7, done.log[-3000:]
    (error,) = [line for line in done.log.splitlines() if line.startswith("ditox-ci: error")]
    assert "GitHub kept failing" in error and "re-run the job" in error
    assert "Traceback" not in done.log
    assert not not_the_runners(base / "workspace")


def test_a_cancelled_sweep_stops_at_once_and_keeps_the_models_that_finished(runner: Runner):
    base = _job_folder(runner, "cancelled")
    inputs = {"mode": "sweep", "models": "onnx-node,onnx-data", "configs": "default,fixed-point,nop,single"}
    runner.action(base, "nightly.yml", SCHEDULE, 1, inputs, background=True)
    log = base / "action.log"
    deadline = time.monotonic() + 600
    while "::group::sweep" not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
        time.sleep(1)
    time.sleep(20)
    started = time.monotonic()
    subprocess.run(["podman", "stop", "-t", "10", f"ditox-{base.name}"], check=True, capture_output=True)
    stopped_in = time.monotonic() - started
    code = runner.background.pop(base.name).wait(timeout=60)
    partial = json.loads((base / "workspace" / "ditox-report" / "report.json").read_text())
    assert partial["stats"]["interrupted"] is True
    assert partial["stats"]["interrupted_by"] == "SIGTERM"
    assert stopped_in < 10, "the entrypoint did not stop on SIGTERM: podman had to kill it"
    assert code == 143, log.read_text(errors="replace")[-3000:]  # 128 + SIGTERM, as the README says
    assert not not_the_runners(base / "workspace")


SETUP_PROBE = """
import os, pathlib
try:
    environ = pathlib.Path("/proc/1/environ").read_bytes()
except OSError:
    environ = b""
seen = b"INPUT_GITHUB_TOKEN" in environ or any("TOKEN" in name for name in os.environ)
pathlib.Path(__file__).with_name("SETUP-PROBE").write_text(f"{os.getuid()} {seen}")
from setuptools import setup
setup(name="probe-pkg", version="0.0.1", packages=["probe_pkg"])
"""


def test_a_source_checkout_builds_as_the_workspace_owner_and_sees_no_token(runner: Runner):
    base = _job_folder(runner, "checkout")
    workspace = base / "workspace"
    (workspace / "probe_pkg").mkdir()
    (workspace / "probe_pkg" / "__init__.py").write_text("X = 1\n")
    (workspace / "setup.py").write_text(SETUP_PROBE)
    (workspace / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    chown_tree(base)
    inputs = {"mode": "sweep", "models": "onnx-node:test_relu", "configs": "default", "optimizer": "."}
    done = runner.action(base, "nightly.yml", SCHEDULE, 1, inputs)
    uid, token_seen = (workspace / "SETUP-PROBE").read_text().split()
    assert (int(uid), token_seen) == (RUNNER_UID, "False")
    assert TOKEN not in (workspace / "SETUP-PROBE").read_text()
    # the build provides no optimizer ditox-ci knows: said in one line, exit 5
    assert done.code == 5 and "ditox-ci knows none of them" in done.log, done.log[-3000:]
    assert not not_the_runners(workspace), not_the_runners(workspace)[:5]



def test_a_builtin_adapter_is_installed_from_its_lock_and_swept(runner: Runner):
    """`optimizer: onnxslim`: root's pip installs the adapter's lock (every file hashed, nothing
    resolved at job time) into the image, and the sweep stage sweeps that release."""
    base = _job_folder(runner, "adapter")
    chown_tree(base)
    inputs = {"mode": "sweep", "models": "onnx-node:test_relu", "configs": "default", "optimizer": "onnxslim"}
    done = runner.action(base, "nightly.yml", SCHEDULE, 1, inputs)
    assert done.code in (0, 1), done.log[-3000:]
    assert "::group::install optimizer onnxslim" in done.log, done.log[-3000:]
    swept = json.loads((base / "workspace" / "ditox-report" / "report.json").read_text())
    # the lock's release, not PyPI's newest
    lock = (ROOT / "ditox_ci" / "data" / "adapters" / "onnxslim.lock").read_text()
    (pinned,) = re.findall(r"^onnxslim==(\S+)", lock, re.M)
    assert (swept["optimizer"]["name"], swept["optimizer"]["version"]) == ("onnxslim", pinned)
    assert not not_the_runners(base / "workspace")
