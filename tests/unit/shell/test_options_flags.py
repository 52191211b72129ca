"""Each option is declared once (`ditox_ci.options.option`): the commands' flags are made from the
declarations, so every option of a command that runs models has its flag, a command that takes
fewer names those it leaves out, a flag's choices are the declaration's one list, and the default
a help states is the one the option holds (given as the flag, it changes nothing)."""

from __future__ import annotations

import argparse
import dataclasses
import re
from typing import Any

import pytest

from ditox_ci.cli import bisect, fuzz, reduce
from ditox_ci.cli.corpus import CorpusListOptions
from ditox_ci.cli.publish import PublishSettings
from ditox_ci.engine.runner import RUNNER_CHOICES
from ditox_ci.errors import ConfigError, UsageError
from ditox_ci.options import ON_OFF, resolve
from ditox_ci.pinpoint.pinpointer import LOCALIZE_MODES
from ditox_ci.sweep.setup import BisectOptions, FuzzOptions, ReduceOptions, SweepOptions
from tests.helpers import command_parser, subcommands

# command: its options, the options it takes no flag for, and the least command line it takes
COMMANDS: dict[str, tuple[type, tuple[str, ...], list[str]]] = {
    "sweep": (SweepOptions, (), []),
    "fuzz": (FuzzOptions, fuzz.NOT_FLAGS, []),
    "reduce": (ReduceOptions, reduce.NOT_FLAGS, ["m.onnx", "--passes", "p"]),
    "bisect": (BisectOptions, bisect.NOT_FLAGS, []),
    # publish's options, its surfaces' among them, and `corpus list`'s
    "publish": (PublishSettings, (), []),
    "corpus list": (CorpusListOptions, (), []),
}


def _parser(command: str) -> argparse.ArgumentParser:
    name, _, action = command.partition(" ")
    parser = command_parser(name)
    return subcommands(parser)[action] if action else parser


def _declared(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {item.name: item for item in dataclasses.fields(cls) if "help" in item.metadata}


def _flags(command: str) -> dict[str, argparse.Action]:
    """The command's flags for the options its class declares, by option name."""
    cls = COMMANDS[command][0]
    return {action.dest: action for action in _parser(command)._actions if action.dest in _declared(cls)}


def _help(action: argparse.Action) -> str:
    return " ".join(str(action.help).split())


@pytest.mark.parametrize("command", ["sweep", "fuzz", "reduce", "bisect"])
def test_every_option_of_a_command_that_runs_models_is_declared_with_its_flag(command: str) -> None:
    cls, _, _ = COMMANDS[command]
    assert set(_declared(cls)) == {item.name for item in dataclasses.fields(cls)}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_declared_option_has_a_flag_but_those_the_command_leaves_out(command: str) -> None:
    cls, left_out, _ = COMMANDS[command]
    assert set(left_out) <= set(_declared(cls)), "a name left out that is no option"
    assert set(_flags(command)) == set(_declared(cls)) - set(left_out)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_help_states_the_default_the_option_holds(command: str) -> None:
    """Given as its flag, the default a help states changes nothing: the help cannot drift from
    the declaration. A default in words (`default_text`) ends the help as declared, and no help
    states a default twice (one typed into it besides the one appended)."""
    cls, _, least = COMMANDS[command]
    parser = _parser(command)
    declared = _declared(cls)
    expected = resolve(cls, flags=vars(parser.parse_args(least)), env={})
    stated = 0
    for name, action in _flags(command).items():
        text = _help(action)
        assert text.count("(default") <= 1, text
        in_words = declared[name].metadata["default_text"]
        if in_words:
            assert text.endswith(f"(default: {in_words})"), text
            continue
        match = re.search(r"\(default ([^:()]+)\)$", text)
        if match is None:
            continue
        value = match.group(1)
        if isinstance(action, argparse.BooleanOptionalAction):
            flag = [action.option_strings[0] if value == ON_OFF[0] else action.option_strings[1]]
        elif action.nargs == 0:  # store_true: the default is off
            assert value == ON_OFF[1], text
            continue
        else:
            flag = [action.option_strings[0], value]
        given = resolve(cls, flags=vars(parser.parse_args([*least, *flag])), env={})
        assert getattr(given, name) == getattr(expected, name), (command, name, text)
        stated += 1
    assert stated or command == "corpus list"


def test_the_sweep_s_help_says_every_simple_default() -> None:
    """A default that is a value (a number, a word, a list) is appended, not left out."""
    for name, action in _flags("sweep").items():
        default = getattr(SweepOptions(), name)
        if default not in (None, "", ()) and name != "cache_dir":
            assert "(default" in _help(action), name


@pytest.mark.parametrize(("name", "choices"), [("runner", RUNNER_CHOICES), ("localize", LOCALIZE_MODES)])
def test_a_flag_s_choices_and_the_options_check_are_the_one_list(name: str, choices: tuple[str, ...]) -> None:
    assert _flags("sweep")[name].choices == choices
    flag = f"--{name} must be one of {', '.join(choices)}, got 'x'"
    with pytest.raises(UsageError, match=flag):
        SweepOptions(**{name: "x"})
    with pytest.raises(ConfigError, match=f"environment DITOX_{name.upper()}: {flag}"):
        resolve(SweepOptions, env={f"DITOX_{name.upper()}": "x"})


def test_a_switch_keeps_its_form() -> None:
    """--calibrate on|off and --screen on|off, --reuse/--no-reuse: as before they were declared."""
    flags = _flags("sweep")
    assert flags["calibrate"].choices == ON_OFF and flags["screen"].choices == ON_OFF
    assert flags["reuse"].option_strings == ["--reuse", "--no-reuse"]
    argv = ["--calibrate", "off", "--no-reuse", "--gate-tiers", "ties, precision"]
    args = _parser("sweep").parse_args(argv)
    options = resolve(SweepOptions, flags=vars(args), env={})
    assert (options.calibrate, options.reuse, options.gate_tiers) == (False, False, ("ties", "precision"))
