"""Jinja rendering over the top-level `templates/` folder, with escaping for untrusted text.

Model names, error messages and paths come from models and native code we do not control; the
`md` filter makes them inert in Markdown/HTML (no tags, no @mentions, no links, no fence breaks)
and `code` puts them in a fence they cannot close.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2

from ditox_ci.report.exercised import exercised_passes, never_fired_warnings
from ditox_ci.report.standalone import mermaid, script, small_values, standalone_of
from ditox_ci.report.upstream import regression_test, regression_test_file, source_url
from ditox_ci.report.words import KIND_TEXT, evidence_rows, what_happened

# A source checkout (and the Action's image) has the templates beside the package; an installed
# wheel has them as the package `ditox_ci.templates` (pyproject maps the top-level folder there).
SOURCE_TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~])")
# C0/C1 controls and Unicode bidi overrides: invisible, and able to make text read differently
# from what it is ("Trojan Source"). Newlines and tabs are handled by each filter.
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


# What GitHub turns into a link even in escaped text: URLs (a scheme before //, or www.), issue
# references (#123, owner/repo#123, GH-123). A zero-width space keeps the text as it reads.
_AUTOLINKS = (
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,31}):(?=/)"), "\\1:\u200b"),
    (re.compile(r"(?i)\b(www)\."), "\\1\u200b."),
    (re.compile(r"(?i)\b(gh)-(?=\d)"), "\\1\u200b-"),
    (re.compile(r"#(?=\d)"), "#\u200b"),
)


def no_autolinks(text: str) -> str:
    """Untrusted text that GitHub cannot turn into a link or a cross-reference."""
    for pattern, replacement in _AUTOLINKS:
        text = pattern.sub(replacement, text)
    return text


def md(value: Any) -> str:
    """Escape text for inline Markdown: no HTML, no @mentions or #refs, no emphasis or links."""
    text = _INVISIBLE.sub("", str(value).replace("\r", " ").replace("\n", " "))
    text = no_autolinks(text).replace("&", "&amp;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return text.replace("@", "@\u200b")


def code(value: Any, language: str = "") -> str:
    """A fenced block whose fence is longer than any backtick run inside the text."""
    text = _INVISIBLE.sub("", str(value).replace("\r\n", "\n")).replace("@", "@\u200b")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def span(value: Any) -> str:
    """Untrusted text as an inline code span it cannot close (backticks become quotes)."""
    text = _INVISIBLE.sub("", str(value).replace("\r", " ").replace("\n", " "))
    return "`" + text.replace("`", "'").replace("@", "@\u200b") + "`"


def truncate(value: Any, limit: int) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def template_loader() -> jinja2.BaseLoader:
    """`DITOX_TEMPLATES` if set, else the installed package's templates, else the checkout's."""
    override = os.environ.get("DITOX_TEMPLATES")
    if override:
        return jinja2.FileSystemLoader(override)
    if importlib.util.find_spec("ditox_ci.templates") is not None:
        return jinja2.PackageLoader("ditox_ci.templates", "")
    return jinja2.FileSystemLoader(str(SOURCE_TEMPLATES_DIR))


def environment() -> jinja2.Environment:
    return _environment(os.environ.get("DITOX_TEMPLATES"))


@functools.cache
def _environment(templates_override: str | None) -> jinja2.Environment:
    """One environment per templates folder: Jinja caches each compiled template in it."""
    env = jinja2.Environment(
        loader=template_loader(),
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["md"] = md
    env.filters["code"] = code
    env.filters["truncate_text"] = truncate
    env.filters["span"] = span
    # an issue carries its bug's standalone repro: the reduced model, a script, a diagram, and
    # what upstream needs: the pass's source and a regression test in its own suite's style
    env.globals.update(
        standalone=standalone_of,
        standalone_script=script,
        mermaid=mermaid,
        small_values=small_values,
        source_url=source_url,
        regression_test=regression_test,
        regression_test_file=regression_test_file,
    )
    # the first screen in plain words
    env.globals.update(what_happened=what_happened, evidence_rows=evidence_rows, kind_text=KIND_TEXT)
    # the PR check's exercised passes, in the summary and the comment alike
    env.globals.update(exercised_passes=exercised_passes, never_fired_warnings=never_fired_warnings)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def fit(
    render_with: Callable[[int], str],
    items: int,
    limit: int,
    pointer: str,
    measure: Callable[[str], int] = len,
) -> str:
    """Render with as many detailed items as fit in `limit` (binary search); `measure` is how
    the receiver counts (GitHub counts comment characters, step-summary bytes).

    Templates cut each long string already; if even zero detailed items do not fit, the text is
    cut at a line boundary, open code fences and `<details>` are closed, and `pointer` says where
    the rest is.
    """
    text = render_with(items)
    if measure(text) <= limit:
        return text
    low, high = 0, items - 1
    best: str | None = None
    while low <= high:
        middle = (low + high) // 2
        candidate = render_with(middle)
        if measure(candidate) <= limit:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best if best is not None else hard_truncate(render_with(0), limit, pointer, measure)


def hard_truncate(text: str, limit: int, pointer: str, measure: Callable[[str], int] = len) -> str:
    note = f"\n\n_…truncated to GitHub's size limit: {pointer}_\n"
    room = max(0, limit - measure(note) - 64)
    cut = text[:room]
    while measure(cut) > room:  # multi-byte characters: fewer of them fit
        cut = cut[: len(cut) - max(1, (measure(cut) - room) // 4)]
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    closing = ""
    fence = None
    for line in cut.splitlines():
        run = re.match(r"^(`{3,})", line)
        if run and fence is None:
            fence = run.group(1)
        elif run and fence is not None and line.strip() == fence:
            fence = None
    if fence:
        closing += f"\n{fence}"
    closing += "\n</details>" * max(0, cut.count("<details>") - cut.count("</details>"))
    return (cut + closing + note)[:limit]
