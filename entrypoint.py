"""The Action's entrypoint: INPUT_* → `ditox-ci` stages; the exit code is the gate.

Thin on purpose: the mapping lives in `ditox_ci.action`, the work in the CLI. A stage that exits
with 2 or more (bad input, missing shard, GitHub refusing) stops the job with that code; exit 1
(new findings) does not, so the report is still published before the gate closes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ditox_ci import action
from ditox_ci.errors import EXIT_NEW_FINDINGS, FatalError, OptimizerLoadError
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

    for command in action.install_commands(inputs, sys.executable):
        with log.group(f"install optimizer under test: {inputs.optimizer}"):
            if subprocess.run(command, env=child_env).returncode != 0:
                log.error(f"could not install optimizer '{inputs.optimizer}'; check the input")
                return OptimizerLoadError.exit_code

    for argv in action.stage_argv(inputs):
        with log.group(f"ditox-ci {argv[0]}"):
            code = subprocess.run(
                [sys.executable, "-m", "ditox_ci", *argv], env=child_env
            ).returncode
        if code > EXIT_NEW_FINDINGS:
            log.error(f"ditox-ci {argv[0]} failed with exit code {code}; see the log above")
            return code

    path = action.report_path(inputs)
    try:
        report = read_report(path)
    except FatalError as exc:
        log.error(str(exc))
        return exc.exit_code
    action.write_outputs(action.outputs(report, path), env)
    summary = path.parent / "summary.md"
    if summary.is_file():
        log.summary(summary.read_text(encoding="utf-8"))
    return action.gate(report, inputs.fail_on)


if __name__ == "__main__":
    sys.exit(main())
