"""Everything ditox-ci writes to GitHub, rendered from `templates/` and fitted to GitHub's limits.

Hidden HTML-comment markers make the bot's own objects findable again without the search API:
the sticky comment, one issue per fingerprint, and one comment per (issue, event, commit).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ditox_ci.report.bugs import Bug, bug_context
from ditox_ci.report.kinds import KNOWN
from ditox_ci.report.model import Finding, Report
from ditox_ci.report.render import render
from ditox_ci.report.since import Since
from ditox_ci.report.text import fit, hard_truncate, no_autolinks

BODY_LIMIT = 65_536
CHECK_SUMMARY_LIMIT = 65_535  # a check run's output.summary: one less than a comment body
TITLE_LIMIT = 256
_SAFE_BUNDLE = re.compile(r"^[A-Za-z0-9_.\-/]+$")
_FINGERPRINT_MARKER = re.compile(r"<!-- ditox-ci:fingerprint=([0-9A-Za-z_-]+) -->")


BISECTED = "bisected"


def sticky_marker(key: str) -> str:
    """The sticky comment's marker for `comment_key`: the key itself when it is plain, else a hash
    of it (two keys that differ only in characters a marker cannot hold, `ditox (ort)` and
    `ditox [ort]`, shared one comment)."""
    named = key if _marker_safe(key) == key else "sha256-" + hashlib.sha256(key.encode()).hexdigest()[:32]
    return f"<!-- ditox-ci:sticky key={named} -->"


def fingerprint_marker(fingerprint: str) -> str:
    return f"<!-- ditox-ci:fingerprint={_marker_safe(fingerprint)} -->"


def event_marker(event: str, fingerprint: str, sha: str) -> str:
    return f"<!-- ditox-ci:{event} fingerprint={_marker_safe(fingerprint)} sha={_marker_safe(sha)} -->"


def comment_marker(event: str, finding: Finding, sha: str) -> str:
    """A comment's marker: one per (event, fingerprint, commit), and a bisection's per result."""
    if event == BISECTED and finding.since is not None:
        return since_marker(finding.since)
    return event_marker(event, finding.fingerprint, sha)


def since_marker(since: Since) -> str:
    """What marks a bisection's result in an issue's body or comment: said once per result."""
    at = since.after.ref if since.after else ""
    return f"<!-- ditox-ci:since change={_marker_safe(since.change)} at={_marker_safe(at)} -->"


def fingerprint_in(body: str | None) -> str | None:
    match = _FINGERPRINT_MARKER.search(body or "")
    return match.group(1) if match else None


_SUBJECT_MARKER = re.compile(r"<!-- ditox-ci:subject model=([0-9A-Za-z_=-]*) config=([0-9A-Za-z_=-]*) -->")


def subject_marker(model: str, config: str) -> str:
    """The model and config an issue was filed on (base64url: any name fits a comment). Closing it
    as fixed takes a run that ran this very model and config: a fingerprint is public, and a report
    may claim it on any model that ran clean."""
    encoded = (base64.urlsafe_b64encode(text.encode()).decode() for text in (model, config))
    return "<!-- ditox-ci:subject model={} config={} -->".format(*encoded)


def subject_in(body: str | None) -> tuple[str, str] | None:
    """The (model, config) of an issue's subject marker; None when it has none or a broken one."""
    match = _SUBJECT_MARKER.search(body or "")
    if match is None:
        return None
    try:
        model, config = (base64.urlsafe_b64decode(part).decode() for part in match.groups())
    except (binascii.Error, UnicodeDecodeError):
        return None
    return model, config


_SCOPE_MARKER = re.compile(r"<!-- ditox-ci:scope optimizer=([0-9A-Za-z_=-]*) -->")


