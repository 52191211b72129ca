"""Since when a bug is there, and by which change: what `ditox-ci bisect` found for one finding.

A bisection walks ordered builds of the optimizer (its releases, or the commits between two refs)
and judges the finding's repro on each with the sweep's own "same failure" rule. What it records
(`Since`, a finding's `since` in report.json) is the range it narrowed the change to, every build
it tried and how sure it is:

- `change`: `introduced` (the bug entered: `before` is the last build without it, `after` the
  first with it), `fixed` (it left: `before` the last build with it, `after` the first without),
  `present-since-oldest` (every build tried has it: `after` is the oldest that could be tested),
  `absent` (no build tried has it: a bug of an unreleased build, `before` the newest release),
  `not-reproduced` (the build the bug was found with does not show it again: nothing to bisect), or
  `inconclusive` (builds that could not be tested, or a flaky bug, leave the range too wide or the
  verdict too unsure to name a change; `before`/`after` say what is known).
- `candidates`: the untestable builds between `before` and `after`, any of which may be the change
  (git bisect's "skipped" commits).
- `confidence`: the chance that no verdict of "good" was a flaky bug that did not show: 1.0 for a
  bug every run shows; for a flaky one, from its measured show rate and each good build's runs.
- `plausibility` (commits only): whether the named commit's diff touches the culprit pass's source,
  only shared code, or nothing that can change behaviour (docs, CI, tests: flagged, as syzbot does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INTRODUCED = "introduced"
FIXED = "fixed"
PRESENT_SINCE_OLDEST = "present-since-oldest"
ABSENT = "absent"
NOT_REPRODUCED = "not-reproduced"
INCONCLUSIVE = "inconclusive"
CHANGES = (INTRODUCED, FIXED, PRESENT_SINCE_OLDEST, ABSENT, NOT_REPRODUCED, INCONCLUSIVE)

GOOD, BAD, SKIP = "good", "bad", "skip"
# a good verdict's reason when the build has not the culprit pass
PASS_ABSENT = "it has no pass"
RELEASES, COMMITS = "releases", "commits"

# the diff of the named commit against the culprit pass's source
TOUCHES_THE_PASS = "the commit touches the culprit pass's source"
TOUCHES_SHARED_CODE = "the commit touches shared code, not the culprit pass's own source"
IMPLAUSIBLE = "implausible: the commit touches only docs, CI or tests"


@dataclass(frozen=True)
class Point:
    """One build of the optimizer a bisection can try: `ref` a release's version or a commit's full
    sha; `label` what a reader reads (`0.3.9`, `abc1234 Fix the fusion (#293)`); `url` its page."""

    ref: str
    label: str
    url: str = ""

    def to_json(self) -> dict[str, str]:
        data = {"ref": self.ref, "label": self.label}
        if self.url:
            data["url"] = self.url
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Point:
        return cls(str(data["ref"]), str(data.get("label", data["ref"])), str(data.get("url", "")))


@dataclass(frozen=True)
class Tried:
    """One build tried for one bug: its verdict (`good`, `bad`, `skip`), how many runs showed the
    same failure out of how many, and why it was skipped or called good without a run (`reason`)."""

    ref: str
    verdict: str
    runs: int = 0
    shown: int = 0
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ref": self.ref,
            "verdict": self.verdict,
            "runs": self.runs,
            "shown": self.shown,
        }
        if self.reason:
            data["reason"] = self.reason
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tried:
        return cls(
            str(data["ref"]),
            str(data["verdict"]),
            int(data.get("runs", 0)),
            int(data.get("shown", 0)),
            str(data.get("reason", "")),
        )


@dataclass(frozen=True)
class Since:
    """What bisecting one finding found (the module's docstring says each field)."""

    over: str
    change: str
    before: Point | None = None
    after: Point | None = None
    candidates: tuple[Point, ...] = ()
    tried: tuple[Tried, ...] = ()
    builds: int = 0
    confidence: float = 1.0
    plausibility: str = ""
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "over": self.over,
            "change": self.change,
            "tried": [t.to_json() for t in self.tried],
            "builds": self.builds,
            "confidence": round(self.confidence, 4),
        }
        for name in ("before", "after"):
            point = getattr(self, name)
            if point is not None:
                data[name] = point.to_json()
        if self.candidates:
            data["candidates"] = [p.to_json() for p in self.candidates]
        if self.plausibility:
            data["plausibility"] = self.plausibility
        if self.note:
            data["note"] = self.note
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Since:
        def point(name: str) -> Point | None:
            return Point.from_json(data[name]) if data.get(name) else None

        return cls(
            over=str(data["over"]),
            change=str(data["change"]),
            before=point("before"),
            after=point("after"),
            candidates=tuple(Point.from_json(p) for p in data.get("candidates", ())),
            tried=tuple(Tried.from_json(t) for t in data.get("tried", ())),
            builds=int(data.get("builds", 0)),
            confidence=float(data.get("confidence", 1.0)),
            plausibility=str(data.get("plausibility", "")),
            note=str(data.get("note", "")),
        )

    @property
    def headline(self) -> str:
        """The issue's one line: "introduced in 0.3.9 (0.3.8 is fine)", "introduced by abc1234 …"."""
        after = self.after.label if self.after else "?"
        before = self.before.label if self.before else "?"
        by = "in" if self.over == RELEASES else "by"
        sure = "" if self.confidence >= 0.999 else f", confidence {self.confidence:.0%}"
        if self.change == INTRODUCED:
            also = f"; or one of {', '.join(p.label for p in self.candidates)}" if self.candidates else ""
            fine = next((t.reason for t in self.tried if self.before and t.ref == self.before.ref), "")
            # a build without the culprit pass is good by that alone: the bug came with the pass
            fine = fine.replace("it has", "has") if fine.startswith(PASS_ABSENT) else "is fine"
            return f"introduced {by} {after} ({before} {fine}{also}{sure})"
        if self.change == FIXED:
            return f"fixed {by} {after} ({before} still has it{sure})"
        if self.change == PRESENT_SINCE_OLDEST:
            if self.over == RELEASES:
                return f"present since {after}, the oldest release that runs here"
            return f"already present at {after}, where the range starts"
        if self.change == ABSENT:
            where = "release" if self.over == RELEASES else "build tried"
            return f"in no {where} up to {before}: introduced after it"
        if self.change == NOT_REPRODUCED:
            return "not bisected: the build it was found with does not show it again"
        return f"not bisected: {self.note or 'inconclusive'} (between {before} and {after})"
