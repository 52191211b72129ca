"""One options resolver: dataclass defaults → config file → environment (DITOX_*, INPUT_*) → flags.

Each command declares a frozen dataclass; `resolve` fills it. Unknown config keys are errors, and
every value is parsed by the field's declared type, so a typo never silently becomes a default.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from ditox_ci.errors import ConfigError, FatalError, UsageError
from ditox_ci.safeload import parse_yaml, read_text

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _check_number(value: float, name: str, origin: str, error: type[FatalError]) -> float:
    """Every float option is a time, a tolerance or a budget: `nan` would compare false with
    everything (a timeout that never fires), `inf` or a negative value has no meaning."""
    if not math.isfinite(value) or value < 0:
        where = f"--{name.replace('_', '-')}" if origin == "flag" else f"{origin}: '{name}'"
        raise error(f"{where} must be a finite number >= 0, got {value!r}")
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
