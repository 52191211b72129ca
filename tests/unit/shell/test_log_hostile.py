"""No untrusted string can start a workflow command in the job's log, and line breaks in names are
shown escaped (threat model item 5): the logger, and `publish --dry-run` printing bodies built from
a crafted report, through the real CLI in process."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ditox_ci.__main__ import main
from ditox_ci.log import Log, inert, printable
from ditox_ci.report.model import Culprit, Finding, write_report
from tests.helpers import minimal_report

PLANTED = [
    "::add-mask::ghs_secret",
    "  ::stop-commands::resume",
    "\t::warning title=forged::all green",
    "\u200b::error::forged",
    "text then ##[add-mask]secret",
]

# A line the runner would act on: `::` after leading blanks, or the old syntax anywhere.
COMMAND = re.compile(r"^\s*::|##\[")


def _commands(text: str) -> list[str]:
    # the runner splits on \r and \n alike
    return [line for line in re.split(r"\r\n|\r|\n", text) if COMMAND.search(line.replace("\u200b", ""))]


@pytest.mark.parametrize("line", PLANTED)
def test_an_inert_line_is_no_command(line: str) -> None:
    assert _commands(inert(line)) == []


def test_printable_keeps_a_name_on_one_visible_line() -> None:
    name = os.fsdecode(b"re\xfflu\r\n::warning title=x::pwned\x1b[2J\u2028.onnx")
    shown = printable(name)
    assert shown == "re\\xfflu\\r\\n::warning title=x::pwned\\x1b[2J\\u2028.onnx"
    assert shown.encode("utf-8").decode("utf-8") == shown  # no surrogate left to crash a writer


def test_the_logger_never_writes_an_untrusted_command(capsys: pytest.CaptureFixture[str]) -> None:
    log = Log({"GITHUB_ACTIONS": "true"})
    for line in PLANTED:
        log.info(f"model\n{line}\rtail")
        log.warning(f"model\n{line}", file=f"models/{line}.onnx")
        with log.group(f"ditox-ci sweep\n{line}"):
            pass
    err = capsys.readouterr().err
    ours = re.compile(r"^::(group|endgroup|warning file=[^\r\n]*)::")
    assert [line for line in _commands(err) if not ours.match(line)] == []
    assert not any(line.lstrip().startswith("::warning title=forged") for line in err.splitlines())


def _crafted_report(path: Path) -> Path:
    hostile = "\n".join(PLANTED)
    finding = Finding(
        fingerprint="0123456789abcdef",
        kind="output-mismatch",
        model=f"models/x.onnx\n{hostile}",
        config="default",
        culprit=Culprit(scope="pass", passes=("eliminate_identity",)),
        measured={"message": f"mismatch\n{hostile}\r::add-mask::again", "output": "y"},
    )
    write_report(minimal_report(finding), path)
    return path


def test_publish_dry_run_prints_bodies_that_start_no_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _crafted_report(tmp_path / "report.json")
    for name, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "schedule",
        "GITHUB_REPOSITORY": "octo/optimizer",
        "GITHUB_SHA": "1" * 40,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
    }.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit):
        main(["publish", "--report", str(report), "--dry-run", "--file-issues"])
    captured = capsys.readouterr()
    assert "[dry-run] would" in captured.out
    assert "mismatch" in captured.out  # the crafted text is shown, only made inert
    assert _commands(captured.out) == []
    ours = re.compile(r"^::(group|endgroup|error|warning|notice)[ :]")
    assert [line for line in _commands(captured.err) if not ours.match(line)] == []


def test_corpus_list_prints_hostile_file_names_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("::add-mask::secret.onnx", "x##[warning]y.onnx"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path.joinpath(os.fsdecode(b"two\nlines\xff.onnx"))).write_bytes(b"")
    with pytest.raises(SystemExit):
        main(["corpus", "list", "--models", str(tmp_path)])
    out = capsys.readouterr().out
    assert "two\\nlines\\xff.onnx" in out
    assert _commands(out) == []
