"""Everything ditox-ci writes to GitHub, rendered from `templates/` and fitted to GitHub's limits.

Hidden HTML-comment markers make the bot's own objects findable again without the search API:
the sticky comment, one issue per fingerprint, and one comment per (issue, event, commit).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ditox_ci.report.model import Finding, Report
from ditox_ci.report.render import render

BODY_LIMIT = 65_536
TITLE_LIMIT = 256
_SAFE_BUNDLE = re.compile(r"^[A-Za-z0-9_.\-/]+$")
_FINGERPRINT_MARKER = re.compile(r"<!-- ditox-ci:fingerprint=([0-9A-Za-z_-]+) -->")


def sticky_marker(key: str) -> str:
    return f"<!-- ditox-ci:sticky key={_marker_safe(key)} -->"


def fingerprint_marker(fingerprint: str) -> str:
    return f"<!-- ditox-ci:fingerprint={_marker_safe(fingerprint)} -->"


def event_marker(event: str, fingerprint: str, sha: str) -> str:
    return f"<!-- ditox-ci:{event} fingerprint={_marker_safe(fingerprint)} sha={_marker_safe(sha)} -->"


def fingerprint_in(body: str | None) -> str | None:
    match = _FINGERPRINT_MARKER.search(body or "")
    return match.group(1) if match else None


def _marker_safe(text: str) -> str:
    """Markers are matched as text; keep them to characters that cannot end an HTML comment."""
    return re.sub(r"[^0-9A-Za-z_.-]", "_", text)[:80]


def repro_dir(finding: Finding) -> str | None:
    """The bundle folder, when it is a plain relative path safe to paste into a shell."""
    bundle = (finding.repro or "").rstrip("/")
    if not bundle or not _SAFE_BUNDLE.match(bundle) or ".." in bundle or bundle.startswith("/"):
        return None
    return bundle


def issue_title(finding: Finding) -> str:
    passes = " + ".join(finding.culprit.passes) or finding.config or "unknown pass"
    title = f"[ditox-ci] {finding.kind} in {passes} on {finding.model}"
    title = re.sub(r"\s+", " ", title).replace("@", "@\u200b")
    return title if len(title) <= TITLE_LIMIT else title[: TITLE_LIMIT - 1] + "…"


def fit(render_with: Callable[[int], str], items: int, limit: int, pointer: str) -> str:
    """Render with as many detailed items as fit in `limit` characters (binary search).

    Templates cut each long string already; if even zero detailed items do not fit, the text is
    cut at a line boundary, open code fences and `<details>` are closed, and `pointer` says where
    the rest is.
    """
    text = render_with(items)
    if len(text) <= limit:
        return text
    low, high = 0, items - 1
    best: str | None = None
    while low <= high:
        middle = (low + high) // 2
        candidate = render_with(middle)
        if len(candidate) <= limit:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best if best is not None else hard_truncate(render_with(0), limit, pointer)


def hard_truncate(text: str, limit: int, pointer: str) -> str:
    note = f"\n\n_…truncated to GitHub's size limit: {pointer}_\n"
    cut = text[: max(0, limit - len(note) - 64)]
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


@dataclass(frozen=True)
class Texts:
    """Renders the bot's texts for one report; `artifact` and `run_url` say where the rest is."""

    report: Report
    sha: str
    artifact: str
    run_url: str | None
    limit: int = BODY_LIMIT

    @property
    def pointer(self) -> str:
        where = f" of [the run]({self.run_url})" if self.run_url else ""
        return f"the full report is in the `{self.artifact}` artifact{where}."

    def _common(self) -> dict[str, Any]:
        return {
            "report": self.report,
            "sha": self.sha,
            "artifact": self.artifact,
            "run_url": self.run_url,
            "repro_dir": repro_dir,
        }

    def _split(self) -> dict[str, list[Finding]]:
        by_status: dict[str, list[Finding]] = {"new": [], "known": [], "fixed": []}
        for finding in self.report.findings:
            by_status.setdefault(finding.status, []).append(finding)
        return by_status

    def comment(self, key: str) -> str:
        groups = self._split()
        baseline = self.report.stats.get("baseline", {})

        def render_with(shown: int) -> str:
            return render(
                "comment.md.j2",
                marker=sticky_marker(key),
                new=groups["new"],
                known=groups["known"],
                fixed=groups["fixed"],
                shown=shown,
                shown_known=min(shown + 50, 200),
                baseline=baseline,
                **self._common(),
            )

        return fit(render_with, len(groups["new"]), self.limit, self.pointer)

    def check_summary(self) -> str:
        groups = self._split()

        def render_with(shown: int) -> str:
            return render(
                "check.md.j2",
                new=groups["new"],
                known=groups["known"],
                fixed=groups["fixed"],
                shown=shown,
                **self._common(),
            )

        return fit(render_with, len(groups["new"]), self.limit, self.pointer)

    def issue(self, finding: Finding, others: Sequence[str] = ()) -> str:
        """The bug report for a fingerprint; `others` are further models showing the same bug."""
        text = render(
            "issue.md.j2",
            marker=fingerprint_marker(finding.fingerprint),
            f=finding,
            others=list(others)[:50],
            more_others=max(0, len(others) - 50),
            **self._common(),
        )
        return text if len(text) <= self.limit else hard_truncate(text, self.limit, self.pointer)

    def issue_comment(self, finding: Finding, event: str, closing: bool = False) -> str:
        text = render(
            "issue_comment.md.j2",
            marker=event_marker(event, finding.fingerprint, self.sha),
            f=finding,
            event=event,
            closing=closing,
            **self._common(),
        )
        return text if len(text) <= self.limit else hard_truncate(text, self.limit, self.pointer)
