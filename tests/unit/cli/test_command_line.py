"""Which commands a command line imports and which start the workers' forkserver early (the fresh
processes that show it are in tests/integration/cli/test_command_line.py)."""

from __future__ import annotations

import argparse

import pytest

from ditox_ci.__main__ import _command_named, _runs_workers, build_parser
from ditox_ci.cli import NAMES, WORKER_COMMANDS, commands
from tests.helpers import command_parser, subcommands


def _commands_in(parser: argparse.ArgumentParser) -> tuple[str, ...]:
    return tuple(subcommands(parser))


def test_the_full_parser_has_every_command_and_a_named_one_only_itself() -> None:
    assert _commands_in(build_parser()) == NAMES
    assert _commands_in(build_parser("sweep")) == ("sweep",)
    assert _commands_in(build_parser("no-such-command")) == NAMES  # its error lists the real ones


def test_the_commands_that_start_the_forkserver_early_are_those_that_run_a_worker_pool() -> None:
    """WORKER_COMMANDS is read before any command is imported; it must name the modules that
    start workers (through sweep_setup, or a WorkerPool of their own), no more and no fewer."""
    runs_workers = {
        command.NAME
        for command in commands()
        if hasattr(command, "sweep_setup") or hasattr(command, "WorkerPool")
    }
    assert runs_workers == WORKER_COMMANDS


@pytest.mark.parametrize(
    ("argv", "runs"),
    [
        (["sweep", "--models", "m.onnx"], True),
        (["--debug", "fuzz"], True),
        (["reduce", "--model", "m.onnx"], True),
        (["sweep", "--help"], False),
        (["--help", "sweep"], False),
        (["publish", "--report", "r.json"], False),
        (["corpus", "list"], False),
        (["--version"], False),
        ([], False),
    ],
)
def test_only_commands_that_run_workers_start_the_forkserver_early(argv: list[str], runs: bool) -> None:
    assert _runs_workers(argv) is runs


def test_help_before_a_command_is_ditox_cis_own_help_listing_every_command() -> None:
    assert _command_named(["--help", "sweep"]) is None and _command_named(["-h"]) is None
    assert _command_named(["--debug", "sweep", "--help"]) == "sweep"


def test_fuzz_help_says_what_the_sweeps_options_mean_for_fuzz() -> None:
    """fuzz takes the sweep's options, but its --out default, --configs default and --passes differ."""
    text = " ".join(command_parser("fuzz").format_help().split())
    assert "(default ditox-fuzz)" in text and "ditox-report" not in text
    assert "default,fixed-point,nop,single" not in text
    assert "the passes to generate models for" in text and "exactly this pass list" not in text


@pytest.mark.parametrize(
    "argv",
    [
        ["baseline", "init", "--baseline", "b.yml", "--debug"],
        ["baseline", "--debug", "update", "--report", "r.json", "--baseline", "b.yml"],
        ["--debug", "corpus", "list"],
        ["corpus", "list", "--models", "m.onnx", "--debug"],
        ["sweep", "--debug"],
    ],
)
def test_debug_is_taken_wherever_it_is_given(argv: list[str]) -> None:
    """An internal error says "re-run with --debug": after `baseline init` or `corpus list` the
    flag was an unknown argument (exit 2)."""
    assert build_parser().parse_args(argv).debug is True


def test_reduce_takes_the_sweeps_judging_settings_as_flags() -> None:
    """They reached reduce only through DITOX_* variables, which its --help did not say."""
    from ditox_ci.cli import reduce
    from ditox_ci.options import resolve
    from ditox_ci.sweep.setup import ReduceOptions

    argv = ["m.onnx", "--passes", "a", "--calibrate", "off", "--runner", "reference"]
    argv += ["--comparator", "classification", "--dynamic-dim", "3", "--memory-limit", "1024"]
    argv += ["--cache-dir", "/tmp/ditox-cache"]
    args = command_parser("reduce").parse_args(argv)
    options = resolve(ReduceOptions, flags=reduce.flags_of(args), env={})
    assert (options.calibrate, options.runner, options.comparator) == (False, "reference", "classification")
    assert (options.dynamic_dim, options.memory_limit, options.cache_dir) == (3, 1024, "/tmp/ditox-cache")