def scope_marker(optimizer: str) -> str:
    """Which optimizer's sweeps an issue belongs to (base64url): every workflow's token writes as
    the same bot, so an issue another workflow filed (an onnxslim nightly beside the onnxoptimizer
    one) is not this one's to note, reopen or close."""
    return f"<!-- ditox-ci:scope optimizer={base64.urlsafe_b64encode(optimizer.encode()).decode()} -->"


def scope_in(body: str | None) -> str | None:
    """The optimizer an issue's scope marker names; None when it has none or a broken one."""
    match = _SCOPE_MARKER.search(body or "")
    if match is None:
        return None
    try:
        return base64.urlsafe_b64decode(match.group(1)).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def with_scope(body: str, optimizer: str) -> str:
    """`body` with a scope marker (an issue filed before they existed is adopted by the sweep that
    sees its bug again); unchanged when it has one or the marker would not fit."""
    if scope_in(body) is not None:
        return body
    marked = f"{scope_marker(optimizer)}\n{body}"
    return marked if len(marked) <= BODY_LIMIT else body


def with_subject(body: str, model: str, config: str) -> str:
    """`body` with a subject marker (an issue filed before they existed gets one when seen again);
    unchanged when it has one or the marker would not fit."""
    if subject_in(body) is not None:
        return body
    marked = f"{subject_marker(model, config)}\n{body}"
    return marked if len(marked) <= BODY_LIMIT else body


# the note ends the body (`with_last_seen` appends it there): only a note that does is the bot's,
# whatever an untrusted text above it quotes
_LAST_SEEN = re.compile(
    r"^<!-- ditox-ci:last-seen families=([0-9A-Za-z_.,-]*) -->\n[^\n]*\n<!-- /ditox-ci:last-seen -->\s*\Z",
    re.M,
)
_FAMILIES_KEPT = 100
# the most with_last_seen appends to an issue body: the note, its markers and every family kept
_LAST_SEEN_ROOM = 300 + _FAMILIES_KEPT * 81


def model_family(model: str) -> str:
    """What a model is a variant of: its first path component, without extension and numbered
    suffix (`test_pad2/model.onnx` and `test_pad/model.onnx` are one family, `onnx-node:test_conv`
    another). A bug seen on a new family is news; on one more variant it is not."""
    first = re.split(r"[/\\]", model.strip("/"), maxsplit=1)[0]
    stem = re.sub(r"\.onnx$", "", first, flags=re.I)
    return _marker_safe(re.sub(r"[_.-]*\d+$", "", stem) or stem)


def last_seen_block(sha: str, day: str, models: int, families: set[str]) -> str:
    """The issue body's "last seen" note, edited in place on every run that sees the bug again."""
    kept = ",".join(sorted(_marker_safe(f) for f in families)[:_FAMILIES_KEPT])
    plural = "s" if models != 1 else ""
    return (
        f"<!-- ditox-ci:last-seen families={kept} -->\n"
        f"<sub>Last seen in commit {_marker_safe(sha)[:12]} on {day}, on {models} model{plural}.</sub>\n"
        "<!-- /ditox-ci:last-seen -->"
    )


def families_in(body: str | None) -> set[str] | None:
    """The model families an issue body has noted; None when it has no last-seen note yet."""
    match = _LAST_SEEN.search(body or "")
    return {f for f in match.group(1).split(",") if f} if match else None


def with_last_seen(body: str, block: str) -> str:
    """`body` with its last-seen note replaced by `block` (appended when it has none)."""
    if _LAST_SEEN.search(body):
        return _LAST_SEEN.sub(lambda _: block, body, count=1)
    room = BODY_LIMIT - len(block) - 2
    kept = body if len(body) <= room else hard_truncate(body, room, "the rest is in the report artifact.")
    return f"{kept.rstrip()}\n\n{block}\n"


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
    shared = "the optimizer's shared code" if finding.culprit.scope == "shared" else ""
    passes = " + ".join(finding.culprit.passes) or shared or finding.config or "unknown pass"
    title = f"[ditox-ci] {finding.kind} in {passes} on {finding.model}"
    title = no_autolinks(re.sub(r"\s+", " ", title)).replace("@", "@\u200b")
    return title if len(title) <= TITLE_LIMIT else title[: TITLE_LIMIT - 1] + "…"


