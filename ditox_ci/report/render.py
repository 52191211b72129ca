"""Jinja rendering over the top-level `templates/` folder, with escaping for untrusted text.

Model names, error messages and paths come from models and native code we do not control; the
`md` filter makes them inert in Markdown/HTML (no tags, no @mentions, no links, no fence breaks)
and `code` puts them in a fence they cannot close.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import jinja2

TEMPLATES_DIR = Path(
    os.environ.get("DITOX_TEMPLATES", Path(__file__).resolve().parents[2] / "templates")
)

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~])")
# C0/C1 controls and Unicode bidi overrides: invisible, and able to make text read differently
# from what it is ("Trojan Source"). Newlines and tabs are handled by each filter.
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def md(value: Any) -> str:
    """Escape text for inline Markdown: no HTML, no @mentions or #refs, no emphasis or links."""
    text = _INVISIBLE.sub("", str(value).replace("\r", " ").replace("\n", " "))
    text = text.replace("&", "&amp;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return text.replace("@", "@\u200b")


def code(value: Any, language: str = "") -> str:
    """A fenced block whose fence is longer than any backtick run inside the text."""
    text = _INVISIBLE.sub("", str(value).replace("\r\n", "\n")).replace("@", "@\u200b")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def truncate(value: Any, limit: int) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["md"] = md
    env.filters["code"] = code
    env.filters["truncate_text"] = truncate
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
