"""`history.html`: the nights at a glance, one self-contained page (inline SVG, inline CSS, no
script, nothing fetched), readable from an artifact, GitHub Pages or a file on disk.

From the top: what changed last night (bugs new and fixed, passes that fired on fewer or more
models, the whole optimizer's node reduction, the sweep's time); three trend lines (open bugs, nodes
the default config removed, sweep seconds); per pass a heat strip of its open bugs, night by
night, and a line of the models it changed; then every bug of the history with its first night and
a link to its issue (a search for its fingerprint, which the issue's body carries).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from urllib.parse import quote_plus

from ditox_ci.report.nights import History, Night

# the heat strip: no open bug, then 1, 2, 3–4, 5 or more (ColorBrewer's Reds)
HEAT = ("#eeeeee", "#fcae91", "#fb6a4a", "#de2d26", "#a50f15")
LINE = "#2171b5"
CELL = 10
STRIP_HEIGHT = 16
CHART = (320, 110)
SPARK = (180, 24)

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; } th, td { padding: 3px 8px; text-align: left; vertical-align: middle; }
tr:nth-child(even) { background: #f6f8fa; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 0.95em; } .worse { color: #a50f15; } .better { color: #006d2c; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5em; } figure { margin: 0; }
figcaption { font-weight: 600; margin-bottom: 4px; }
"""


def _heat(count: int) -> str:
    return HEAT[0 if count <= 0 else 1 if count == 1 else 2 if count == 2 else 3 if count <= 4 else 4]


def heat_strip(counts: Sequence[int], dates: Sequence[str]) -> str:
    """One cell per night, its colour the open bugs that night (`HEAT`), its tooltip the date."""
    width = max(1, len(counts)) * CELL
    cells = "".join(
        f'<rect x="{i * CELL}" y="0" width="{CELL - 1}" height="{STRIP_HEIGHT}" fill="{_heat(n)}">'
        f"<title>{escape(date)}: {n} open</title></rect>"
        for i, (n, date) in enumerate(zip(counts, dates, strict=True))
    )
    return (
        f'<svg class="strip" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{STRIP_HEIGHT}" '
        f'role="img" aria-label="open bugs per night">{cells}</svg>'
    )


def line_chart(values: Sequence[float], dates: Sequence[str], size: tuple[int, int], label: str) -> str:
    """A polyline over the nights, its lowest and highest values written at the left (a single
    night is a dot)."""
    width, height = size
    pad = 4
    # room at the left for the axis's two numbers, on a chart tall enough for them
    left = 44 if height >= 60 else pad
    low, high = (min(values), max(values)) if values else (0.0, 0.0)
    span = (high - low) or 1.0
    step = (width - left - pad) / max(1, len(values) - 1)
    points = [
        (left + i * step, height - pad - (value - low) / span * (height - 2 * pad))
        for i, value in enumerate(values)
    ]
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    dots = "".join(
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{LINE}">'
        f"<title>{escape(date)}: {value:g}</title></circle>"
        for (x, y), value, date in zip(points, values, dates, strict=True)
    )
    axis = (
        f'<text x="{pad}" y="11" font-size="10" fill="#555">{high:g}</text>'
        f'<text x="{pad}" y="{height - 2}" font-size="10" fill="#555">{low:g}</text>'
        if height >= 60
        else ""
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(label)}"><rect width="{width}" height="{height}" fill="#fbfbfb"/>{axis}'
        f'<polyline points="{path}" fill="none" stroke="{LINE}" stroke-width="2"/>{dots}</svg>'
    )


def _issue_link(fingerprint: str, repository: str) -> str:
    if not repository:
        return ""
    url = f"https://github.com/{repository}/issues?q={quote_plus(f'is:issue {fingerprint}')}"
    return f'<a href="{escape(url)}">issue</a>'


def _last_night(nights: Sequence[Night], repository: str) -> str:
    last = nights[-1]
    before = nights[-2] if len(nights) > 1 else None
    items = []
    new = {f: b for f, b in last.open_bugs().items() if before is None or f not in before.open_bugs()}
    gone = [f for f in (before.open_bugs() if before else {}) if f not in last.open_bugs()]
    for fingerprint, bug in new.items():
        link = _issue_link(fingerprint, repository)
        items.append(
            f'<li class="worse">new bug <code>{escape(fingerprint[:12])}</code>: {escape(bug.kind)}, culprit '
            f"<code>{escape(bug.culprit)}</code>, on {escape(bug.model)} [{escape(bug.config)}] {link}</li>"
        )
    for fingerprint in gone:
        old = before.bugs[fingerprint] if before else None
        what = f"{escape(old.kind)}, culprit <code>{escape(old.culprit)}</code>" if old else ""
        items.append(f'<li class="better">gone: <code>{escape(fingerprint[:12])}</code> {what}</li>')
    if before is not None:
        for name in sorted(set(last.changed) | set(before.changed)):
            was, now = before.changed.get(name, 0), last.changed.get(name, 0)
            if was != now:
                css = "worse" if now < was else "better"
                items.append(
                    f'<li class="{css}"><code>{escape(name)}</code> changed {now} models '
                    f"(the night before: {was})</li>"
                )
        if last.nodes_removed != before.nodes_removed:
            css = "worse" if last.nodes_removed < before.nodes_removed else "better"
            items.append(
                f'<li class="{css}">the default passes removed {last.nodes_removed} nodes '
                f"(the night before: {before.nodes_removed})</li>"
            )
        items.append(f"<li>the sweep took {last.wall_s:g} s (the night before: {before.wall_s:g} s)</li>")
    body = "".join(items) or "<li>nothing changed</li>"
    return f"<h2>Last night, {escape(last.date)}</h2><ul>{body}</ul>"


