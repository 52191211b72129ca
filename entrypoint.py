"""The Action's entrypoint: INPUT_* → `ditox-ci` stages; the exit code is the gate.

Thin on purpose: the mapping lives in `ditox_ci.ci.inputs` and `ditox_ci.ci.action`, the work in
the CLI (publish writes its part of the step summary; a sweep's or merge's, which run the
optimizer's code or its results with no file command in their environment, is appended here, and
whatever they wrote to the runner's file commands is put back). A stage that exits
with 2 or more (bad input, missing shard, GitHub refusing) stops the job with that code; exit 1
(new findings) does not, so the report is still published before the gate closes.

In the container this is PID 1, to which the kernel delivers only the signals it handles: SIGTERM
and SIGINT (a cancelled job) are forwarded to the running stage, and no later stage starts
(`action.StageRunner`).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from ditox_ci.ci import action
from ditox_ci.ci.inputs import FETCHED, ActionInputs, read_inputs, report_path
from ditox_ci.errors import EXIT_NEW_FINDINGS, FatalError, OptimizerLoadError
from ditox_ci.log import Log
from ditox_ci.report.model import read_report

# The stages run as `python -P -m ditox_ci` and must import this copy of the package.
HERE = Path(__file__).resolve().parent


def main() -> int:
    env = dict(os.environ)
    log = Log(env)
    log.mask(env.get("INPUT_GITHUB_TOKEN", ""))
    try:
        inputs = read_inputs(env)
    except FatalError as exc:
        log.error(str(exc))
        return exc.exit_code
    workspace = Path(env.get("GITHUB_WORKSPACE") or ".")
    try:
        return _run(inputs, env, log, workspace)
    finally:
        for written in (Path(inputs.out), *FETCHED.values()):
            action.hand_over(written, workspace)


def _run(inputs: ActionInputs, env: dict[str, str], log: Log, workspace: Path) -> int:
    stages = action.StageRunner()
    owner = action.workspace_owner(workspace)
    if owner is None and os.geteuid() == 0:
        log.warning(
            f"the workspace {workspace} is root's, so ditox-ci's stages and the optimizer under test "
            "run as root and could read the token the runner passed this container; check out into "
            "a workspace of the runner's user (docs/threat-model.md)"
        )
    for warning in action.wheel_warnings(inputs.optimizer, inputs.base_optimizer):
        log.warning(warning)
    for step in action.plan(inputs, sys.executable):
        child_env = action.stage_env(inputs, env, step)
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        # a stage that runs the optimizer under test leaves nothing in the runner's file commands
        before = action.FileCommands.read(env) if step.as_workspace_owner else None
        started = time.time()
        with log.group(step.title):
            code = stages.run(action.runnable(step), child_env, owner if step.as_workspace_owner else None)
        if before is not None:
            for path in before.restore():
                log.warning(f"{step.title} wrote to the runner's file command {path}; it is put back")
        summary = action.stage_summary(step, inputs, started)
        if summary is not None:
            log.summary(summary)
        if stages.left_running:
            log.error(
                f"{step.title} left {stages.left_running} processes that would not end; no later "
                "stage ran (the optimizer under test started them)"
            )
            return OptimizerLoadError.exit_code
        if stages.stopped_by is not None:
            name = signal.Signals(stages.stopped_by).name
            log.error(f"{step.title} stopped by {name}; no later stage ran")
            return code if code > EXIT_NEW_FINDINGS else 128 + stages.stopped_by
        if code > EXIT_NEW_FINDINGS or code < 0 or (code and step.failure_code is not None):
            log.error(f"{step.title} failed with exit code {code}; see the log above")
            return step.failure_code or (code if code > 0 else 128 - code)

    path = report_path(inputs)
    try:
        report = read_report(path)
        action.write_outputs(action.outputs(report, path), env)
    except FatalError as exc:
        log.error(str(exc))
        return exc.exit_code
    return action.gate(report, inputs.fail_on)


if __name__ == "__main__":
    sys.exit(main())
