"""Untrusted text made inert, and text made to fit: the escaping every rendering shares.

Model names, error messages and paths come from models and native code we do not control; `md`
makes them inert in Markdown/HTML (no tags, no @mentions, no links, no fence breaks), `code` puts
them in a fence they cannot close and `span` in an inline code span. `fit` renders as much as fits
GitHub's size limits. No report module is imported here: the words, the standalone script, the
upstream test and the pages all escape with these.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from typing import Any

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


# where an HTML comment opens: the bot's hidden markers are HTML comments matched in the text of
# what it wrote, so untrusted text must never hold one (a message quoting the last-seen marker
# made the next sighting rewrite the issue body from there on); a zero-width space breaks it
_COMMENT_OPEN = "<!--"
_COMMENT_BROKEN = "<!\u200b--"


def code(value: Any, language: str = "") -> str:
    """A fenced block whose fence is longer than any backtick run inside the text."""
    text = _INVISIBLE.sub("", str(value).replace("\r\n", "\n")).replace("@", "@\u200b")
    text = text.replace(_COMMENT_OPEN, _COMMENT_BROKEN)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


# what a link's target keeps as it is (beside letters and digits); every other character is
# percent-encoded, so a target can neither close its Markdown link (`)`, a blank, a line break) nor
# open another link or an image (`[`, `!`, `<`, quotes)
_URL_SAFE = ":/?#@$&+,;=%-._~"


def link_target(value: Any) -> str:
    """A URL for `[text](…)`: an http(s) URL with every character Markdown or HTML could read as its
    own (parentheses, brackets, quotes, blanks, angle brackets, `!`) percent-encoded; "" for
    anything else (`javascript:`, a relative path), which a template then shows without a link."""
    url = str(value or "")
    if not url.startswith(("https://", "http://")):
        return ""
    return urllib.parse.quote(url, safe=_URL_SAFE)


def span(value: Any) -> str:
    """Untrusted text as an inline code span it cannot close (backticks become quotes)."""
    text = _INVISIBLE.sub("", str(value).replace("\r", " ").replace("\n", " "))
    text = text.replace("`", "'").replace("@", "@\u200b").replace(_COMMENT_OPEN, _COMMENT_BROKEN)
    return "`" + text + "`"


def truncate(value: Any, limit: int) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def first_line(text: str) -> str:
    """The first line of `text`, stripped ("" for blank text): a message's gist."""
    return text.strip().splitlines()[0].strip() if text.strip() else ""


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
