"""report.json checked against `schema.json` (shipped in the package) before anything acts on it.

`publish` reads reports that a fork's own code may have written: a fingerprint is put into
markers, labels and file names, a status decides whether an issue is opened, closed or reopened.
The schema pins down every field the bot acts on; unknown keys stay allowed for older readers
below the top level (the top level has exactly schema_version 1's keys).

A report is checked twice over only when it is wrong: fastjsonschema's check, the schema compiled to
Python, says whether it is valid (0.4 s for a default sweep's 9.8 MiB report, where jsonschema
takes 4 s: a PR check reads the base branch's on every shard). jsonschema, the reference
implementation, decides what a report it refuses breaks and words the error.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema

from ditox_ci.errors import InputError
from ditox_ci.report.model import Report, parse_report_json


@cache
def report_schema() -> dict[str, Any]:
    text = resources.files("ditox_ci.report").joinpath("schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _compiled() -> Callable[[Any], Any]:
    # compiling rewrites the schema's references in place: a copy, so report_schema() stays as shipped
    return fastjsonschema.compile(copy.deepcopy(report_schema()))


def schema_errors(data: Any, limit: int = 3) -> list[str]:
    """The first `limit` violations of the schema, each as `where: what` (empty: valid)."""
    try:
        _compiled()(data)
        return []
    except Exception:  # refused, or a value it could not check: jsonschema decides, and says where
        pass
    validator = jsonschema.Draft202012Validator(report_schema())
    errors = sorted(validator.iter_errors(data), key=lambda error: list(error.absolute_path))
    return [f"{_where(error.absolute_path)}: {_what(error)}" for error in errors[:limit]]


def _where(path: Any) -> str:
    return "/".join(str(part) for part in path) or "(top level)"


def _what(error: jsonschema.ValidationError) -> str:
    # the message quotes the offending value, which may be huge or hostile: keep it short
    return error.message if len(error.message) <= 200 else error.message[:199] + "…"


def read_checked_report(path: Path) -> Report:
    """Read a report that may come from an untrusted run; InputError names the first violations."""
    data = parse_report_json(path)
    errors = schema_errors(data)
    if errors:
        raise InputError(
            f"report {path} does not follow the report.json schema ({'; '.join(errors)}); "
            "give only reports written by `ditox-ci sweep` or `merge`"
        )
    return Report.from_json(data)
