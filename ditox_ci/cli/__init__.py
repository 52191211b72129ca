"""Subcommand registry. Each module defines NAME, HELP, add_arguments(parser), run(args, env).

A module is imported when it is asked for: a command line imports the command it runs and no other
(`sweep` does not import PyGithub, which `publish` needs to build its options).
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType

NAMES = ("sweep", "merge", "reduce", "publish", "previous", "history", "baseline", "corpus", "fuzz", "bisect")
# those whose models run in workers: the command line starts their forkserver before importing them
WORKER_COMMANDS = frozenset({"sweep", "fuzz", "reduce", "bisect"})


def commands(only: str | None = None) -> tuple[ModuleType, ...]:
    """The command modules in `NAMES`' order, or the one named `only` when that is one of them."""
    names = (only,) if only in NAMES else NAMES
    return tuple(importlib.import_module(f"ditox_ci.cli.{name}") for name in names)


def add_action(
    actions: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str, description: str
) -> argparse.ArgumentParser:
    """A command's action (`baseline init`, `corpus list`): its parser, with its description as
    written (examples keep their lines) and `--debug`."""
    parser: argparse.ArgumentParser = actions.add_parser(
        name, help=help, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_debug_flag(parser)
    return parser


def add_debug_flag(parser: argparse.ArgumentParser) -> None:
    """`--debug` on ditox-ci itself, a command or a command's action (`baseline init`), wherever it
    is given (the entry point reads it from the command line: tracebacks for errors)."""
    parser.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for errors"
    )
