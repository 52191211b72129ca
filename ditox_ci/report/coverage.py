"""Per-pass coverage as an SVG heatmap: rows are passes, columns model families, each cell the
number of models of that family the pass changed. Passes that changed nothing are called out.

Plain SVG text (no plotting dependency); every label is XML-escaped, since pass and family names
come from the optimizer and the corpus.
"""

from __future__ import annotations

import math
from xml.sax.saxutils import escape, quoteattr

from ditox_ci.report.model import Report

COVERAGE_BY_FAMILY = "coverage_by_family"
ALL_MODELS = "all"
_CELL_W, _CELL_H = 56, 18
_LABEL_W, _HEADER_H = 290, 110
_NEVER_FIRED = "#c62828"


def coverage_table(report: Report) -> tuple[list[str], list[str], dict[str, dict[str, int]]]:
    """(passes, families, {pass: {family: models_changed}}); without per-family counts in
    `report.stats`, one column holds each pass's `models_changed`."""
    by_family = report.stats.get(COVERAGE_BY_FAMILY) or {
        name: {ALL_MODELS: int(counts.get("models_changed", 0))}
        for name, counts in report.coverage.items()
    }
    passes = sorted(set(report.coverage) | set(by_family))
    families = sorted({family for counts in by_family.values() for family in counts})
    families = families or [ALL_MODELS]
    return passes, families, {name: dict(by_family.get(name, {})) for name in passes}


def never_fired(report: Report) -> list[str]:
    """Passes that were checked on at least one model and changed none."""
    passes, _, table = coverage_table(report)
    return [name for name in passes if sum(table[name].values()) == 0
            and report.coverage.get(name, {}).get("models_changed", 0) == 0]


def _fill(count: int, most: int) -> str:
    if count <= 0:
        return "#f5f5f5"
    # log scale: one model already shows, the busiest cell is darkest
    share = math.log1p(count) / math.log1p(max(most, 1))
    light, dark = (232, 245, 233), (27, 94, 32)
    rgb = (round(lo + (hi - lo) * share) for lo, hi in zip(light, dark, strict=True))
    return "#" + "".join(f"{c:02x}" for c in rgb)


def coverage_svg(report: Report) -> str:
    passes, families, table = coverage_table(report)
    silent = set(never_fired(report))
    most = max((c for counts in table.values() for c in counts.values()), default=0)
    width = _LABEL_W + _CELL_W * len(families) + 20
    footer_y = _HEADER_H + _CELL_H * len(passes) + 24
    height = footer_y + 20 * (1 + bool(silent))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        "<title>Optimizer pass coverage: models changed per pass and model family</title>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for col, family in enumerate(families):
        x = _LABEL_W + col * _CELL_W + _CELL_W // 2
        parts.append(f'<text class="family" x="{x}" y="{_HEADER_H - 6}" '
                     f'transform="rotate(-45 {x} {_HEADER_H - 6})">{escape(family)}</text>')
    for row, name in enumerate(passes):
        y = _HEADER_H + row * _CELL_H
        checked = report.coverage.get(name, {}).get("models_checked", 0)
        label = escape(name) + (" — never fired" if name in silent else "")
        colour = f' fill="{_NEVER_FIRED}" font-weight="bold"' if name in silent else ""
        parts.append(f'<text class="pass" x="{_LABEL_W - 8}" y="{y + 13}" text-anchor="end"'
                     f"{colour}>{label}</text>")
        for col, family in enumerate(families):
            count = table[name].get(family, 0)
            x = _LABEL_W + col * _CELL_W
            tip = f"{name} × {family}: {count} changed ({checked} checked in all families)"
            parts.append(
                f'<g class="cell" data-pass={quoteattr(name)} data-family={quoteattr(family)} '
                f'data-changed="{count}"><title>{escape(tip)}</title>'
                f'<rect x="{x}" y="{y}" width="{_CELL_W - 2}" height="{_CELL_H - 2}" '
                f'fill="{_fill(count, most)}"/>'
                f'<text x="{x + _CELL_W // 2 - 1}" y="{y + 13}" text-anchor="middle">{count}</text>'
                "</g>"
            )
    fired = len(passes) - len(silent)
    parts.append(f'<text x="8" y="{footer_y}">{fired} of {len(passes)} passes changed at least '
                 "one model.</text>")
    if silent:
        names = escape(", ".join(sorted(silent)))
        parts.append(f'<text class="never-fired" x="8" y="{footer_y + 20}" fill="{_NEVER_FIRED}">'
                     f"Never fired: {names}</text>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
