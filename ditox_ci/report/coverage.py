"""Per-pass coverage as an SVG heatmap: rows are passes, columns model families (each header gives
how many models of the family were checked), each cell the models of that family the pass changed
out of those it was checked on; a last column gives each pass's models changed out of models
checked over all families, and passes that changed nothing are called out.

Readable at a glance wherever it is opened: the canvas is sized from the text it holds (labels are
monospace, so their width is known without a font engine; `tests/unit/report/test_coverage.py`
renders it and checks that nothing runs past the canvas), the colours are a sequential blue scale
of models changed with dark text on light cells and white on dark ones, and a legend says what
each colour counts. Plain SVG text (no plotting dependency); every label is XML-escaped, since pass
and family names come from the optimizer and the corpus.

Reports written before `stats.coverage_checked_by_family` existed draw cells of models changed
alone; reports without per-family counts draw one column from each pass's totals.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from ditox_ci.report.model import Report
from ditox_ci.report.stats import family_counts

# the one column of a report without per-family counts
ALL_MODELS = "all"
FONT_SIZE = 12
# the advance of one monospace character (DejaVu Sans Mono, Courier: 0.6 em), with some slack
CHAR_W = 0.63 * FONT_SIZE
_CELL_W, _CELL_H, _PAD = 46, 20, 10
_NEVER_FIRED = "#b71c1c"
_TITLE = "Models each pass changed (beyond the nop control) of those it was checked on, per model family"
_TOTAL_HEADER = "all: changed/checked"
# ColorBrewer's 5-class Blues: ordered light to dark, readable by colour-blind readers and in print
_ZERO = "#ffffff"
_SCALE = (
    ("1", "#eff3ff"),
    ("2–4", "#bdd7e7"),
    ("5–19", "#6baed6"),
    ("20–99", "#3182bd"),
    ("100+", "#08519c"),
)
_BOUNDS = (1, 2, 5, 20, 100)
# text colours that keep a contrast of at least 4.5:1 on each background
_DARK_TEXT, _LIGHT_TEXT, _ZERO_TEXT = "#000000", "#ffffff", "#595959"


@dataclass(frozen=True)
class CoverageTable:
    """What the picture draws: for each pass and family, models changed and (when the report says)
    models checked; `family_models` is each family's model count, the most models of it any pass
    was checked on (a model split over shards is checked by each pass once, so this adds up right
    in a merged report where a count of models per shard would count it twice)."""

    passes: list[str]
    families: list[str]
    changed: dict[str, dict[str, int]]
    checked: dict[str, dict[str, int]] | None
    family_models: dict[str, int]

    def cell(self, name: str, family: str) -> str:
        changed = self.changed[name].get(family, 0)
        if self.checked is None:
            return str(changed)
        return f"{changed}/{self.checked[name].get(family, 0)}"

    def header(self, family: str) -> str:
        return f"{family} ({self.family_models[family]})" if family in self.family_models else family


def coverage_table(report: Report) -> CoverageTable:
    """The picture's table from `report`; without per-family counts, one column of each pass's
    totals."""
    changed = family_counts(report.stats.coverage_by_family)
    checked = (family_counts(report.stats.coverage_checked_by_family) or None) if changed else None
    if not changed:
        totals = {
            name: {key: int(n) for key, n in counts.items()} for name, counts in report.coverage.items()
        }
        changed = {name: {ALL_MODELS: counts.get("models_changed", 0)} for name, counts in totals.items()}
        checked = {name: {ALL_MODELS: counts.get("models_checked", 0)} for name, counts in totals.items()}
    passes = sorted(set(report.coverage) | set(changed) | set(checked or {}))
    families = sorted(
        {family for counts in [*changed.values(), *(checked or {}).values()] for family in counts}
    )
    family_models = (
        {family: max(checked.get(name, {}).get(family, 0) for name in passes) for family in families}
        if checked is not None
        else {}
    )
    return CoverageTable(
        passes,
        families or [ALL_MODELS],
        {name: dict(changed.get(name, {})) for name in passes},
        None if checked is None else {name: dict(checked.get(name, {})) for name in passes},
        family_models,
    )


def cannot_fire(report: Report) -> dict[str, str]:
    """{pass: why} for the passes the optimizer offers that change no valid model here (its
    adapter's CANNOT_FIRE, recorded in the report)."""
    declared = dict(report.optimizer.cannot_fire)
    return {str(name): str(why) for name, why in declared.items()} if isinstance(declared, dict) else {}


def never_fired(report: Report, table: CoverageTable | None = None) -> list[str]:
    """Passes that were checked on at least one model and changed none, but for those that cannot
    fire here (`table`: the report's `coverage_table`, when the caller has it already)."""
    table = table or coverage_table(report)
    inert = cannot_fire(report)
    return [
        name
        for name in table.passes
        if sum(table.changed[name].values()) == 0
        and report.coverage.get(name, {}).get("models_changed", 0) == 0
        and report.coverage.get(name, {}).get("models_checked", 1) > 0
        and name not in inert
    ]


def firing(report: Report) -> str:
    """One line: how many of the passes checked changed a model, and how many passes the optimizer
    offers that cannot fire here; "" for a report without single-pass coverage."""
    inert = cannot_fire(report)
    checked = [name for name, counts in report.coverage.items() if counts.get("models_checked", 0)]
    checked = [name for name in checked if name not in inert]
    if not checked:
        return ""
    fired = sum(1 for name in checked if report.coverage[name].get("models_changed", 0))
    line = f"{fired} of {len(checked)} passes checked changed a model ({fired / len(checked):.0%})"
    if inert:
        line += f"; {len(inert)} more cannot fire here"
    return line


def _bin(count: int) -> int:
    """-1 for zero, else the index of the scale step `count` falls in."""
    return sum(count >= bound for bound in _BOUNDS) - 1


def _cell_colours(count: int) -> tuple[str, str]:
    step = _bin(count)
    if step < 0:
        return _ZERO, _ZERO_TEXT
    return _SCALE[step][1], _LIGHT_TEXT if step >= 4 else _DARK_TEXT


def _text_w(text: str) -> float:
    return len(text) * CHAR_W


def _text(x: float, y: float, text: str, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(text)}</text>'


class _Layout:
    """Where everything goes, from the longest texts it has to hold."""

    def __init__(self, report: Report, table: CoverageTable, silent: set[str], inert: set[str]) -> None:
        labels = [_label(name, silent, inert) for name in table.passes]
        self.label_w = max((_text_w(label) for label in labels), default=0) + 2 * _PAD
        self.totals = {
            name: "{}/{}".format(
                report.coverage.get(name, {}).get("models_changed", 0),
                report.coverage.get(name, {}).get("models_checked", 0),
            )
            for name in table.passes
        }
        self.total_w = max(map(_text_w, self.totals.values()), default=0) + _PAD
        cells = [table.cell(name, family) for name in table.passes for family in table.families]
        self.cell_w = max(_CELL_W, max(map(_text_w, cells), default=0) + _PAD)
        self.headers = [*map(table.header, table.families), _TOTAL_HEADER]
        # headers are turned 45° up and right: each reaches its length / √2 above and beside its foot
        self.rise = max(_text_w(h) for h in self.headers) / math.sqrt(2)
        self.top = 3 * (FONT_SIZE + 10) + _PAD  # title and legend
        self.grid_y = self.top + self.rise + _PAD + FONT_SIZE
        self.grid_x = self.label_w
        self.total_x = self.grid_x + self.cell_w * len(table.families) + _PAD
        self.grid_bottom = self.grid_y + _CELL_H * len(table.passes)
        feet = [self.grid_x + i * self.cell_w + self.cell_w / 2 for i in range(len(table.families))]
        self.header_feet = [*feet, self.total_x + _PAD / 2]
        reach = max(foot + _text_w(h) / math.sqrt(2) for foot, h in zip(self.header_feet, self.headers))
        legend_right = _legend(0)[1]
        title_right = _PAD + _text_w(_TITLE)
        self.width = math.ceil(max(reach, self.total_x + self.total_w, legend_right, title_right) + _PAD)
        self.wrap = max(20, int((self.width - 2 * _PAD) // CHAR_W))


def coverage_svg(report: Report) -> str:
    table = coverage_table(report)
    silent = set(never_fired(report, table))
    offered_inert = cannot_fire(report)
    inert = {name for name in offered_inert if name in table.passes}
    layout = _Layout(report, table, silent, inert)
    fired = len(table.passes) - len(silent) - len(inert)
    footer = [f"{fired} of {len(table.passes)} passes changed at least one model."]
    if offered_inert:
        footer.append(f"{len(offered_inert)} cannot fire here (report.json: optimizer.cannot_fire says why).")
    if table.family_models:
        footer.append("A family's (n): its models checked. A cell: models changed/checked.")
    callout = textwrap.wrap("Never fired: " + ", ".join(sorted(silent)), layout.wrap) if silent else []
    line_h = FONT_SIZE + 8
    height = math.ceil(layout.grid_bottom + _PAD + line_h * (len(footer) + len(callout)) + _PAD)
    width = layout.width
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="{FONT_SIZE}">',
        "<title>Optimizer pass coverage: models changed of models checked, per pass and model family</title>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
        _text(_PAD, _PAD + FONT_SIZE, _TITLE, ' font-weight="bold"'),
    ]
    parts += _legend(_PAD + FONT_SIZE + 16)[0]
    for foot, header in zip(layout.header_feet, layout.headers):
        y = layout.grid_y - 6
        parts.append(
            f'<text class="family" x="{foot:.1f}" y="{y:.1f}" '
            f'transform="rotate(-45 {foot:.1f} {y:.1f})">{escape(header)}</text>'
        )
    for row, name in enumerate(table.passes):
        y = layout.grid_y + row * _CELL_H
        label = _label(name, silent, inert)
        colour = f' fill="{_NEVER_FIRED}" font-weight="bold"' if name in silent else \
            f' fill="{_ZERO_TEXT}"' if name in inert else ""
        parts.append(_text(layout.label_w - _PAD, y + 14, label, f' class="pass" text-anchor="end"{colour}'))
        for col, family in enumerate(table.families):
            parts.append(_cell(table, name, family, layout.grid_x + col * layout.cell_w, y, layout.cell_w))
        parts.append(_text(layout.total_x, y + 14, layout.totals[name], ' class="total"'))
    y = layout.grid_bottom + _PAD + FONT_SIZE
    for line in footer:
        parts.append(_text(_PAD, y, line))
        y += line_h
    for line in callout:
        parts.append(_text(_PAD, y, line, f' class="never-fired" fill="{_NEVER_FIRED}"'))
        y += line_h
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _label(name: str, silent: set[str], inert: set[str]) -> str:
    return name + (" — never fired" if name in silent else " — cannot fire here" if name in inert else "")


def _cell(table: CoverageTable, name: str, family: str, x: float, y: float, cell_w: float) -> str:
    """One pass × family square, coloured by models changed, with a tooltip in words."""
    count = table.changed[name].get(family, 0)
    fill, ink = _cell_colours(count)
    checked = "" if table.checked is None else f' data-checked="{table.checked[name].get(family, 0)}"'
    out_of = "" if table.checked is None else f" of {table.checked[name].get(family, 0)} checked"
    tip = f"{name} × {family}: {count}{out_of} changed"
    return (
        f'<g class="cell" data-pass={quoteattr(name)} data-family={quoteattr(family)} '
        f'data-changed="{count}"{checked}><title>{escape(tip)}</title>'
        f'<rect x="{x:.1f}" y="{y}" width="{cell_w - 2:.1f}" height="{_CELL_H - 2}" '
        f'fill="{fill}" stroke="#d0d0d0"/>'
        + _text(x + cell_w / 2 - 1, y + 14, table.cell(name, family), f' text-anchor="middle" fill="{ink}"')
        + "</g>"
    )


def _legend(top: float) -> tuple[list[str], float]:
    """The colour key, and where it ends on the right."""
    parts = [_text(_PAD, top + 12, "models changed:")]
    x = _PAD + _text_w("models changed:") + _PAD
    for label, fill in (("0", _ZERO), *_SCALE):
        parts.append(
            f'<rect class="legend" x="{x:.1f}" y="{top}" width="18" height="16" '
            f'fill="{fill}" stroke="#d0d0d0"/>'
        )
        parts.append(_text(x + 22, top + 12, label))
        x += 22 + _text_w(label) + _PAD
    return parts, x
