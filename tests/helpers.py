"""What test files in several folders share: paths, the CLI runner, a minimal report, the runner's
GITHUB_OUTPUT parser. Fixtures live in conftest.py files; helpers that take arguments live in
modules like this one, so no test module imports another."""

import argparse
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ditox_ci.__main__ import build_parser
from ditox_ci.report.model import Finding, ModelEntry, Report

ROOT = Path(__file__).resolve().parents[1]
# planted faulty optimizers: load one by path (`f"{FAKES / 'faulty_optimizers.py'}:optimize"`) or,
# as pytest puts this folder on sys.path, by module name (`localize_planted:pair_fault`)
FAKES = ROOT / "tests" / "fakes"


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`ditox-ci ARGS` in a subprocess of this Python, output captured."""
    command = [sys.executable, "-m", "ditox_ci", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def sweep(
    *args: str, out: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[int, dict[str, Any], str]:
    """`ditox-ci sweep --out OUT --quiet ARGS` (in `cwd`): its exit code, its report (empty when
    it wrote none) and its stderr."""
    proc = run_cli("sweep", "--out", str(out), "--quiet", *args, env=env, cwd=cwd)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return proc.returncode, report, proc.stderr


def minimal_report(*findings: Finding) -> Report:
    """The report of an unsharded sweep that records nothing but `findings`."""
    return Report(
        tool={"name": "ditox-ci", "version": "0"},
        optimizer={"name": "onnxoptimizer", "version": "0", "passes": [], "default_passes": []},
        environment={},
        shard={"index": 0, "count": 1},
        models=(),
        findings=findings,
        coverage={},
        stats={},
    )


def timed_report(costs: dict[str, float]) -> Report:
    """A `--previous` report that says only how long each model of `costs` took (`cost_s`): what
    the planner balances shards with."""
    models = tuple(
        ModelEntry(id=model, source=model.partition(":")[0], sha256="", cost_s=seconds)
        for model, seconds in costs.items()
    )
    return replace(minimal_report(), models=models)


def parse_github_output(text: str) -> dict[str, str]:
    """What the runner reads from GITHUB_OUTPUT: `name<<DELIMITER` blocks and `name=value` lines."""
    values: dict[str, str] = {}
    lines = iter(text.split("\n"))
    for line in lines:
        if not line:
            continue
        if "<<" not in line:
            name, _, value = line.partition("=")
            values[name] = value
            continue
        name, delimiter = line.split("<<", 1)
        body = []
        for body_line in lines:
            if body_line == delimiter:
                break
            body.append(body_line)
        else:
            raise AssertionError(f"output {name} not terminated")
        values[name] = "\n".join(body)
    return values


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The commands a parser of the CLI knows, each with its own parser."""
    (sub,) = (action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return sub.choices


def command_parser(command: str) -> argparse.ArgumentParser:
    """The CLI's own parser of `command` (`ditox-ci COMMAND …`), as the entry point builds it."""
    return subcommands(build_parser(command))[command]


def option_names(command: str) -> dict[str, str]:
    """`command`'s option strings, each with its option's name (argparse's dest)."""
    actions = command_parser(command)._actions
    return {flag: action.dest for action in actions for flag in action.option_strings}
