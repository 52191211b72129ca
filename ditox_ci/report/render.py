"""The report's pages (summary, comment, check, issue): Jinja over the templates folder
(`templates.py`) with the helpers those pages call, and the escaping filters of `text.py`.

This module sits above the renderings it gathers (`words`, `standalone`, `upstream`, `exercised`):
none of them imports it, so the report's text is built bottom-up without an import cycle.
"""

from __future__ import annotations

from typing import Any

import jinja2

from ditox_ci.control import sweep_flags
from ditox_ci.report import templates
from ditox_ci.report.exercised import exercised_passes, never_fired_warnings
from ditox_ci.report.standalone import mermaid, pip_line, script, small_values, standalone_of
from ditox_ci.report.upstream import regression_test, regression_test_file, source_url
from ditox_ci.report.words import KIND_TEXT, evidence_rows, how_wrong, what_happened


def _page_helpers(env: jinja2.Environment) -> None:
    # an issue carries its bug's standalone repro: the reduced model, a script, a diagram, and
    # what upstream needs: the pass's source and a regression test in its own suite's style
    env.globals.update(
        standalone=standalone_of,
        standalone_script=script,
        sweep_flags=sweep_flags,
        pip_line=pip_line,
        mermaid=mermaid,
        small_values=small_values,
        source_url=source_url,
        regression_test=regression_test,
        regression_test_file=regression_test_file,
    )
    # the first screen in plain words
    env.globals.update(
        what_happened=what_happened, evidence_rows=evidence_rows, kind_text=KIND_TEXT, how_wrong=how_wrong
    )
    # the PR check's exercised passes, in the summary and the comment alike
    env.globals.update(exercised_passes=exercised_passes, never_fired_warnings=never_fired_warnings)


def environment() -> jinja2.Environment:
    return templates.environment(_page_helpers)


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
