"""The Action's entrypoint: INPUT_* → `ditox-ci` stages; the exit code is the gate.

Thin on purpose: the mapping lives in `ditox_ci.ci.action`, the work in the CLI (which also writes
the step summary). A stage that exits
with 2 or more (bad input, missing shard, GitHub refusing) stops the job with that code; exit 1
(new findings) does not, so the report is still published before the gate closes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ditox_ci.ci import action
from ditox_ci.errors import EXIT_NEW_FINDINGS, FatalError
from ditox_ci.log import Log
from ditox_ci.report.model import read_report

# The stages run as `python -m ditox_ci` and must import this copy of the package.
HERE = Path(__file__).resolve().parent


def main() -> int:
    env = dict(os.environ)
    log = Log(env)
    log.mask(env.get("INPUT_GITHUB_TOKEN", ""))
    try:
        inputs = action.read_inputs(env)
    except FatalError as exc:
        log.error(str(exc))
        return exc.exit_code
    child_env = action.stage_env(inputs, env)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))

    for step in action.plan(inputs, sys.executable):
        with log.group(step.title):
            code = subprocess.run(step.command, env=child_env).returncode
        if code > EXIT_NEW_FINDINGS or (code and step.failure_code is not None):
            log.error(f"{step.title} failed with exit code {code}; see the log above")
            return step.failure_code or code

    path = action.report_path(inputs)
    try:
        report = read_report(path)
    except FatalError as exc:
        log.error(str(exc))
        return exc.exit_code
    action.write_outputs(action.outputs(report, path), env)
    return action.gate(report, inputs.fail_on)


if __name__ == "__main__":
    sys.exit(main())
