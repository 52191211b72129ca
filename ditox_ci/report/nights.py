"""`history.json`: the nights of a nightly sweep, compact and bounded, carried forward night to night.

A maintainer asks what changed over weeks: when a bug came, when a pass stopped firing, whether
the sweep got slower. One report says one night; `ditox-ci history` appends that night (`Night`)
to the previous night's `history.json` and keeps the last `MAX_NIGHTS`:

    {"schema_version": 1, "nights": [{"date": "2026-11-29", "sha": "96ddf59…", "run": "1234",
      "optimizer": "onnxoptimizer", "version": "0.4.2", "describe": "v0.4.2-37-g96ddf59",
      "wall_s": 68.1, "models": 2047, "skipped": 3, "nodes_removed": 15127,
      "changed": {"fuse_bn_into_conv": 40, …},
      "bugs": {"<fingerprint>": {"pass": "eliminate_shape_op", "kind": "optimizer-crash",
                                  "status": "known", "model": "…", "config": "…"}, …}}]}

`changed` is each pass's models changed (the report's coverage), `nodes_removed` what the default
config removed over all models (`stats.effect`), `bugs` one entry per bug (fingerprint) the night
had open or fixed, with its culprit (its passes joined, or its scope), kind and status: the
findings that gate (by the report's own `--gate-tiers`) and the missed optimizations, never a
warning nor what the baseline accepts.
`history.html` draws it (`report/nights_page.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ditox_ci.errors import InputError
from ditox_ci.report.effect import WHOLE_OPTIMIZER
from ditox_ci.report.evidence import KnownSource
from ditox_ci.report.kinds import FIXED, KNOWN, MISSED_OPTIMIZATION, NEW, ModelStatus, verdicts_gate
from ditox_ci.report.model import Finding, Report

HISTORY_VERSION = 1
HISTORY_FILE = "history.json"
MAX_NIGHTS = 90
# what a history may cost before it is parsed (it comes from an artifact): 90 nights of a few
# hundred bugs each
MAX_HISTORY_BYTES = 16 * 1024 * 1024
# a status's rank when a bug's findings differ: the bug is new if any finding is
_RANK: dict[str, int] = {NEW: 0, KNOWN: 1, FIXED: 3}


@dataclass(frozen=True)
class NightBug:
    """One bug as a night saw it."""

    culprit: str
    kind: str
    status: str
    model: str
    config: str

    def to_json(self) -> dict[str, str]:
        data = asdict(self)
        data["pass"] = data.pop("culprit")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NightBug:
        return cls(
            str(data["pass"]), str(data["kind"]), str(data["status"]), str(data["model"]), str(data["config"])
        )


@dataclass(frozen=True)
class Night:
    date: str
    sha: str
    optimizer: str
    version: str
    describe: str
    wall_s: float
    models: int
    skipped: int
    nodes_removed: int
    changed: Mapping[str, int] = field(default_factory=dict)
    bugs: Mapping[str, NightBug] = field(default_factory=dict)
    # the workflow run (GITHUB_RUN_ID), which a re-run keeps: "" outside one
    run: str = ""

    def same_as(self, other: Night) -> bool:
        """The same night run again: the same workflow run, or outside one the same date and commit."""
        if self.run or other.run:
            return self.run == other.run
        return (self.date, self.sha) == (other.date, other.sha)

    def to_json(self) -> dict[str, Any]:
        data = {key: value for key, value in asdict(self).items() if key not in ("changed", "bugs")}
        data["changed"] = dict(self.changed)
        data["bugs"] = {fingerprint: bug.to_json() for fingerprint, bug in self.bugs.items()}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Night:
        return cls(
            date=str(data["date"]),
            sha=str(data.get("sha", "")),
            optimizer=str(data.get("optimizer", "")),
            version=str(data.get("version", "")),
            describe=str(data.get("describe", "")),
            wall_s=float(data.get("wall_s", 0.0)),
            models=int(data.get("models", 0)),
            skipped=int(data.get("skipped", 0)),
            nodes_removed=int(data.get("nodes_removed", 0)),
            changed={str(name): int(n) for name, n in dict(data.get("changed") or {}).items()},
            bugs={str(f): NightBug.from_json(bug) for f, bug in dict(data.get("bugs") or {}).items()},
            run=str(data.get("run", "")),
        )

    def open_bugs(self) -> dict[str, NightBug]:
        return {fingerprint: bug for fingerprint, bug in self.bugs.items() if bug.status != FIXED}


def _culprit(finding: Finding) -> str:
    """The passes a bug is blamed on, or its scope when it is no pass's (a bug of the code every
    pass goes through, shared or not, or one that comes and goes, is no row of each pass)."""
    culprit = finding.culprit
    return ", ".join(culprit.passes) if culprit.scope in ("pass", "interaction") else culprit.scope


def _bugs(findings: Iterable[Finding]) -> dict[str, NightBug]:
    """One entry per fingerprint: its first finding's culprit, kind, model and config, and the
    most pressing status among its findings (new before known before fixed)."""
    bugs: dict[str, NightBug] = {}
    for finding in sorted(findings, key=lambda f: (f.model, f.config)):
        seen = bugs.get(finding.fingerprint)
        if seen is None:
            bugs[finding.fingerprint] = NightBug(
                _culprit(finding), finding.kind, finding.status, finding.model, finding.config
            )
        elif _RANK.get(finding.status, 2) < _RANK.get(seen.status, 2):
            bugs[finding.fingerprint] = NightBug(
                seen.culprit, seen.kind, finding.status, seen.model, seen.config
            )
    return dict(sorted(bugs.items()))


def _a_bug(finding: Finding, gate_tiers: tuple[str, ...]) -> bool:
    """A finding that gates (or a missed optimization) and that the baseline does not accept: a
    documented limitation is no bug of the night."""
    known_by = finding.triage.known_by
    if known_by is not None and known_by.source is KnownSource.BASELINE:
        return False
    return finding.kind == MISSED_OPTIMIZATION or verdicts_gate(finding.verdicts, finding.tier, gate_tiers)


def night_of(report: Report, date: str, sha: str, run: str = "") -> Night:
    """The night `report` (a whole sweep, classified) says, swept on `date` at commit `sha` in
    the workflow run `run`."""
    optimizer, build = report.optimizer, report.optimizer.build or {}
    whole = report.stats.effect.get(WHOLE_OPTIMIZER)
    return Night(
        date=date,
        sha=sha,
        optimizer=optimizer.name,
        version=optimizer.version,
        describe=str(build.get("git_describe", "")),
        wall_s=report.stats.wall_s,
        models=len(report.models),
        skipped=sum(1 for model in report.models if model.status != ModelStatus.OK),
        nodes_removed=-whole.nodes if whole is not None else 0,
        changed={
            name: int(counts.get("models_changed", 0)) for name, counts in sorted(report.coverage.items())
        },
        bugs=_bugs(f for f in report.findings if _a_bug(f, report.gate_tiers)),
        run=run,
    )


@dataclass(frozen=True)
class History:
    nights: tuple[Night, ...] = ()

    def with_night(self, night: Night, limit: int = MAX_NIGHTS) -> History:
        """The history with `night` as its last: the same night run again replaces the one
        recorded (`Night.same_as`), and only the last `limit` are kept."""
        kept = [n for n in self.nights if not n.same_as(night)]
        return History(tuple([*kept, night][-limit:]))

    def first_nights(self) -> dict[str, str]:
        """Per bug, the date of the first night it was open."""
        first: dict[str, str] = {}
        for night in self.nights:
            for fingerprint in night.open_bugs():
                first.setdefault(fingerprint, night.date)
        return first

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": HISTORY_VERSION, "nights": [night.to_json() for night in self.nights]}

    @classmethod
    def from_json(cls, data: Any, where: str) -> History:
        if not isinstance(data, Mapping) or data.get("schema_version") != HISTORY_VERSION:
            raise InputError(f"{where} is not a history.json of schema_version {HISTORY_VERSION}")
        try:
            return cls(tuple(Night.from_json(night) for night in data.get("nights") or ()))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{where} does not follow history.json's form: {exc!r}") from None
