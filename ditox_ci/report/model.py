"""`report.json` (schema_version 1): the contract between stages, shards and the bot.

Every record is a frozen dataclass that round-trips through JSON (`to_json` / `from_json`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ditox_ci.errors import InputError
from ditox_ci.report.effect import ModelEffect
from ditox_ci.report.evidence import Pinpointing, Triage, evidence_json, split_evidence
from ditox_ci.report.header import Environment, OptimizerInfo, ShardOf, Tool
from ditox_ci.report.kinds import (
    FIXED,
    FLAKY,
    INVALID_MODEL,
    KNOWN,
    MISSED_OPTIMIZATION,
    NEW,
    RUNTIME_LOAD_ERROR,
    TIERS,
    FindingKind,
    ModelStatus,
    Status,
    by_severity,
    closes_gate,
)
from ditox_ci.report.since import Since
from ditox_ci.report.stats import SweepStats
from ditox_ci.safeload import one_line, parse_json, read_text
from ditox_ci.safewrite import write_bytes_atomic

SCHEMA_VERSION = 1
# What a report may cost before it is parsed (a fork writes its own, the previous run's comes from
# an artifact): the default sweep's is 3.3 MB, an all-config sweep's a few times that
MAX_REPORT_BYTES = 64 * 1024 * 1024
# schema_version 1's top level: anything else is refused, not carried along (24 MiB of `{}` under
# an unknown key passed every check and cost 1.4 GiB)
REPORT_KEYS = (
    "schema_version",
    "tool",
    "optimizer",
    "environment",
    "shard",
    "models",
    "findings",
    "coverage",
    "stats",
)

# `shared`: the same failure under most single passes but not in the nop control, one bug in the
# code every pass goes through (`Culprit.seen_under` names those passes), not one per pass;
# `nondeterministic`: a failure that comes and goes, blamed on no pass (`passes`: the smallest pass
# list that showed it; pinpoint/localize.py)
CULPRIT_SCOPES = ("pass", "interaction", "infrastructure", "shared", "nondeterministic", "unknown")
STATUSES = (NEW, KNOWN, FIXED, FLAKY)
INTERNAL_ERROR = ModelStatus.INTERNAL_ERROR
MODEL_STATUSES = tuple(ModelStatus)


@dataclass(frozen=True)
class Culprit:
    scope: str
    passes: tuple[str, ...] = ()
    method: str = ""
    optimizer_runs: int = 0
    # scope `shared`: the single passes that each showed the failure
    seen_under: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = {**asdict(self), "passes": list(self.passes), "seen_under": list(self.seen_under)}
        if not self.seen_under:  # additive: a report without shared culprits reads as before
            del data["seen_under"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Culprit:
        return cls(
            scope=data["scope"],
            passes=tuple(data.get("passes", ())),
            method=data.get("method", ""),
            optimizer_runs=int(data.get("optimizer_runs", 0)),
            seen_under=tuple(data.get("seen_under", ())),
        )


@dataclass(frozen=True)
class Finding:
    """One failing (model, config): who it is, what was measured, what triage and pinpointing decided.

    `kind` is the headline of `verdicts`, every way the config's result failed that the model's nop
    control does not show alike, the most severe first (`kinds.by_severity`); `tier` how wrong a
    values verdict is (`kinds.Tier`; None without one). `measured` holds the sweep's numbers (the
    comparator's, which vary by comparator, the message, what the nop control did); `triage` and
    `pinpointing` what later stages decided (`report.evidence`). report.json holds all three in one
    `evidence` object (`evidence`)."""

    fingerprint: str
    kind: FindingKind
    model: str
    config: str
    culprit: Culprit
    status: Status = NEW
    measured: dict[str, Any] = field(default_factory=dict)
    repro: str | None = None
    triage: Triage = field(default_factory=Triage)
    pinpointing: Pinpointing = field(default_factory=Pinpointing)
    verdicts: tuple[FindingKind, ...] = ()
    tier: str | None = None
    # where `ditox-ci bisect` found the bug entered or left (report/since.py)
    since: Since | None = None

    def __post_init__(self) -> None:
        # the types whatever the caller passed their names as
        object.__setattr__(self, "kind", FindingKind.named(self.kind))
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "verdicts", tuple(map(FindingKind.named, self.verdicts)))
        # none given, or a kind set anew (`replace(finding, kind=…)`): the kind's verdict alone
        if self.kind not in self.verdicts:
            object.__setattr__(self, "verdicts", (self.kind,))

    def closes_gate(self, gate_tiers: Collection[str] = TIERS) -> bool:
        """Whether this finding closes the gate: new, with a verdict that gates (a values verdict only
        in one of `gate_tiers`: `kinds.closes_gate`)."""
        return closes_gate(self.verdicts, self.status, tier=self.tier, gate_tiers=gate_tiers)

    @property
    def message(self) -> str:
        return str(self.measured.get("message", ""))

    def but_for_the_checker(self) -> Finding:
        """This finding as it would read had the checker accepted the optimized model (no
        `invalid-model` verdict, nor ONNX Runtime's refusal to load it, which most often refuses
        the same node; no `measured["checker"]`): what asks whether the rest of its change is by
        design, so that the checker refusing the result is the bug."""
        rest = tuple(kind for kind in self.verdicts if kind not in (INVALID_MODEL, RUNTIME_LOAD_ERROR))
        measured = {key: v for key, v in self.measured.items() if key != "checker"}
        return replace(
            self, kind=rest[0] if rest else self.kind, verdicts=rest or self.verdicts, measured=measured
        )

    @property
    def evidence(self) -> dict[str, Any]:
        """report.json's `evidence` object, for readers of the file's form (the texts' labelled
        rows, tests); a stage reads the typed parts."""
        return evidence_json(self.measured, self.triage, self.pinpointing)

    def to_json(self) -> dict[str, Any]:
        data = {
            "fingerprint": self.fingerprint,
            "kind": self.kind,
            "verdicts": list(self.verdicts),
            "model": self.model,
            "config": self.config,
            "culprit": self.culprit.to_json(),
            "status": self.status,
            "evidence": self.evidence,
            "repro": self.repro,
        }
        if self.tier is not None:
            data["tier"] = self.tier
        if self.since is not None:
            data["since"] = self.since.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        measured, triage, pinpointing = split_evidence(data.get("evidence", {}))
        return cls(
            fingerprint=data["fingerprint"],
            kind=FindingKind.named(data["kind"]),
            model=data["model"],
            config=data["config"],
            culprit=Culprit.from_json(data["culprit"]),
            status=Status(data.get("status", NEW)),
            measured=measured,
            repro=data.get("repro"),
            triage=triage,
            pinpointing=pinpointing,
            verdicts=by_severity(data.get("verdicts") or (data["kind"],)),
            tier=data.get("tier"),
            since=Since.from_json(data["since"]) if data.get("since") else None,
        )


@dataclass(frozen=True)
class Verdicts:
    """What a later sweep may reuse of a model's verdicts (engine/reuse.py): the original as judged
    (its bytes and first-drawn inputs, hashed), the distinct changed results that passed, by the
    sha256 of their bytes, sorted, and those that failed with their outcome (kind, message,
    evidence, the other verdicts); how the original's inputs were drawn (`draw`) and what running it
    said (`info`: the runner, a runner it fell back from, the noise floor), which a finding's
    pinpointing and evidence read. `control` is the digest of the nop control's result ("": it gave
    none) and `own` the configs whose result is not the control's bytes: every other config the
    model ran left it as the control did, which a PR check that leaves its passes unchanged need
    not ask again (`engine.reuse`, carried steps). `results` gives the digest of each of `own`'s
    results there is one of (not an optimizer's error): with the verdicts above and the model's
    `effect`, a PR check need not ask those again either."""

    judged_as: str
    passed: tuple[str, ...] = ()
    failed: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    draw: Mapping[str, Any] | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    control: str = ""
    own: tuple[str, ...] = ()
    results: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"judged_as": self.judged_as, "passed": list(self.passed)}
        if self.failed:
            data["failed"] = {digest: dict(outcome) for digest, outcome in self.failed.items()}
        if self.draw is not None:
            data["draw"] = dict(self.draw)
        if self.info:
            data["info"] = dict(self.info)
        if self.control:
            data["control"] = self.control
            data["own"] = list(self.own)
            if self.results:
                data["results"] = dict(sorted(self.results.items()))
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdicts:
        return cls(
            str(data["judged_as"]),
            tuple(str(digest) for digest in data.get("passed", ())),
            {str(digest): dict(outcome) for digest, outcome in dict(data.get("failed") or {}).items()},
            dict(data["draw"]) if data.get("draw") is not None else None,
            dict(data.get("info") or {}),
            str(data.get("control", "")),
            tuple(str(label) for label in data.get("own", ())),
            {str(label): str(digest) for label, digest in dict(data.get("results") or {}).items()},
        )


@dataclass(frozen=True)
class ModelEntry:
    id: str
    source: str
    sha256: str
    status: ModelStatus = ModelStatus.OK
    reason: str = ""
    nodes: int = 0
    cost_s: float = 0.0
    # the configs this entry ran when it is one part of a model split across shards; () = all
    configs: tuple[str, ...] = ()
    # which runner judged the model: "onnxruntime", or "reference" for an original ONNX Runtime
    # cannot load or run; "" when it was skipped before any runner could
    runner: str = ""
    # what a later sweep may reuse; None for a model not judged (skipped)
    verdicts: Verdicts | None = None
    # configs whose verdict this sweep reused from a stored report instead of judging it
    reused: int = 0
    # what the optimizer did to it (report/effect.py); None for a model not judged
    effect: ModelEffect | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ModelStatus(self.status))  # however its name was given

    def to_json(self) -> dict[str, Any]:
        # its own fields, not `asdict`'s deep copy of the verdicts and effect, replaced below: that
        # copy took twice as long as the rest of a default sweep's report.json
        data = {spec.name: getattr(self, spec.name) for spec in fields(self)}
        if self.configs:
            data["configs"] = list(self.configs)
        else:
            del data["configs"]
        if not self.runner:
            del data["runner"]
        # both additive: a report without them reads as before
        if self.verdicts is None:
            del data["verdicts"]
        else:
            data["verdicts"] = self.verdicts.to_json()
        if not self.reused:
            del data["reused"]
        if self.effect is None:
            del data["effect"]
        else:
            data["effect"] = self.effect.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelEntry:
        return cls(
            id=data["id"],
            source=data["source"],
            sha256=data.get("sha256", ""),
            status=ModelStatus(data.get("status", ModelStatus.OK)),
            reason=data.get("reason", ""),
            nodes=int(data.get("nodes", 0)),
            cost_s=float(data.get("cost_s", 0.0)),
            configs=tuple(data.get("configs", ())),
            runner=data.get("runner", ""),
            verdicts=Verdicts.from_json(data["verdicts"]) if data.get("verdicts") else None,
            reused=int(data.get("reused", 0)),
            effect=ModelEffect.from_json(data["effect"]) if data.get("effect") else None,
        )


@dataclass(frozen=True)
class Skips:
    """How much of a sweep's corpus did not run to a verdict (any status but ok), against the
    `--max-skipped` it ran with (its report's `stats.max_skipped`)."""

    skipped: int
    models: int
    limit: float | None
    # a whole sweep or a merge; a shard may hold only the models that skip: the merge judges it
    whole: bool

    @property
    def share(self) -> float:
        return self.skipped / self.models if self.models else 0.0

    @property
    def over_limit(self) -> bool:
        return self.limit is not None and self.share > self.limit

    @property
    def too_many(self) -> bool:
        """A whole sweep over the limit, which closes the gate like a new finding."""
        return self.whole and self.over_limit

    def said(self) -> str:
        return f"{self.share:.1%} of the corpus was skipped, more than --max-skipped {self.limit:g}"


# the header's records by their keys in report.json
_HEADER_RECORDS: dict[str, Any] = {
    "tool": Tool,
    "optimizer": OptimizerInfo,
    "environment": Environment,
    "shard": ShardOf,
    "stats": SweepStats,
}


@dataclass(frozen=True)
class Report:
    tool: Tool
    optimizer: OptimizerInfo
    environment: Environment
    shard: ShardOf
    models: tuple[ModelEntry, ...]
    findings: tuple[Finding, ...]
    coverage: dict[str, dict[str, int]]
    stats: SweepStats
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        # the records, whether given or as report.json's objects (a hand-built report's)
        for name, record in _HEADER_RECORDS.items():
            value = getattr(self, name)
            if isinstance(value, Mapping):
                object.__setattr__(self, name, record.from_json(value))

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "tool": self.tool.to_json(),
            "optimizer": self.optimizer.to_json(),
            "environment": self.environment.to_json(),
            "shard": self.shard.to_json(),
            "models": [m.to_json() for m in self.models],
            "findings": [f.to_json() for f in self.findings],
            "coverage": self.coverage,
            "stats": self.stats.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise InputError(
                f"report has schema_version {version!r}, this ditox-ci reads {SCHEMA_VERSION}; "
                "re-run the sweep with the same ditox-ci version"
            )
        unknown = sorted(set(data) - set(REPORT_KEYS))
        if unknown:
            names = ", ".join(repr(one_line(name, 40)) for name in unknown[:3])
            raise InputError(
                f"report has top-level keys that schema_version 1 does not have ({names}"
                f"{', …' if len(unknown) > 3 else ''}); it is not a file ditox-ci wrote"
            )
        return cls(
            tool=Tool.from_json(data.get("tool", {})),
            optimizer=OptimizerInfo.from_json(data.get("optimizer", {})),
            environment=Environment.from_json(data.get("environment", {})),
            shard=ShardOf.from_json(data.get("shard", {})),
            models=tuple(ModelEntry.from_json(m) for m in data.get("models", [])),
            findings=tuple(Finding.from_json(f) for f in data.get("findings", [])),
            coverage={k: dict(v) for k, v in data.get("coverage", {}).items()},
            stats=SweepStats.from_json(data.get("stats", {})),
        )

    def count(self, status: str) -> int:
        return sum(1 for f in self.findings if f.status == status)

    def internal_errors(self) -> list[ModelEntry]:
        """The models ditox-ci's own code failed on: the run exits 70 naming them."""
        return [entry for entry in self.models if entry.status == INTERNAL_ERROR]

    def failures(self, fail_on: str = "new") -> list[Finding]:
        """The findings that close the gate under `fail_on` (FAIL_ON): new ones, for the command
        line's exit code 1."""
        return [
            f for f in self.findings if closes_gate(f.verdicts, f.status, fail_on, f.tier, self.gate_tiers)
        ]

    @property
    def gate_tiers(self) -> tuple[str, ...]:
        """The tiers of values verdicts that gate (`--gate-tiers`, which the sweep records), and
        `missed-optimization` when the sweep ran with `--gate-missed` (`kinds.verdicts_gate`)."""
        missed = (MISSED_OPTIMIZATION,) if self.stats.gate_missed else ()
        return (*(self.stats.gate_tiers or TIERS), *missed)

    def closes_gate(self, fail_on: str = "new") -> bool:
        """The one gate rule, for exit codes, the Action's job and the check: a finding `fail_on`
        counts, or, unless it is `never`, a whole sweep that skipped more of its corpus than its
        limit (`skips`)."""
        return bool(self.failures(fail_on)) or (fail_on != "never" and self.skips().too_many)

    def skips(self) -> Skips:
        limit = self.stats.max_skipped
        return Skips(
            skipped=sum(1 for m in self.models if m.status != ModelStatus.OK),
            models=len(self.models),
            limit=None if limit is None else float(limit),
            whole=self.shard.whole,
        )


def strict_json(value: Any) -> Any:
    """`value` with every NaN/Infinity float replaced by the string "NaN", "Infinity" or "-Infinity":
    strict JSON parsers (jq, JavaScript, Go) reject Python's bare NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(item) for item in value]
    return value


def write_report(report: Report, path: Path) -> None:
    """Strict JSON, written atomically: a reader (a merge, the bot, a killed sweep's next run)
    sees the old report or the new one, never half of one."""
    text = json.dumps(strict_json(report.to_json()), indent=2, sort_keys=False, allow_nan=False) + "\n"
    write_text_atomic(path, text)


def write_text_atomic(path: Path, text: str) -> None:
    """`path` holds the old text or the new one, never half of one; a link planted at `path` is
    replaced, a link on the way to it is an OSError, never followed (publish writes as root into a
    folder a process the optimizer under test left behind could reach)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def parse_report_json(path: Path) -> dict[str, Any]:
    """The JSON object in `path`, or an InputError saying why there is none."""
    text = read_text(path, "report", "run `ditox-ci sweep --out DIR` first", MAX_REPORT_BYTES)
    data = parse_json(text, f"report {path}", InputError)
    if not isinstance(data, dict):
        raise InputError(f"report {path} is not a JSON object")
    return data


def read_report(path: Path) -> Report:
    data = parse_report_json(path)
    try:
        return Report.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"report {path} does not follow schema_version 1: {exc!r}") from None
