"""The templates folder and the Jinja environment over it, with the escaping filters of `text.py`.

A source checkout (and the Action's image) has the templates beside the package; an installed wheel
has them as the package `ditox_ci.templates` (pyproject maps the top-level folder there);
`DITOX_TEMPLATES` overrides both. A code template (the standalone script, the upstream regression
test, a bundle's repro) renders here; the pages (summary, comment, check, issue) render in
`render.py`, whose environment adds the helpers they call.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2

from ditox_ci import PROJECT_URL
from ditox_ci.report.kinds import FindingKind
from ditox_ci.report.text import code, link_target, md, span, truncate

SOURCE_TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
# what an environment gets beyond the filters: render.py's page helpers
Extension = Callable[[jinja2.Environment], None]


def template_loader() -> jinja2.BaseLoader:
    """`DITOX_TEMPLATES` if set, else the installed package's templates, else the checkout's."""
    override = os.environ.get("DITOX_TEMPLATES")
    if override:
        return jinja2.FileSystemLoader(override)
    if importlib.util.find_spec("ditox_ci.templates") is not None:
        return jinja2.PackageLoader("ditox_ci.templates", "")
    return jinja2.FileSystemLoader(str(SOURCE_TEMPLATES_DIR))


def environment(extend: Extension | None = None) -> jinja2.Environment:
    """The environment over the current templates folder, with `extend` applied once."""
    return _environment(os.environ.get("DITOX_TEMPLATES"), extend)


@functools.cache
def _environment(templates_override: str | None, extend: Extension | None) -> jinja2.Environment:
    """One environment per templates folder and extension: Jinja caches each compiled template in it."""
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
    env.filters["url"] = link_target
    env.globals["project_url"] = PROJECT_URL
    # a finding's kind as its member, whose attributes say what differs per kind (report/kinds.py)
    env.globals["kind_of"] = FindingKind.named
    if extend is not None:
        extend(env)
    return env


def render(template: str, **context: Any) -> str:
    """A code template: one that calls no page helper."""
    return environment().get_template(template).render(**context)