def _passes(nights: Sequence[Night]) -> str:
    dates = [night.date for night in nights]
    names = sorted({name for night in nights for name in night.changed} | _culprits(nights))
    last = nights[-1]
    # the passes with open bugs first, then those that fire most
    names.sort(key=lambda name: (-_open_in(last, name), -last.changed.get(name, 0), name))
    rows = []
    for name in names:
        open_bugs = [_open_in(night, name) for night in nights]
        changed = [night.changed.get(name, 0) for night in nights]
        rows.append(
            f"<tr><td><code>{escape(name)}</code></td><td>{heat_strip(open_bugs, dates)}</td>"
            f'<td class="n">{open_bugs[-1]}</td>'
            f"<td>{line_chart(changed, dates, SPARK, f'{name}: models changed')}</td>"
            f'<td class="n">{changed[-1]}</td></tr>'
        )
    legend = " ".join(
        f'<svg width="{CELL}" height="{CELL}"><rect width="{CELL}" height="{CELL}" fill="{colour}"/>'
        f"</svg> {text}"
        for colour, text in zip(HEAT, ("none", "1", "2", "3–4", "5+"), strict=True)
    )
    return (
        "<h2>Per pass</h2><p>Open bugs night by night (oldest left): " + legend + "</p>"
        "<table><tr><th>pass</th><th>open bugs per night</th><th>last</th>"
        "<th>models changed per night</th><th>last</th></tr>" + "".join(rows) + "</table>"
    )


def _open_in(night: Night, name: str) -> int:
    """The bugs open on `night` that blame the pass `name` (among others, maybe)."""
    return sum(1 for bug in night.open_bugs().values() if name in bug.culprit.split(", "))


def _culprits(nights: Sequence[Night]) -> set[str]:
    return {name for night in nights for bug in night.bugs.values() for name in bug.culprit.split(", ")}


def _bugs(history: History, repository: str) -> str:
    nights = history.nights
    first = history.first_nights()
    last = nights[-1]
    rows = []
    for fingerprint, date in sorted(first.items(), key=lambda item: (item[1], item[0]), reverse=True):
        bug = next(night.bugs[fingerprint] for night in reversed(nights) if fingerprint in night.bugs)
        status = last.bugs[fingerprint].status if fingerprint in last.bugs else "gone"
        rows.append(
            f"<tr><td><code>{escape(fingerprint[:12])}</code></td><td><code>{escape(bug.culprit)}</code></td>"
            f"<td>{escape(bug.kind)}</td><td>{escape(date)}</td><td>{escape(status)}</td>"
            f"<td>{_issue_link(fingerprint, repository)}</td></tr>"
        )
    return (
        "<h2>Bugs</h2><table><tr><th>bug</th><th>pass</th><th>kind</th><th>first night</th>"
        "<th>last night</th><th></th></tr>" + "".join(rows) + "</table>"
    )


def history_html(history: History, repository: str = "") -> str:
    """The page (see the module docstring); `repository` (owner/name) links each bug to its issue."""
    nights = history.nights
    if not nights:
        return "<!doctype html><title>ditox-ci history</title><p>No night recorded yet.</p>"
    last = nights[-1]
    dates = [night.date for night in nights]
    charts = (
        ("open bugs", [float(len(night.open_bugs())) for night in nights]),
        ("nodes the default passes removed", [float(night.nodes_removed) for night in nights]),
        ("sweep seconds", [night.wall_s for night in nights]),
    )
    figures = "".join(
        f"<figure><figcaption>{escape(title)}</figcaption>{line_chart(values, dates, CHART, title)}</figure>"
        for title, values in charts
    )
    build = f"{last.version}" + (f" ({last.describe})" if last.describe else "")
    head = (
        f"<h1>ditox-ci history: {escape(last.optimizer)}</h1>"
        f"<p>{len(nights)} night{'s' if len(nights) != 1 else ''}, {escape(nights[0].date)} to "
        f"{escape(last.date)}; last night swept {escape(build)} at <code>{escape(last.sha[:12])}</code>: "
        f"{last.models} models, {last.skipped} skipped, {len(last.open_bugs())} open bugs.</p>"
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>ditox-ci history: {escape(last.optimizer)}</title><style>{STYLE}</style></head><body>"
        f'{head}{_last_night(nights, repository)}<h2>Over the nights</h2><div class="charts">{figures}</div>'
        f"{_passes(nights)}{_bugs(history, repository)}</body></html>\n"
    )
