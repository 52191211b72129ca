"""Readers for files someone else may have written: reports (a fork's artifact), baselines and config
files (a pull request may change them), event payloads.

Each bounds the work a small file can cause and turns every way of being malformed into one line
of the caller's error class, never a traceback or exit 70: YAML aliases are refused (a few lines
of nested aliases expand to gigabytes), JSON with more than MAX_JSON_ELEMENTS values (counted
before parsing: 24 MiB of `{}` parse into 1.4 GiB of objects), JSON deeper than MAX_JSON_DEPTH
(the parser stops at Python's recursion limit, the check at this depth), integers longer than
MAX_INT_DIGITS, numbers too large for a float (`1e999`) and strings with half a UTF-16 pair
(`\\ud800`, which no UTF-8 file, log or XML can hold) are errors. The `NaN` and `Infinity`
constants stay readable: the report writer itself puts them where a comparison saw them.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from ditox_ci.errors import FatalError, InputError

# report.json nests about 6 deep; no file this tool reads needs more than a few levels beyond it
MAX_JSON_DEPTH = 64
# a report of 64 MiB (report.model.MAX_REPORT_BYTES) holds about 1.6 million values (about 43
# bytes each, measured on a sweep's report.json); two million `{}` cost about 150 MB parsed
MAX_JSON_ELEMENTS = 2_000_000
# a 64-bit counter has 20 digits; Python itself stops at 4,300 with a ValueError nobody expects
MAX_INT_DIGITS = 40


# what a file read as text may hold when its reader names no bound: a baseline, a config file or
# an event payload is a few kilobytes
MAX_TEXT_BYTES = 16 * 1024 * 1024
# opened without blocking (a FIFO planted at the path answers at once instead of hanging the job),
# and never as a terminal's controlling one
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def read_text(path: Path, what: str, missing: str, max_bytes: int | None = None) -> str:
    """The UTF-8 text of the regular file `path`, or an InputError: "<what> <path> does not exist;
    <missing>", "<what> <path> is unreadable (<why>)", "... is not a regular file" (a FIFO would
    block, `/dev/zero` never end), or "... has more than <max_bytes> bytes" (MAX_TEXT_BYTES by
    default; read up to there only: a file someone else may still be writing cannot grow past the
    check)."""
    limit = MAX_TEXT_BYTES if max_bytes is None else max_bytes
    try:
        fd = os.open(path, _READ)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError(f"{what} {path} is not a regular file; {missing}")
            data = handle.read(limit + 1)
        if len(data) > limit:
            too_big = f"{what} {path} has more than {limit} bytes"
            raise InputError(f"{too_big}; it is not a file ditox-ci wrote")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist; {missing}") from None
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, or a NUL in the path
        raise InputError(f"{what} {path} is unreadable ({exc})") from None


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a float")
    return value


def _depth(data: Any) -> int:
    """How deep lists and objects nest (iterative: the data may be deep enough to break recursion)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            if level > MAX_JSON_DEPTH:
                break
            stack.extend((item, level + 1) for item in (value.values() if isinstance(value, dict) else value))
    return deepest


# a JSON string, escapes included: what is inside one is no value of its own
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def _values_at_most(text: str) -> int:
    """An upper bound on the values the JSON `text` holds, found without building any: every
    value but a container's first follows a comma, and every container opens with a bracket."""
    bare = _JSON_STRING.sub('""', text)
    return bare.count(",") + bare.count("{") + bare.count("[") + 1


# `\ud800`…`\udfff`: JSON may spell half a UTF-16 pair alone, which no UTF-8 file can then hold
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _has_lone_surrogate(data: Any) -> bool:
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


def parse_json(text: str, what: str, error: type[FatalError]) -> Any:
    """The JSON value in `text`; `what` names the file in the one-line `error`."""
    too_deep = f"{what} nests deeper than {MAX_JSON_DEPTH} levels; it is not a file ditox-ci wrote"
    if _values_at_most(text) > MAX_JSON_ELEMENTS:
        too_many = f"{what} holds more than {MAX_JSON_ELEMENTS} JSON values"
        raise error(f"{too_many}; it is not a file ditox-ci wrote")
    try:
        data = json.loads(text, parse_int=_bounded_int, parse_float=_finite_float)
    except RecursionError:
        raise error(too_deep) from None
    except ValueError as exc:  # JSONDecodeError included
        raise error(f"{what} is not valid JSON: {one_line(str(exc))}") from None
    if _depth(data) > MAX_JSON_DEPTH:
        raise error(too_deep)
    # a surrogate can only come from such an escape: a file that spells none is not walked again
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(data):
        raise error(f"{what} holds a lone UTF-16 surrogate (\\ud800…\\udfff): it cannot be written as text")
    return data


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that an alias (`*name`, `<<: *name`) is an error."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"YAML aliases (*{event.anchor}) are not accepted: write the value out where it is used",
                event.start_mark,
            )
        return super().compose_node(parent, index)


def parse_yaml(text: str, what: str, error: type[FatalError]) -> Any:
    """The YAML document in `text`, without aliases; `what` names the file in the one-line `error`."""
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader subclass: no Python objects
    except RecursionError:
        raise error(f"{what} nests too deeply to be a baseline or config file") from None
    except yaml.MarkedYAMLError as exc:
        where = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark is not None else ""
        raise error(f"{what} is not accepted YAML: {one_line(exc.problem or str(exc))}{where}") from None
    except yaml.YAMLError as exc:
        raise error(f"{what} is not valid YAML: {one_line(str(exc))}") from None
    except ValueError as exc:  # a value YAML reads as a date or a number that is none (2026-02-30)
        raise error(f"{what} holds a value YAML cannot read: {one_line(str(exc))}") from None


def one_line(text: str, limit: int = 300) -> str:
    """`text` as one line of at most `limit` characters: an error message quotes untrusted input."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
