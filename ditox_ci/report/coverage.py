"""Per-pass coverage as an SVG heatmap: rows are passes, columns model families, each cell the
number of models of that family the pass changed; a last column gives each pass's models changed
out of models checked, and passes that changed nothing are called out.

Readable at a glance wherever it is opened: the canvas is sized from the text it holds (labels are
monospace, so their width is known without a font engine; `tests/unit/report/test_coverage.py`
renders it and checks that nothing runs past the canvas), the colours are a sequential blue scale
with dark text on light cells and white on dark ones, and a legend says what each colour counts.
Plain SVG text (no plotting dependency); every label is XML-escaped, since pass and family names
come from the optimizer and the corpus.
"""

from __future__ import annotations

import math
import textwrap
from xml.sax.saxutils import escape, quoteattr

from ditox_ci.report.model import Report

COVERAGE_BY_FAMILY = "coverage_by_family"
ALL_MODELS = "all"
FONT_SIZE = 12
# the advance of one monospace character (DejaVu Sans Mono, Courier: 0.6 em), with some slack
CHAR_W = 0.63 * FONT_SIZE
_CELL_W, _CELL_H, _PAD = 46, 20, 10
_NEVER_FIRED = "#b71c1c"
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


def coverage_table(report: Report) -> tuple[list[str], list[str], dict[str, dict[str, int]]]:
    """(passes, families, {pass: {family: models_changed}}); without per-family counts in
    `report.stats`, one column holds each pass's `models_changed`."""
    by_family = report.stats.get(COVERAGE_BY_FAMILY) or {
        name: {ALL_MODELS: int(counts.get("models_changed", 0))} for name, counts in report.coverage.items()
    }
    passes = sorted(set(report.coverage) | set(by_family))
    families = sorted({family for counts in by_family.values() for family in counts})
    families = families or [ALL_MODELS]
    return passes, families, {name: dict(by_family.get(name, {})) for name in passes}


def never_fired(report: Report) -> list[str]:
    """Passes that were checked on at least one model and changed none."""
    passes, _, table = coverage_table(report)
    return [
        name
        for name in passes
        if sum(table[name].values()) == 0 and report.coverage.get(name, {}).get("models_changed", 0) == 0
    ]


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

    def __init__(
        self,
        report: Report,
        passes: list[str],
        families: list[str],
        table: dict[str, dict[str, int]],
        silent: set[str],
    ) -> None:
        labels = [name + (" — never fired" if name in silent else "") for name in passes]
        self.label_w = max((_text_w(label) for label in labels), default=0) + 2 * _PAD
        self.totals = {
            name: "{}/{}".format(
                report.coverage.get(name, {}).get("models_changed", 0),
                report.coverage.get(name, {}).get("models_checked", 0),
            )
            for name in passes
        }
        self.total_w = max(map(_text_w, self.totals.values()), default=0) + _PAD
        most = max((count for counts in table.values() for count in counts.values()), default=0)
        self.cell_w = max(_CELL_W, _text_w(str(most)) + _PAD)
        headers = [*families, "all: changed/checked"]
        # headers are turned 45° up and right: each reaches its length / √2 above and beside its foot
        self.rise = max(_text_w(h) for h in headers) / math.sqrt(2)
        self.top = 3 * (FONT_SIZE + 10) + _PAD  # title and legend
        self.grid_y = self.top + self.rise + _PAD + FONT_SIZE
        self.grid_x = self.label_w
        self.total_x = self.grid_x + self.cell_w * len(families) + _PAD
        self.grid_bottom = self.grid_y + _CELL_H * len(passes)
        feet = [self.grid_x + i * self.cell_w + self.cell_w / 2 for i in range(len(families))]
        self.header_feet = [*feet, self.total_x + _PAD / 2]
        reach = max(foot + _text_w(h) / math.sqrt(2) for foot, h in zip(self.header_feet, headers))
        legend_right = _legend(0)[1]
        self.width = math.ceil(max(reach, self.total_x + self.total_w, legend_right) + _PAD)
        self.wrap = max(20, int((self.width - 2 * _PAD) // CHAR_W))


def coverage_svg(report: Report) -> str:
    passes, families, table = coverage_table(report)
    silent = set(never_fired(report))
    layout = _Layout(report, passes, families, table, silent)
    fired = len(passes) - len(silent)
    footer = [f"{fired} of {len(passes)} passes changed at least one model."]
    callout = textwrap.wrap("Never fired: " + ", ".join(sorted(silent)), layout.wrap) if silent else []
    line_h = FONT_SIZE + 8
    height = math.ceil(layout.grid_bottom + _PAD + line_h * (len(footer) + len(callout)) + _PAD)
    width = layout.width
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="{FONT_SIZE}">',
        "<title>Optimizer pass coverage: models changed per pass and model family</title>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
        _text(
            _PAD,
            _PAD + FONT_SIZE,
            "Models each pass changed (beyond the nop control), per model family",
            ' font-weight="bold"',
        ),
    ]
    parts += _legend(_PAD + FONT_SIZE + 16)[0]
    for foot, header in zip(layout.header_feet, [*families, "all: changed/checked"]):
        y = layout.grid_y - 6
        parts.append(
            f'<text class="family" x="{foot:.1f}" y="{y:.1f}" '
            f'transform="rotate(-45 {foot:.1f} {y:.1f})">{escape(header)}</text>'
        )
    for row, name in enumerate(passes):
        y = layout.grid_y + row * _CELL_H
        label = name + (" — never fired" if name in silent else "")
        colour = f' fill="{_NEVER_FIRED}" font-weight="bold"' if name in silent else ""
        parts.append(_text(layout.label_w - _PAD, y + 14, label, f' class="pass" text-anchor="end"{colour}'))
        for col, family in enumerate(families):
            count = table[name].get(family, 0)
            x = layout.grid_x + col * layout.cell_w
            fill, ink = _cell_colours(count)
            tip = f"{name} × {family}: {count} changed"
            parts.append(
                f'<g class="cell" data-pass={quoteattr(name)} data-family={quoteattr(family)} '
                f'data-changed="{count}"><title>{escape(tip)}</title>'
                f'<rect x="{x:.1f}" y="{y}" width="{layout.cell_w - 2:.1f}" height="{_CELL_H - 2}" '
                f'fill="{fill}" stroke="#d0d0d0"/>'
                + _text(x + layout.cell_w / 2 - 1, y + 14, str(count), f' text-anchor="middle" fill="{ink}"')
                + "</g>"
            )
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