# what every surface of an untrusted report (`--untrusted`: a fork's artifact) opens with
UNVERIFIED = (
    "> **Unverified.** This report comes from a run whose code ditox-ci cannot vouch for "
    "(a fork's artifact): it informs, it does not gate, and no issue is filed from it."
)


@dataclass(frozen=True)
class Texts:
    """Renders the bot's texts for one report; `artifact` and `run_url` say where the rest is,
    an `untrusted` report's comment and check open with UNVERIFIED, and under `fail_on: any`
    known findings are said to block."""

    report: Report
    sha: str
    artifact: str
    run_url: str | None
    limit: int = BODY_LIMIT
    untrusted: bool = False
    fail_on: str = "new"

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
            "unverified": UNVERIFIED if self.untrusted else "",
            # warnings never block, whatever `fail_on` says
            "known_block": any(f.status == KNOWN for f in self.report.failures(self.fail_on)),
        }

    def _bugs(self) -> dict[str, Any]:
        return bug_context(self.report)

    def bugs_page(self, template: str, limit: int, **extra: Any) -> str:
        """A page over the report's bugs (`templates/<template>`), as many of them shown as fit in
        `limit` characters, with a pointer to the artifact for the rest: what a surface writes."""
        bugs = self._bugs()

        def render_with(shown: int) -> str:
            return render(template, shown=shown, **extra, **bugs, **self._common())

        most = max(len(bugs["new_bugs"]), len(bugs["fixed_bugs"]))
        return fit(render_with, most, limit, self.pointer)

    def comment(self, key: str, in_place: bool = True) -> str:
        """The sticky comment; `in_place` False: its text elsewhere (the step summary)."""
        return self.bugs_page("comment.md.j2", self.limit, marker=sticky_marker(key), in_place=in_place)

    def check_summary(self) -> str:
        return self.bugs_page("check.md.j2", min(self.limit, CHECK_SUMMARY_LIMIT))

    def issue(self, finding: Finding, others: Sequence[str] = ()) -> str:
        """The bug report for a fingerprint; `others` are further models showing the same bug
        (the findings' models: the issue's own model under another config is not another model)."""
        others = [model for model in dict.fromkeys(others) if model != finding.model]
        subject = subject_marker(finding.model, finding.config)
        scope = scope_marker(self.report.optimizer.name)
        markers = f"{fingerprint_marker(finding.fingerprint)}\n{subject}\n{scope}"
        if finding.since is not None:
            markers += f"\n{since_marker(finding.since)}"
        same_bug = tuple(f for f in self.report.findings if f.fingerprint == finding.fingerprint)

        def render_with(self_contained: bool) -> str:
            return render(
                "issue.md.j2",
                marker=markers,
                f=finding,
                bug=Bug(same_bug or (finding,)),
                others=list(others)[:50],
                more_others=max(0, len(others) - 50),
                self_contained=self_contained,
                **self._common(),
            )

        # a standalone repro too long for the body (and the last-seen note publish appends) gives
        # way whole to the artifact's steps: a cut would leave a broken script and drop those steps
        text = render_with(True)
        if len(text) > self.limit - _LAST_SEEN_ROOM:
            text = render_with(False)
        return text if len(text) <= self.limit else hard_truncate(text, self.limit, self.pointer)

    def issue_comment(self, finding: Finding, event: str, closing: bool = False) -> str:
        text = render(
            "issue_comment.md.j2",
            marker=comment_marker(event, finding, self.sha),
            f=finding,
            event=event,
            closing=closing,
            **self._common(),
        )
        return text if len(text) <= self.limit else hard_truncate(text, self.limit, self.pointer)
