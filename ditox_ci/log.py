"""One CI-aware logger: folded groups and annotations on GitHub Actions, coloured text locally.

The environment is passed in (tests pass `{}`), never read from `os.environ` here.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from ditox_ci.safewrite import append_bytes

_COLOURS = {"error": "\033[31m", "warning": "\033[33m", "notice": "\033[36m", "step": "\033[1m"}
_RESET = "\033[0m"
STEP_SUMMARY_LIMIT = 1024 * 1024
QUOTED_OUTPUT_LIMIT = 64 * 1024


# C0 and C1 controls and the Unicode line and paragraph separators: what can break a log line or
# hide part of it
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# The runner trims a line's leading blanks and then takes `::` for a workflow command; the old
# `##[command]` syntax counts anywhere in a line. Characters Python strips or that render as nothing
# count as blanks here, so an escape errs on the side of too often.
_COMMAND_START = re.compile(r"^([\s\x00-\x1f\u180e\u200b-\u200d\u2060\ufeff]*)::")


def _control_escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED_ESCAPES.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def printable(text: str) -> str:
    """`text` as one line a reader can see whole: bytes of a name that are not UTF-8 (which Python
    keeps as surrogates) as `\\xff`, line breaks and other control characters as `\\n`, `\\x1b`…"""
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no file name produced (e.g. from JSON)
        data = text.encode("utf-8", "backslashreplace")
    return _CONTROL.sub(_control_escape, data.decode("utf-8", "backslashreplace"))


def inert(line: str) -> str:
    """One line of untrusted text that the Actions runner cannot take for a workflow command:
    `::` opening it (after blanks) becomes `\\::`, and `##[` anywhere becomes `##\\[`."""
    return _COMMAND_START.sub(r"\1\\::", line).replace("##[", "##\\[")


@contextmanager
def quoted_output(whose: str, stream: TextIO | None = None) -> Iterator[None]:
    """Run code that is not ours (the optimizer under test, when imported) with file descriptors 1
    and 2 captured: what it prints, from Python or native code, is written afterwards to `stream`
    (default stderr) as an inert quote, never raw into the job's log, where a line could be a
    workflow command."""
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(1), os.dup(2)
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, original in zip((1, 2), saved):
                os.dup2(original, fd)
                os.close(original)
            sink.seek(0)
            printed = sink.read(QUOTED_OUTPUT_LIMIT).decode("utf-8", "backslashreplace")
            if printed.strip():
                lines = [f"{printable(whose)} printed:", *(f"  | {line}" for line in printed.splitlines())]
                print("\n".join(inert(line) for line in lines), file=stream or sys.stderr, flush=True)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


class Log:
    """Writes human output to stderr (stdout stays free for machine output such as `--dry-run`)."""

    def __init__(self, env: Mapping[str, str], stream: TextIO | None = None, quiet: bool = False):
        self.stream = stream if stream is not None else sys.stderr
        self.on_github = env.get("GITHUB_ACTIONS") == "true"
        self.in_ci = self.on_github or bool(env.get("CI"))
        self.colour = not self.in_ci and self.stream.isatty() and "NO_COLOR" not in env
        self.quiet = quiet
        summary = env.get("GITHUB_STEP_SUMMARY")
        self.summary_path = Path(summary) if summary else None

    def _write(self, line: str) -> None:
        """A line of the logger's own making: a workflow command, or text already made inert."""
        print(line, file=self.stream, flush=True)

    def _text(self, text: str) -> None:
        # every line break the runner splits on (\r alone too), and more
        for line in text.splitlines() or [""]:
            self._write(inert(line))

    def _paint(self, level: str, text: str) -> str:
        return f"{_COLOURS[level]}{text}{_RESET}" if self.colour else text

    def info(self, message: str) -> None:
        if not self.quiet:
            self._text(message)

    def _annotate(self, level: str, message: str, file: str | None) -> None:
        if self.on_github:
            props = f" file={_escape_property(file)}" if file else ""
            self._write(f"::{level}{props}::{_escape_data(message)}")
        else:
            where = f"{file}: " if file else ""
            self._text(self._paint(level, f"{level}: {where}{message}"))

    def notice(self, message: str, file: str | None = None) -> None:
        self._annotate("notice", message, file)

    def warning(self, message: str, file: str | None = None) -> None:
        self._annotate("warning", message, file)

    def error(self, message: str, file: str | None = None) -> None:
        self._annotate("error", message, file)

    def mask(self, secret: str) -> None:
        if self.on_github and secret:
            self._write(f"::add-mask::{secret}")

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        """A folded group on GitHub, a bold heading locally; both say how long the stage took."""
        start = time.monotonic()
        title = printable(title)
        if self.on_github:
            self._write(f"::group::{title}")
        elif not self.quiet:
            self._text(self._paint("step", f"== {title}"))
        try:
            yield
        finally:
            elapsed = time.monotonic() - start
            if self.on_github:
                self._write("::endgroup::")
            self.info(f"   {title}: {elapsed:.1f}s")

    def summary(self, markdown: str) -> None:
        """Append to the GitHub step summary, keeping under its 1 MiB limit."""
        if self.summary_path is None:
            return
        used = self.summary_path.stat().st_size if self.summary_path.exists() else 0
        room = STEP_SUMMARY_LIMIT - used - 256
        data = markdown.encode("utf-8", "backslashreplace")  # a name's non-UTF-8 bytes as \\xff
        if len(data) > room:
            note = "\n\n_…truncated: the full summary is in the report artifact._\n".encode()
            data = data[: max(0, room - len(note))].decode(errors="ignore").encode() + note
        try:
            append_bytes(self.summary_path, data)
        except OSError as exc:  # a link or a FIFO planted there: said once, the log has it all
            refused, self.summary_path = self.summary_path, None
            self.warning(f"the step summary {refused} was not written ({exc.strerror}); no link is followed")
