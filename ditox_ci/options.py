"""One options resolver: dataclass defaults → config file → environment (DITOX_*, INPUT_*) → flags.

Each command declares a frozen dataclass; `resolve` fills it. Unknown config keys are errors, and
every value is parsed by the field's declared type, so a typo never silently becomes a default.

An option is declared once, as a field made by `option`: its type, its default, its choices and
its help. `add_flags` makes the command's `--flag`s from those fields, the help ending with the
default the field holds, so the help cannot say another one.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ditox_ci.errors import ConfigError, FatalError, UsageError
from ditox_ci.safeload import parse_yaml, read_text

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
# a switch given as `--x on|off` (a bool option with these choices) rather than `--x/--no-x`
ON_OFF = ("on", "off")


def _check_number(value: float, name: str, origin: str, error: type[FatalError]) -> float:
    """Every float option is a time, a tolerance or a budget: `nan` would compare false with
    everything (a timeout that never fires), `inf` or a negative value has no meaning."""
    if not math.isfinite(value) or value < 0:
        where = f"--{name.replace('_', '-')}" if origin == "flag" else f"{origin}: '{name}'"
        raise error(f"{where} must be a finite number >= 0, got {value!r}")
    return value


def seconds(text: str) -> float:
    """A flag's number of seconds (argparse's `type`): finite and >= 0, refused under the flag's
    own name, whatever the field is called."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, got {text!r}")
    return value


def _parse(value: Any, hint: Any, name: str, origin: str) -> Any:
    """Convert `value` (a string from the environment, or YAML data) to the field type `hint`."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.strip().lower() in {"", "none"}):
            return None
        inner = next(a for a in args if a is not type(None))
        return _parse(value, inner, name, origin)
    try:
        if hint is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE | _FALSE:
                return text in _TRUE
            raise ValueError(value)
        if hint is float:
            error = UsageError if origin == "flag" else ConfigError
            return _check_number(float(value), name, origin, error)
        if hint in (int, str):
            return hint(value)
        if isinstance(hint, type) and hasattr(hint, "parse"):  # a value with structure (Shard)
            try:
                return value if isinstance(value, hint) else hint.parse(str(value))
            except UsageError as exc:  # a flag's is the command line's; another source's, its own
                if origin == "flag":
                    raise
                raise ConfigError(f"{origin}: {exc}") from None
        if typing.get_origin(hint) is tuple:
            if isinstance(value, str):
                items = [part.strip() for part in value.replace("\n", ",").split(",")]
            else:
                items = [str(item) for item in value]
            return tuple(item for item in items if item)
    except (TypeError, ValueError):
        kind = getattr(hint, "__name__", str(hint))
        raise ConfigError(f"{origin}: '{name}' must be {kind}, got {value!r}") from None
    raise TypeError(f"options field {name} has unsupported type {hint}")


def load_config_file(path: Path | None, section: str) -> dict[str, Any]:
    """Read the command's section of a YAML config file (`sweep:`, `publish:` …)."""
    if path is None:
        return {}
    text = read_text(path, "config file", "pass an existing file to --config")
    data = parse_yaml(text, f"config file {path}", ConfigError) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must be a mapping of command sections")
    values = data.get(section, {}) or {}
    if not isinstance(values, dict):
        raise ConfigError(f"config file {path}: section '{section}' must be a mapping")
    return values


