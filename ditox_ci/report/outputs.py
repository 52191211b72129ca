"""Write a report's files: `report.json` (the contract), `summary.md` and `coverage.svg` (for people)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from ditox_ci.report.coverage import coverage_svg, never_fired
from ditox_ci.report.model import STATUSES, Report, write_report
from ditox_ci.report.render import render

SKIPPED_SHOWN = 50


def summary_context(report: Report) -> dict[str, Any]:
    failures = [f for f in report.findings if f.kind != "warning"]
    by_kind = Counter(f.kind for f in report.findings)
    by_culprit = Counter(
        ("+".join(f.culprit.passes) or f.culprit.scope, f.kind) for f in report.findings
    )
    skipped = [m for m in report.models if m.status != "ok"]
    reasons = Counter(m.reason.split(":")[0] for m in skipped)
    coverage = sorted(
        report.coverage.items(), key=lambda item: (-item[1]["models_changed"], item[0])
    )
    return {
        "report": report,
        "failures": failures,
        "by_kind": sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0])),
        "by_culprit": sorted(by_culprit.items(), key=lambda kv: (-kv[1], kv[0])),
        "skipped": skipped[:SKIPPED_SHOWN],
        "skipped_more": max(0, len(skipped) - SKIPPED_SHOWN),
        "skip_reasons": reasons.most_common(),
        "coverage": coverage,
        "never_fired": never_fired(report),
        "counts": {s: report.count(s) for s in STATUSES},
        "models_ok": len(report.models) - len(skipped),
    }


def render_summary(report: Report) -> str:
    return render("summary.md.j2", **summary_context(report))


def write_outputs(report: Report, out_dir: Path) -> Path:
    """Write report.json and summary.md into `out_dir`; returns the report path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.json"
    write_report(report, path)
    (out_dir / "summary.md").write_text(render_summary(report))
    if report.coverage:
        (out_dir / "coverage.svg").write_text(coverage_svg(report))
    return path
