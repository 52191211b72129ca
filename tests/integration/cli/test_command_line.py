"""What a command line pays before its first model, in fresh processes where nothing is imported
or started yet: only the command it runs is imported, and the workers' forkserver starts before
that import, so that their imports run beside each other."""

from __future__ import annotations

import ast
import subprocess
import sys


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_sweep_s_command_line_imports_neither_pygithub_nor_requests() -> None:
    """Through main_inner, as `ditox-ci sweep` parses its line (`--help` stops it there)."""
    code = (
        "import contextlib, io, sys\n"
        "from ditox_ci.__main__ import main_inner\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main_inner(['sweep', '--models', 'm.onnx', '--help'], {})\n"
        "print(sorted({'github', 'requests', 'ditox_ci.cli.publish'} & set(sys.modules)))\n"
    )
    assert _fresh(code) == "[]"


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
