"""Write a report's files: `report.json` (the contract), `summary.md` and `coverage.svg` (for people)."""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ditox_ci.errors import InputError
from ditox_ci.report.bugs import bug_context
from ditox_ci.report.coverage import cannot_fire, coverage_svg, firing, never_fired
from ditox_ci.report.kinds import ModelStatus, verdicts_gate
from ditox_ci.report.model import Report, write_report
from ditox_ci.report.render import render
from ditox_ci.report.text import fit, utf8_size
from ditox_ci.safewrite import write_bytes_atomic, written_or_input_error

SKIPPED_SHOWN = 50
# the name a workflow uploads a report folder under unless told otherwise: the texts send readers
# to it, and a nightly's previous report is downloaded by it
REPORT_ARTIFACT = "ditox-report"
SUMMARY_LIMIT = 1024 * 1024 - 4096  # the step summary's 1 MiB, less room for what publish appends


def summary_context(report: Report) -> dict[str, Any]:
    failures = [f for f in report.findings if verdicts_gate(f.verdicts, f.tier, report.gate_tiers)]
    skipped = [m for m in report.models if m.status != ModelStatus.OK]
    reasons = Counter(m.reason.split(":")[0] for m in skipped)
    coverage = sorted(
        report.coverage.items(), key=lambda item: (-item[1]["models_changed"], item[0])
    )
    return {
        "report": report,
        "failures": failures,
        **bug_context(report),
        "skipped": skipped[:SKIPPED_SHOWN],
        "skipped_more": max(0, len(skipped) - SKIPPED_SHOWN),
        "skip_reasons": reasons.most_common(SKIPPED_SHOWN),
        "coverage": coverage,
        "never_fired": never_fired(report),
        "cannot_fire": sorted(cannot_fire(report).items()),
        "firing": firing(report),
        **effect_context(report),
    }


def _share(removed: int, of: int) -> str:
    return f"{removed} ({removed / of:.1%})" if of else str(removed)


def effect_context(report: Report) -> dict[str, Any]:
    """The summary's per-family table of the default config's node reduction: against the
    reference build's where the sweep compared with one (`stats.missed.by_family`)."""
    missed = report.stats.stages.get("missed")
    compared = missed.get("by_family") if isinstance(missed, dict) else None
    families = compared or report.stats.effect_by_family
    rows = []
    for family, totals in sorted(families.items()):
        nodes, after = int(totals.get("nodes", 0)), int(totals.get("after", 0))
        row = {"family": family, "models": int(totals.get("models", 0)), "nodes": nodes, "after": after}
        row["removed"] = _share(nodes - after, nodes)
        if compared:
            theirs = int(totals.get("reference_after", 0))
            row.update(reference_after=theirs, reference_removed=_share(nodes - theirs, nodes))
        rows.append(row)
    return {
        "effect_families": rows,
        "effect_reference": str(missed.get("reference", "")) if compared and isinstance(missed, dict) else "",
    }


def render_summary(report: Report, limit: int = SUMMARY_LIMIT) -> str:
    """summary.md, within `limit` bytes (GitHub's step summary takes 1 MiB) however big the run:
    as many bugs as fit are detailed, the rest counted and left to report.json."""
    context = summary_context(report)
    most = max(len(context["new_bugs"]), len(context["fixed_bugs"]))

    def render_with(shown: int) -> str:
        return render("summary.md.j2", **context, shown=shown)

    return fit(render_with, most, limit, "every finding is in report.json.", utf8_size)


@dataclass(frozen=True)
class WrittenOutputs:
    """Where report.json and summary.md went, and the summary's text (the step summary shows it too)."""

    report_path: Path
    summary_path: Path
    summary: str


def write_outputs(report: Report, out_dir: Path) -> WrittenOutputs:
    """Write report.json, summary.md and coverage.svg into `out_dir`, each whole or not at all; a
    folder that does not take them (a full disk) is an InputError naming the file."""
    path = out_dir / "report.json"
    summary = render_summary(report)
    summary_path = out_dir / "summary.md"
    # a message may quote a file name whose bytes are not UTF-8: written as \xff, never a crash
    files = [(path, None), (summary_path, summary)]
    if report.coverage:
        files.append((out_dir / "coverage.svg", coverage_svg(report)))
    for target, text in files:
        try:
            if text is None:
                write_report(report, target)
            else:
                write_bytes_atomic(target, text.encode("utf-8", "backslashreplace"))
        except OSError as exc:
            raise written_or_input_error(target, exc) from None
    return WrittenOutputs(path, summary_path, summary)


def prepare_out_dir(out_dir: Path, flag: str = "--out") -> Path:
    """Create `out_dir` and prove it takes a file, before any work: a folder that cannot be
    written (`/proc/x`, read-only) is the user's input to fix, found now rather than after a sweep."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        # a name of its own: two sweeps sharing a cache folder probe it at once
        with tempfile.NamedTemporaryFile(dir=out_dir, prefix=".ditox-write-test-"):
            pass
    except OSError as exc:
        raise InputError(
            f"{flag} {out_dir}: cannot write there ({exc.strerror or exc}); choose a writable folder"
        ) from None
    return out_dir
