"""Subcommand registry. Each module defines NAME, HELP, add_arguments(parser), run(args, env)."""

from __future__ import annotations

from types import ModuleType

from ditox_ci.cli import baseline, corpus, fuzz, merge, previous, publish, reduce, sweep

COMMANDS: tuple[ModuleType, ...] = (sweep, merge, reduce, publish, previous, baseline, corpus, fuzz)
