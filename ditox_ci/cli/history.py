"""`ditox-ci history`: append a night's report to the nights before it and draw them."""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from ditox_ci.errors import EXIT_OK, InputError, UsageError
from ditox_ci.log import Log
from ditox_ci.report.model import write_text_atomic
from ditox_ci.report.nights import HISTORY_FILE, MAX_HISTORY_BYTES, MAX_NIGHTS, History, night_of
from ditox_ci.report.nights_page import history_html
from ditox_ci.report.schema import read_checked_report
from ditox_ci.safeload import parse_json, read_text
from ditox_ci.safewrite import written_or_input_error

NAME = "history"
HELP = "append a nightly report to the nights before it: history.json and the page history.html"
PAGE_FILE = "history.html"
DESCRIPTION = f"""\
Add the night REPORT says (a whole sweep, as publish leaves it) to the history of the nights
before it (--previous: a folder holding history.json, as `ditox-ci previous` writes it beside
the previous report.json, or that file), keep the last --nights ({MAX_NIGHTS}), and write
OUT/{HISTORY_FILE} and OUT/{PAGE_FILE}: a self-contained page (no script, nothing fetched) of
the bugs open per pass night by night, the models each pass changed, what the default passes
removed, the sweep's time, what changed last night, and each bug's first night with a link to its
issue (GITHUB_REPOSITORY, or --repository). The night is dated today (UTC) and named by the
commit GITHUB_SHA unless --date and --sha say otherwise; a re-run of its workflow run
(GITHUB_RUN_ID), or outside a workflow of the same date and commit, replaces its night. Without
a previous history (the first night) the history starts here.

examples:
  ditox-ci history --report ditox-report --previous previous
  ditox-ci history --report ditox-report --out site --repository onnx/optimizer
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--report", default="ditox-report", help="the night's report folder (default: %(default)s)"
    )
    parser.add_argument("--previous", help="the previous night's folder (or its history.json)")
    parser.add_argument("--out", help="where history.json and history.html go (default: --report)")
    parser.add_argument(
        "--nights", type=int, default=MAX_NIGHTS, help="how many nights to keep (default: %(default)s)"
    )
    parser.add_argument(
        "--repository", help="owner/name the bugs' issues are in (default: GITHUB_REPOSITORY)"
    )
    parser.add_argument("--date", help="the night's date, YYYY-MM-DD (default: today, UTC)")
    parser.add_argument("--sha", help="the commit swept (default: GITHUB_SHA)")


@dataclass(frozen=True)
class HistoryOptions:
    """The command's options, checked (the Action's table maps its inputs onto these names)."""

    report: str = "ditox-report"
    previous: str | None = None
    out: str | None = None
    nights: int = MAX_NIGHTS
    repository: str | None = None
    date: str | None = None
    sha: str | None = None

    def __post_init__(self) -> None:
        if self.nights < 1:
            raise UsageError(f"--nights must be 1 or more, got {self.nights}")
        if self.date is not None:
            try:
                datetime.date.fromisoformat(self.date)
            except ValueError:
                raise UsageError(f"--date must be YYYY-MM-DD, got {self.date!r}") from None


def _folder_file(path: Path, name: str) -> Path:
    return path / name if path.is_dir() else path


def read_history(path: Path, log: Log) -> History:
    """The history in `path` (a folder holding history.json, or the file); none yet is empty."""
    file = _folder_file(path, HISTORY_FILE)
    if file.name == "report.json":  # the previous report named: its history lies beside it
        file = file.with_name(HISTORY_FILE)
    if not file.is_file():
        log.notice(f"no {HISTORY_FILE} in {path}: the history starts with this night")
        return History()
    text = read_text(file, "history", "give the folder `ditox-ci previous` wrote", MAX_HISTORY_BYTES)
    return History.from_json(parse_json(text, f"history {file}", InputError), str(file))


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    log = Log(env)
    names = {spec.name for spec in fields(HistoryOptions)}
    options = HistoryOptions(**{key: value for key, value in vars(args).items() if key in names})
    date = options.date or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    report_dir = Path(options.report)
    report = read_checked_report(_folder_file(report_dir, "report.json"))
    before = read_history(Path(options.previous), log) if options.previous else History()
    night = night_of(report, date, options.sha or env.get("GITHUB_SHA", ""), env.get("GITHUB_RUN_ID", ""))
    history = before.with_night(night, options.nights)
    out = Path(options.out) if options.out else (report_dir if report_dir.is_dir() else report_dir.parent)
    repository = options.repository or env.get("GITHUB_REPOSITORY", "")
    for name, text in ((HISTORY_FILE, _json(history)), (PAGE_FILE, history_html(history, repository))):
        try:
            out.mkdir(parents=True, exist_ok=True)
            write_text_atomic(out / name, text)
        except OSError as exc:
            raise written_or_input_error(out / name, exc) from None
    log.info(
        f"history: {len(history.nights)} nights, {history.nights[0].date} to {date}; "
        f"{len(night.open_bugs())} open bugs tonight; page: {out / PAGE_FILE}"
    )
    return EXIT_OK


def _json(history: History) -> str:
    return json.dumps(history.to_json(), indent=1) + "\n"
