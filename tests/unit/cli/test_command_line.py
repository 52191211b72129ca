"""What a command line pays before its first model: only the command it runs is imported, and the
workers' forkserver starts before that import, so their imports run beside each other. Fresh
processes, where nothing is imported or started yet."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from ditox_ci.__main__ import _runs_workers, build_parser
from ditox_ci.cli import NAMES


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_sweep_s_parser_imports_neither_pygithub_nor_requests() -> None:
    code = (
        "import sys\n"
        "from ditox_ci.__main__ import build_parser\n"
        "build_parser('sweep').parse_args(['sweep', '--models', 'm.onnx'])\n"
        "print(sorted({'github', 'requests', 'ditox_ci.cli.publish'} & set(sys.modules)))\n"
    )
    assert _fresh(code) == "[]"


def test_the_full_parser_still_has_every_command() -> None:
    parser = build_parser()
    (sub,) = (action for action in parser._actions if hasattr(action, "choices") and action.choices)
    assert tuple(sub.choices) == NAMES


def test_a_sweep_starts_its_forkserver_before_importing_the_command() -> None:
    code = (
        "import sys, multiprocessing.forkserver as server\n"
        "import ditox_ci.__main__ as cli\n"
        "seen = {}\n"
        "def spy(argv, env):\n"
        "    seen['forkserver'] = server._forkserver._forkserver_pid is not None\n"
        "    seen['imported'] = 'ditox_ci.cli.sweep' in sys.modules\n"
        "    return 0\n"
        "cli.main_inner = spy\n"
        "try:\n"
        "    cli.main(['sweep', '--models', 'm.onnx'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(seen)\n"
    )
    assert ast.literal_eval(_fresh(code)) == {"forkserver": True, "imported": False}


@pytest.mark.parametrize(
    ("argv", "runs"),
    [
        (["sweep", "--models", "m.onnx"], True),
        (["--debug", "fuzz"], True),
        (["reduce", "--model", "m.onnx"], True),
        (["sweep", "--help"], False),
        (["publish", "--report", "r.json"], False),
        (["corpus", "list"], False),
        (["--version"], False),
        ([], False),
    ],
)
def test_only_commands_that_run_workers_start_the_forkserver_early(argv: list[str], runs: bool) -> None:
    assert _runs_workers(argv) is runs
