"""report.json's `stats`: what a sweep (one shard, or the merge of all) did and cost.

`SweepStats` is written by the sweep and read back by the merge, which adds the shards' records
field by field (`SweepStats.merge`): counters add up, wall time is the slowest shard's (they run
in parallel), a limit is the strictest shard's, the configs are the first's (the merge checks they
agree). The records of other stages (pinpointing, the base build, re-runs, exercised passes, the
baseline's health, fuzzing) and keys this version does not name keep the rule they always had:
numbers add up, mappings add up key by key, anything else is the first shard's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ditox_ci.report.effect import Totals

EXERCISED_KEY = "exercised"
# per pass, per model family: models it changed, and models it was checked on (the coverage
# picture's cells and denominators)
CHANGED_BY_FAMILY = "coverage_by_family"
CHECKED_BY_FAMILY = "coverage_checked_by_family"


def add_up(total: Any, value: Any) -> Any:
    """Numbers add up, mappings add up key by key; anything else keeps the first shard's value."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value if total is None else total + value
    if isinstance(value, Mapping):
        base = dict(total) if isinstance(total, Mapping) else {}
        return {
            key: add_up(base.get(key), value[key]) if key in value else base[key] for key in {**base, **value}
        }
    return value if total is None else total


def stage_records(
    pinpoint: Mapping[str, Any] | None = None,
    base_optimizer: Mapping[str, Any] | None = None,
    reproduce: Mapping[str, Any] | None = None,
    exercised: Mapping[str, Any] | None = None,
    missed: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The records the sweep's stages wrote, by key (None: the stage did not run)."""
    records = {"pinpoint": pinpoint, "base_optimizer": base_optimizer, "reproduce": reproduce}
    records[EXERCISED_KEY] = exercised
    records["missed"] = missed
    return {key: dict(record) for key, record in records.items() if record is not None}


def _added(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The parts' mappings added up key by key (`add_up`), keys in first-seen order."""
    total: dict[str, Any] = {}
    for part in parts:
        total = add_up(total, part)
    return total


def family_counts(data: Any) -> dict[str, dict[str, int]]:
    """Per pass, per family, a count (`coverage_by_family`, `coverage_checked_by_family`) as read
    from report.json; {} for none."""
    return {
        str(name): {str(family): int(count) for family, count in dict(families).items()}
        for name, families in dict(data or {}).items()
    }


@dataclass(frozen=True)
class SweepStats:
    wall_s: float = 0.0
    optimizer_runs: int = 0
    runtime_runs: int = 0
    cache_hits: int = 0
    # single-pass steps a screen cleared without a call of their own (engine/screen.py)
    screened_steps: int = 0
    # results whose verdict was reused from a stored report (engine/reuse.py), not run or compared
    reused_verdicts: int = 0
    # steps of passes the PR leaves unchanged, carried from a stored report as the control's
    # result without a call (engine/reuse.py)
    carried_steps: int = 0
    # what the PR changed (triage/impact.py's JSON: since, files, passes, shared); None: not known
    impact: Mapping[str, Any] | None = None
    # seconds the workers spent inside the optimizer's calls (of the jobs that ended)
    optimizer_s: float = 0.0
    # the hash of what judged this sweep's verdicts (reuse.verdict_key): a later sweep with the same
    # key may reuse them; "" in a merge of shards that differ
    verdict_key: str = ""
    worker_restarts: int = 0
    models_total: int = 0
    models_skipped: int = 0
    # models each runner judged, in the order the runners first appear among the sorted models
    runners: Mapping[str, int] = field(default_factory=dict)
    configs: tuple[str, ...] = ()
    jobs: int = 0
    # per pass, per model family: models it changed, and models it was checked on
    coverage_by_family: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    coverage_checked_by_family: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # per config, what its results did to the models, added up (report/effect.py)
    effect: Mapping[str, Totals] = field(default_factory=dict)
    # per model family, the default config's models, their nodes and the nodes it left
    effect_by_family: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # the signal that stopped the sweep (the first interrupted shard's) before its work was done
    interrupted_by: str | None = None
    # what an interrupted sweep had planned (a stream plans nothing)
    models_planned: int | None = None
    # gate (exit 1) when a larger share of the corpus than this was skipped
    max_skipped: float | None = None
    # the tiers of values verdicts that gate (`--gate-tiers`); None: every tier
    gate_tiers: tuple[str, ...] | None = None
    # missed optimizations gate (`--gate-missed`)
    gate_missed: bool = False
    # a merge's: each shard's wall time, and the shards that were interrupted
    shard_wall_s: tuple[float, ...] | None = None
    interrupted_shards: tuple[int, ...] | None = None
    # by key, in the report's order: the records of other stages (pinpoint, base_optimizer,
    # reproduce, exercised, baseline, fuzz) and any key this version does not name
    stages: Mapping[str, Any] = field(default_factory=dict)

    @property
    def interrupted(self) -> bool:
        return self.interrupted_by is not None

    def to_json(self) -> dict[str, Any]:
        stats: dict[str, Any] = {
            "wall_s": self.wall_s,
            "optimizer_runs": self.optimizer_runs,
            "runtime_runs": self.runtime_runs,
            "cache_hits": self.cache_hits,
            "worker_restarts": self.worker_restarts,
            "models_total": self.models_total,
            "models_skipped": self.models_skipped,
            "runners": dict(self.runners),
            "configs": list(self.configs),
            "jobs": self.jobs,
            CHANGED_BY_FAMILY: {name: dict(families) for name, families in self.coverage_by_family.items()},
        }
        if self.screened_steps:  # additive, as the next ones
            stats["screened_steps"] = self.screened_steps
        if self.reused_verdicts:
            stats["reused_verdicts"] = self.reused_verdicts
        if self.carried_steps:
            stats["carried_steps"] = self.carried_steps
        if self.impact is not None:
            stats["impact"] = dict(self.impact)
        if self.optimizer_s:
            stats["optimizer_s"] = self.optimizer_s
        if self.verdict_key:
            stats["verdict_key"] = self.verdict_key
        if self.coverage_checked_by_family:  # additive: a report without it reads as before
            stats[CHECKED_BY_FAMILY] = {
                name: dict(families) for name, families in self.coverage_checked_by_family.items()
            }
        if self.effect:  # additive, as the next
            stats["effect"] = {label: totals.to_json() for label, totals in self.effect.items()}
        if self.effect_by_family:
            stats["effect_by_family"] = {family: dict(t) for family, t in self.effect_by_family.items()}
        if self.interrupted_by is not None:
            stats.update(interrupted=True, interrupted_by=self.interrupted_by)
        if self.models_planned is not None:
            stats["models_planned"] = self.models_planned
        for key, record in self.stages.items():
            stats[key] = dict(record) if isinstance(record, Mapping) else record
        if self.max_skipped is not None:
            stats["max_skipped"] = self.max_skipped
        if self.gate_tiers is not None:
            stats["gate_tiers"] = list(self.gate_tiers)
        if self.gate_missed:
            stats["gate_missed"] = True
        if self.shard_wall_s is not None:
            stats["shard_wall_s"] = list(self.shard_wall_s)
        if self.interrupted_shards is not None:
            stats["interrupted_shards"] = list(self.interrupted_shards)
        return stats

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepStats:
        """The record of a report's `stats`; what is missing takes its default, a stage's record or
        a key this version does not name is kept as it is. `interrupted_by` stands for a sweep that
        says it was interrupted without saying by what."""
        named = {spec.name for spec in fields(cls)} - {"stages"}
        interrupted = data.get("interrupted") or data.get("interrupted_by") is not None
        return cls(
            wall_s=float(data.get("wall_s", 0.0)),
            optimizer_runs=int(data.get("optimizer_runs", 0)),
            runtime_runs=int(data.get("runtime_runs", 0)),
            cache_hits=int(data.get("cache_hits", 0)),
            screened_steps=int(data.get("screened_steps", 0)),
            reused_verdicts=int(data.get("reused_verdicts", 0)),
            carried_steps=int(data.get("carried_steps", 0)),
            impact=dict(data["impact"]) if data.get("impact") is not None else None,
            optimizer_s=float(data.get("optimizer_s", 0.0)),
            verdict_key=str(data.get("verdict_key", "")),
            worker_restarts=int(data.get("worker_restarts", 0)),
            models_total=int(data.get("models_total", 0)),
            models_skipped=int(data.get("models_skipped", 0)),
            runners={str(name): int(count) for name, count in dict(data.get("runners") or {}).items()},
            configs=tuple(data.get("configs") or ()),
            jobs=int(data.get("jobs", 0)),
            coverage_by_family=family_counts(data.get(CHANGED_BY_FAMILY)),
            coverage_checked_by_family=family_counts(data.get(CHECKED_BY_FAMILY)),
            effect={str(label): Totals.from_json(t) for label, t in dict(data.get("effect") or {}).items()},
            effect_by_family=family_counts(data.get("effect_by_family")),
            interrupted_by=str(data.get("interrupted_by", "")) if interrupted else None,
            models_planned=int(data["models_planned"]) if data.get("models_planned") is not None else None,
            max_skipped=float(data["max_skipped"]) if data.get("max_skipped") is not None else None,
            gate_tiers=tuple(map(str, data["gate_tiers"])) if data.get("gate_tiers") is not None else None,
            gate_missed=bool(data.get("gate_missed", False)),
            shard_wall_s=tuple(map(float, data["shard_wall_s"])) if "shard_wall_s" in data else None,
            interrupted_shards=tuple(map(int, data["interrupted_shards"]))
            if "interrupted_shards" in data
            else None,
            stages={key: value for key, value in data.items() if key not in named and key != "interrupted"},
        )

    @classmethod
    def merge(
        cls,
        shards: Sequence[SweepStats],
        *,
        models_total: int,
        models_skipped: int,
        runners: Mapping[str, int],
        models_planned: int | None,
        effect: Mapping[str, Totals] | None = None,
    ) -> SweepStats:
        """The stats of the whole sweep from its shards', in shard order (see the module docstring);
        a merge records each shard's wall time. What only the merged models can say (models
        counted once, the runners that judged them, what an interrupted sweep planned) the
        caller gives, and the effect totals, which a model split over shards would count twice in
        its control."""
        first = shards[0]
        stages: dict[str, Any] = {}
        for shard in shards:
            for key, record in shard.stages.items():
                stages[key] = add_up(stages.get(key), record)
        limits = [shard.max_skipped for shard in shards if shard.max_skipped is not None]
        # a tier any shard gated on gates the whole sweep (None: every tier)
        tiers = [shard.gate_tiers for shard in shards]
        gated = None if None in tiers else tuple(dict.fromkeys(t for some in tiers if some for t in some))
        return replace(
            first,
            wall_s=max(shard.wall_s for shard in shards),
            optimizer_runs=sum(shard.optimizer_runs for shard in shards),
            runtime_runs=sum(shard.runtime_runs for shard in shards),
            cache_hits=sum(shard.cache_hits for shard in shards),
            screened_steps=sum(shard.screened_steps for shard in shards),
            reused_verdicts=sum(shard.reused_verdicts for shard in shards),
            carried_steps=sum(shard.carried_steps for shard in shards),
            optimizer_s=round(sum(shard.optimizer_s for shard in shards), 2),
            verdict_key=first.verdict_key if all(s.verdict_key == first.verdict_key for s in shards) else "",
            worker_restarts=sum(shard.worker_restarts for shard in shards),
            models_total=models_total,
            models_skipped=models_skipped,
            runners=dict(runners),
            jobs=sum(shard.jobs for shard in shards),
            coverage_by_family=_added([shard.coverage_by_family for shard in shards]),
            coverage_checked_by_family=_added([shard.coverage_checked_by_family for shard in shards]),
            effect=dict(effect) if effect is not None else first.effect,
            effect_by_family=_added([shard.effect_by_family for shard in shards]),
            interrupted_by=next((shard.interrupted_by for shard in shards if shard.interrupted), None),
            models_planned=models_planned,
            max_skipped=min(limits) if limits else None,
            gate_tiers=gated,
            gate_missed=any(shard.gate_missed for shard in shards),
            shard_wall_s=tuple(shard.wall_s for shard in shards),
            stages=stages,
        )
