"""Subcommand registry. Each module defines NAME, HELP, add_arguments(parser), run(args, env).

A module is imported when it is asked for: a command line imports the command it runs and no other
(`sweep` does not import PyGithub, which `publish` needs to build its options).
"""

from __future__ import annotations

import importlib
from types import ModuleType

NAMES = ("sweep", "merge", "reduce", "publish", "previous", "baseline", "corpus", "fuzz")
# those whose models run in workers: the command line starts their forkserver before importing them
WORKER_COMMANDS = frozenset({"sweep", "fuzz", "reduce"})


def commands(only: str | None = None) -> tuple[ModuleType, ...]:
    """The command modules in `NAMES`' order, or the one named `only` when that is one of them."""
    names = (only,) if only in NAMES else NAMES
    return tuple(importlib.import_module(f"ditox_ci.cli.{name}") for name in names)