def resolve(
    cls: type[T],
    *,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    config_origin: str = "config file",
) -> T:
    """Build `cls` from its defaults, then `config`, then the environment, then `flags`.

    Flags whose value is None were not given on the command line and do not override.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    # where each value that is not a flag's came from, for an error about it
    origins: dict[str, str] = {}

    for key, raw in (config or {}).items():
        name = str(key).replace("-", "_")
        if name not in fields:
            known = ", ".join(sorted(n.replace("_", "-") for n in fields))
            raise ConfigError(f"{config_origin}: unknown key '{key}' (known keys: {known})")
        values[name] = _parse(raw, hints[name], name, config_origin)
        origins[name] = config_origin

    for prefix in ("DITOX_", "INPUT_"):
        for name in fields:
            raw = (env or {}).get(prefix + name.upper())
            if raw is not None and raw != "":
                origins[name] = f"environment {prefix}{name.upper()}"
                values[name] = _parse(raw, hints[name], name, origins[name])

    for name, raw in (flags or {}).items():
        if raw is None or name not in fields:
            continue
        if isinstance(raw, list):
            raw = tuple(raw)
        if isinstance(raw, float):
            _check_number(raw, name, "flag", UsageError)
        values[name] = raw if not isinstance(raw, str) else _parse(raw, hints[name], name, "flag")
        origins.pop(name, None)

    try:
        return cls(**values)
    except UsageError as exc:
        raise _from_origin(cls, values, origins, exc) from None


def _from_origin(
    cls: type[T], values: Mapping[str, Any], origins: Mapping[str, str], exc: UsageError
) -> UsageError | ConfigError:
    """A value out of range is a usage error on the command line, and a config error (exit 3)
    where a config file or the environment gave it: the one such value that, added alone to the
    flags and defaults, is refused as `exc` says. The flags' own error when they are refused
    already: that one is the command line's."""
    given = {name: value for name, value in values.items() if name not in origins}
    try:
        cls(**given)
    except UsageError as flagged:
        return flagged
    except TypeError:  # a field only the other sources give: nothing to tell them apart by
        return exc
    for name, origin in origins.items():
        try:
            cls(**given, **{name: values[name]})
        except UsageError as alone:
            if str(alone) == str(exc):
                return ConfigError(f"{origin}: {exc}")
    return exc


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str | Callable[[], str],
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    default_text: str | None = None,
    choices: Sequence[str] | None = None,
    **flag: Any,
) -> Any:
    """An option, declared once: a dataclass field with its default, and what its `--flag` says.

    `help` (or a function that writes it when the parser is built: what is installed here) does not
    say the default: `add_flags` appends it from `default`, or from `default_text` where the value
    says too little (None for "every core", a factory, tolerances by each output's dtype).
    `choices` is the one list both the flag and `check_choices` hold a value to; a bool option
    with `ON_OFF` takes `--x on|off`, any other `--x/--no-x`. `flag` holds argparse's arguments
    the field's type does not decide (metavar, nargs, action, required; `flags`: option strings
    other than `--<name>`)."""
    metadata = {"help": help, "default_text": default_text, "choices": choices, "flag": flag}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _comma_list(text: str) -> tuple[str, ...]:
    """A list option's flag value: `a,b` (blank items dropped)."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _as_flag(value: Any) -> str:
    """A default as its flag would give it: on/off, a comma list, 60 for 60.0."""
    if isinstance(value, bool):
        return ON_OFF[0] if value else ON_OFF[1]
    if isinstance(value, tuple):
        return ",".join(str(item) for item in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _default_words(item: dataclasses.Field[Any]) -> str:
    """What a flag's help says of its option's default: `default_text`, else the value the field
    holds (a factory's, made); "" where there is none to say (None, an empty string or list)."""
    text = item.metadata.get("default_text")
    if text:
        return f"(default: {text})"
    value = item.default
    if item.default_factory is not dataclasses.MISSING:
        value = item.default_factory()
    if value is dataclasses.MISSING or value in (None, "", ()):
        return ""
    return f"(default {_as_flag(value)})"


def add_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    skip: Collection[str] = (),
    helps: Mapping[str, str | Callable[[], str]] | None = None,
) -> None:
    """A `--flag` for each option `cls` declares (its fields made by `option`), in their order, but
    those in `skip`; `helps` rewords those that mean something else to the command."""
    hints = typing.get_type_hints(cls)
    for item in dataclasses.fields(cls):
        if item.name not in skip and "help" in item.metadata:
            add_flag(parser, item, hints[item.name], (helps or {}).get(item.name))


def add_flag(
    parser: argparse.ArgumentParser,
    item: dataclasses.Field[Any],
    hint: Any,
    help: str | Callable[[], str] | None = None,
) -> None:
    """The `--flag` of one option. Its value is None when not given, so the config file and the
    environment keep theirs (`resolve`); a bool's is True or False (`--x/--no-x`) or on/off."""
    flag = dict(item.metadata["flag"])
    names = flag.pop("flags", None) or ("--" + item.name.replace("_", "-"),)
    said = help or item.metadata["help"]
    said = said() if callable(said) else said
    words = _default_words(item)
    kwargs: dict[str, Any] = {"dest": item.name, "default": None}
    kwargs["help"] = f"{said} {words}" if words else said
    choices = item.metadata["choices"]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if hint is bool and not choices:
        kwargs["action"] = argparse.BooleanOptionalAction
    elif typing.get_origin(hint) is tuple and not {"nargs", "action"} & set(flag):
        kwargs["type"] = _comma_list
    elif hint in (int, float):
        kwargs["type"] = hint
    if choices:
        kwargs["choices"] = tuple(choices)
    parser.add_argument(*names, **{**kwargs, **flag})


def check_choices(options: Any) -> None:
    """Refuse a value outside its option's `choices`, from whichever source it came (argparse
    refuses a flag's first, in its own words)."""
    for item in dataclasses.fields(options):
        choices, value = item.metadata.get("choices"), getattr(options, item.name)
        if choices and not isinstance(value, bool) and value not in choices:
            name = item.name.replace("_", "-")
            raise UsageError(f"--{name} must be one of {', '.join(choices)}, got '{value}'")
