"""`ditox-ci corpus list`: which models a set of sources selects, and what inputs each runs on."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ditox_ci.cli import add_action
from ditox_ci.corpus import DEFAULT_SOURCES, CorpusContext, ModelRef, default_cache_dir, resolve_sources
from ditox_ci.corpus.inputs import inputs_kind
from ditox_ci.errors import InputError
from ditox_ci.log import Log, inert, printable
from ditox_ci.options import add_flags, option, resolve
from ditox_ci.report.outputs import prepare_out_dir

NAME = "corpus"
HELP = "list the models that model sources select"
DESCRIPTION = """\
Inspect the corpus a sweep would run on, without running anything.

`corpus list` prints one line per model: its id, its source, whether it runs on recorded
inputs (ONNX backend-test data sets) or seeded random ones, and its path. Named sources are
materialized into the cache folder on first use.

examples:
  ditox-ci corpus list                                   # the default corpus
  ditox-ci corpus list --models onnx-node:test_conv*     # one operator's test cases
  ditox-ci corpus list --models ./models onnx-data:light/* --json
"""


@dataclass(frozen=True)
class CorpusListOptions:
    models: tuple[str, ...] = option(
        (), help="paths or named sources", default_text=" ".join(DEFAULT_SOURCES), nargs="+", metavar="SRC"
    )
    cache_dir: str = option(
        "",
        help="where named sources materialize models",
        default_text="$DITOX_CACHE_DIR, else $DITOX_CACHE, else ~/.cache/ditox-ci",
    )
    json: bool = option(False, help="print a JSON list", action="store_true")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = add_action(actions, "list", "print the models the sources select", DESCRIPTION)
    add_flags(listing, CorpusListOptions)


def _row(ref: ModelRef) -> dict[str, str]:
    """What one model is and where; `unavailable` (no path) says why a sweep would skip it and the fix."""
    row = {"id": ref.id, "source": ref.source, "inputs": inputs_kind(ref), "path": ref.path}
    if ref.meta.get("unavailable"):
        row["unavailable"] = str(ref.meta["unavailable"])
    return row


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    flags = {
        "models": tuple(args.models) if args.models else None,
        "cache_dir": args.cache_dir,
        "json": args.json,
    }
    options = resolve(CorpusListOptions, flags=flags, env=env)
    log = Log(env)
    cache_dir = (
        Path(options.cache_dir).expanduser() if options.cache_dir else default_cache_dir(env)
    )
    prepare_out_dir(cache_dir, "--cache-dir")
    refs = resolve_sources(options.models, CorpusContext(cache_dir), log)
    if not refs:  # a folder without .onnx files: what a sweep would refuse, said here too
        raise InputError(f"{' '.join(options.models)} holds no .onnx model")
    rows = [_row(ref) for ref in refs]
    if options.json:
        print(json.dumps(rows, indent=1))
        log.info(f"{len(rows)} models")
        return 0
    widths = {
        key: max([len(key), *(len(row[key]) for row in rows)]) for key in ("id", "source", "inputs")
    }
    for row in rows:
        # an id is a file name, anyone's to choose: it must not open a workflow command in a CI log
        where = f"unavailable: {row['unavailable']}" if "unavailable" in row else row["path"]
        line = (
            f"{row['id']:<{widths['id']}}  {row['source']:<{widths['source']}}  "
            f"{row['inputs']:<{widths['inputs']}}  {printable(where)}"
        )
        print(inert(line))
    print(f"{len(rows)} models")
    return 0
