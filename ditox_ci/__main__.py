"""The `ditox-ci` command line: `main()` wraps a raising `main_inner()`.

Every FatalError becomes one line on stderr and its own exit code; tracebacks only with --debug.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Mapping, Sequence

from ditox_ci import __version__
from ditox_ci.cli import WORKER_COMMANDS, add_debug_flag, commands
from ditox_ci.engine.forkserver import warm_up
from ditox_ci.errors import FatalError, InternalError, Interrupted, UsageError

DESCRIPTION = """\
Differential testing of ONNX graph optimizers: each model runs original vs optimized in
ONNX Runtime (its own optimizations off), every difference becomes a finding pinned on the pass
that causes it, and findings are reported to GitHub without duplicates.

typical use:
  ditox-ci sweep --configs default,single --out ditox-report    # the main job
  ditox-ci corpus list --models onnx-node:test_conv*            # what a source selects
  ditox-ci publish --report ditox-report/report.json            # comment, check, issues

exit codes: 0 no new findings, 1 new findings or more skipped than --max-skipped (publish exits
0: its check carries the gate), 2 usage, 3 config, 4 input, 5 optimizer spec, install or load,
6 merge, 7 GitHub, 70 internal error (a bug in ditox-ci: please report it with --debug output),
130/143 interrupted
"""


HELP_FLAGS = ("-h", "--help", "--version")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see --help)")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of the command named `only` alone when it is one (then no
    other command's module is imported)."""
    parser = _Parser(
        prog="ditox-ci",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ditox-ci {__version__}")
    add_debug_flag(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in commands(only):
        sub_parser = sub.add_parser(
            command.NAME,
            help=command.HELP,
            description=getattr(command, "DESCRIPTION", command.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_debug_flag(sub_parser)
        command.add_arguments(sub_parser)
        sub_parser.set_defaults(run=command.run)
    return parser


def _command_named(arguments: Sequence[str]) -> str | None:
    """The command the command line names: its first argument that is not an option; None when the
    line asks for ditox-ci's own help or version before any command (`--help sweep` lists all)."""
    for argument in arguments:
        if argument in HELP_FLAGS:
            return None
        if not argument.startswith("-"):
            return argument
    return None


def main_inner(argv: Sequence[str], env: Mapping[str, str]) -> int:
    parser = build_parser(_command_named(argv))
    args = parser.parse_args(list(argv))
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return 2
    return int(args.run(args, env))


def _runs_workers(arguments: Sequence[str]) -> bool:
    """Whether the command line names a command that runs models in workers (and asks no help):
    its forkserver's imports (onnx, ONNX Runtime, numpy; 0.2-0.3 s) then run beside this
    process's import of the commands instead of after them."""
    asks_help = any(argument in HELP_FLAGS for argument in arguments)
    return _command_named(arguments) in WORKER_COMMANDS and not asks_help


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in arguments
    # Every Python this run starts (workers, their forkserver, pip, the base build's probe) keeps
    # the working directory off its import path: it may be a checkout of the optimizer under test,
    # whose source package `onnxoptimizer/` would shadow the installed build.
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        if _runs_workers(arguments):
            warm_up()
        code = main_inner(arguments, dict(os.environ))
    except FatalError as exc:
        if debug:
            traceback.print_exc()
        print(f"ditox-ci: error: {exc}", file=sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        print("ditox-ci: interrupted", file=sys.stderr)
        code = 130
    except Interrupted as exc:  # before anything finished: there is no report to write
        print(f"ditox-ci: {exc}", file=sys.stderr)
        code = exc.exit_code
    except (InternalError, Exception) as exc:  # a bug in ditox-ci itself
        if debug:
            traceback.print_exc()
        what = str(exc) if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"
        print(
            f"ditox-ci: internal error: {what} "
            "(a bug in ditox-ci; re-run with --debug and report the traceback)",
            file=sys.stderr,
        )
        code = InternalError.exit_code
    sys.exit(code)


if __name__ == "__main__":
    main()
