"""What later stages decided about a finding, as typed parts: its triage and its pinpointing.

`Finding.measured` holds what the sweep measured (the comparator's numbers, which vary by
comparator); what triage (why it is known, what the base build did, the re-runs) and pinpointing
(the reduction, the divergence, the standalone record, why it was not pinpointed) decided are
fields here, never keys a stage reads back out of a dict. report.json keeps them where it always
did, in the finding's `evidence` object beside the measured numbers: `evidence_json` writes that
object from the parts and `split_evidence` reads it back into them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

BASELINE_PREFIX = "baseline:"


class KnownSource(Enum):
    """Where a `known` verdict came from, strongest first (triage/classify.py)."""

    BASELINE = "baseline"
    BASE_OPTIMIZER = "base-optimizer"
    # a verdict the finding came with that no call at hand can decide again
    ENGINE = "engine"
    PREVIOUS = "previous"


@dataclass(frozen=True)
class KnownBy:
    """Why a finding is known: `entry` is the baseline entry that matched (source BASELINE)."""

    source: KnownSource
    entry: str = ""

    @property
    def baseline_entry(self) -> str | None:
        return self.entry if self.source is KnownSource.BASELINE else None

    def to_json(self) -> str:
        """`baseline:<entry id>`, `base-optimizer`, `previous` or `engine`, as report.json spells it."""
        return BASELINE_PREFIX + self.entry if self.source is KnownSource.BASELINE else self.source.value

    @classmethod
    def from_json(cls, text: Any) -> KnownBy | None:
        """None for anything ditox-ci does not write (it stays in the evidence as it was)."""
        if not isinstance(text, str):
            return None
        if text.startswith(BASELINE_PREFIX):
            return cls(KnownSource.BASELINE, text.removeprefix(BASELINE_PREFIX))
        known = {source.value: source for source in KnownSource if source is not KnownSource.BASELINE}
        return cls(known[text]) if text in known else None


@dataclass(frozen=True)
class Tries:
    """What re-running one finding showed: how many tries ran, and in how many the failure was back."""

    tries: int
    reproduced: int

    def to_json(self) -> dict[str, int]:
        return {"tries": self.tries, "reproduced": self.reproduced}


@dataclass(frozen=True)
class Triage:
    """What triage decided beyond the finding's status.

    `also_in`: the configs that showed the nop control's failure too (folded into its finding), and
    `original_fails` why failures with other messages were folded; `on_base` what the base build did
    instead of the failure (`base_tries` re-runs there), or `base_optimizer` the base build that
    showed it; `reproduce` what re-running it on this build showed; `known_by` why it is known;
    `stale_entry` the baseline entry a `fixed` record says no longer matches any finding."""

    also_in: tuple[str, ...] = ()
    original_fails: str | None = None
    on_base: str | None = None
    base_tries: int | None = None
    reproduce: Tries | None = None
    known_by: KnownBy | None = None
    base_optimizer: str | None = None
    stale_entry: str | None = None


class ReductionEnd(str, Enum):
    """Why a reduction stopped; report.json keeps the value."""

    MINIMAL = "minimal"  # no smaller candidate fails the same way
    BUDGET = "budget"  # time ran out: the smallest failing model found so far
    NOT_REPRODUCIBLE = "not-reproducible"  # the model as found no longer fails: run-to-run changes
    UNJUDGEABLE = "unjudgeable"  # the model as found cannot be judged as a candidate
    UNRECORDABLE = "unrecordable"  # its intermediate values could not be recorded

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Reduction:
    """How the reduction that made the repro went (`pinpoint.reduce.ReductionResult.record`)."""

    nodes_before: int
    nodes_after: int
    checks: int
    reason: ReductionEnd
    elapsed_s: float = 0.0

    @property
    def lost_the_failure(self) -> bool:
        """The model as found did not fail again (or could not be judged): no repro stands on it."""
        return self.reason in (ReductionEnd.NOT_REPRODUCIBLE, ReductionEnd.UNJUDGEABLE)

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "checks": self.checks,
            "reason": self.reason.value,
            "elapsed_s": self.elapsed_s,
        }


@dataclass(frozen=True)
class Pinpointing:
    """What pinpointing did beyond the culprit and the bundle (`Finding.culprit`, `Finding.repro`).

    `skipped`: why it did not start (a fuzz run out of time); `reduction` the reduction that ran,
    or `same_as` the finding ('model [config]') whose reduction and bundle this one reuses;
    `divergence` where inside the reduced model the mismatch starts (engine.divergence's record);
    `standalone` the issue's standalone record (report/standalone.py), `reproduces` filled by
    running its script; `error` why it could not be pinpointed."""

    skipped: str | None = None
    reduction: Reduction | None = None
    same_as: str | None = None
    divergence: Mapping[str, Any] | None = None
    standalone: Mapping[str, Any] | None = None
    error: str | None = None


def evidence_json(measured: Mapping[str, Any], triage: Triage, pinpointing: Pinpointing) -> dict[str, Any]:
    """The finding's `evidence` object: the measured numbers, then each stage's keys in the order
    the stages run (base build, re-runs, pinpointing, the known verdict)."""
    evidence = dict(measured)
    decided: dict[str, Any] = {
        "also_in": list(triage.also_in) if triage.also_in else None,
        "original_fails": triage.original_fails,
        "on_base": triage.on_base,
        "base_tries": triage.base_tries,
        "reproduce": triage.reproduce.to_json() if triage.reproduce else None,
        "pinpoint_skipped": pinpointing.skipped,
        "reduction": (
            pinpointing.reduction.to_json()
            if pinpointing.reduction
            else {"same_as": pinpointing.same_as} if pinpointing.same_as is not None else None
        ),
        "divergence": dict(pinpointing.divergence) if pinpointing.divergence is not None else None,
        "standalone": dict(pinpointing.standalone) if pinpointing.standalone is not None else None,
        "pinpoint_error": pinpointing.error,
        "known_by": triage.known_by.to_json() if triage.known_by else None,
        "base_optimizer": triage.base_optimizer,
        "baseline_entry": triage.stale_entry,
    }
    for key, value in decided.items():
        if value is not None:
            evidence.pop(key, None)
            evidence[key] = value
    return evidence


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tries(value: Any) -> Tries | None:
    if isinstance(value, dict) and set(value) == {"tries", "reproduced"}:
        tries, reproduced = _count(value["tries"]), _count(value["reproduced"])
        if tries is not None and reproduced is not None:
            return Tries(tries, reproduced)
    return None


def _reduction(value: Any) -> Reduction | str | None:
    """A Reduction, the `same_as` text of a reused one, or None for anything else."""
    if not isinstance(value, dict):
        return None
    if set(value) == {"same_as"}:
        return _text(value["same_as"])
    keys = ("nodes_before", "nodes_after", "checks", "reason", "elapsed_s")
    if set(value) != set(keys):
        return None
    counts = [_count(value[key]) for key in keys[:3]]
    elapsed = value["elapsed_s"]
    ends = {end.value: end for end in ReductionEnd}
    reason = value["reason"] if isinstance(value["reason"], str) else None
    if None in counts or reason not in ends or not isinstance(elapsed, (int, float)):
        return None
    before, after, checks = (int(count or 0) for count in counts)
    return Reduction(before, after, checks, ends[reason], elapsed)


def _names(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and value and all(isinstance(name, str) for name in value):
        return tuple(value)
    return None


def split_evidence(evidence: Mapping[str, Any]) -> tuple[dict[str, Any], Triage, Pinpointing]:
    """A finding's `evidence` object → (measured, triage, pinpointing). A stage's key whose value
    is not what ditox-ci writes there (a crafted report) is left among the measured numbers, as it was."""
    measured = dict(evidence)
    parsed: dict[str, Any] = {}
    readers = {
        "also_in": _names,
        "original_fails": _text,
        "on_base": _text,
        "base_tries": _count,
        "reproduce": _tries,
        "pinpoint_skipped": _text,
        "reduction": _reduction,
        "divergence": lambda value: value if isinstance(value, dict) else None,
        "standalone": lambda value: value if isinstance(value, dict) else None,
        "pinpoint_error": _text,
        "known_by": KnownBy.from_json,
        "base_optimizer": _text,
        "baseline_entry": _text,
    }
    for key, read in readers.items():
        if key in measured and (value := read(measured[key])) is not None:
            parsed[key] = value
            del measured[key]
    reduction = parsed.get("reduction")
    triage = Triage(
        also_in=parsed.get("also_in", ()),
        original_fails=parsed.get("original_fails"),
        on_base=parsed.get("on_base"),
        base_tries=parsed.get("base_tries"),
        reproduce=parsed.get("reproduce"),
        known_by=parsed.get("known_by"),
        base_optimizer=parsed.get("base_optimizer"),
        stale_entry=parsed.get("baseline_entry"),
    )
    pinpointing = Pinpointing(
        skipped=parsed.get("pinpoint_skipped"),
        reduction=reduction if isinstance(reduction, Reduction) else None,
        same_as=reduction if isinstance(reduction, str) else None,
        divergence=parsed.get("divergence"),
        standalone=parsed.get("standalone"),
        error=parsed.get("pinpoint_error"),
    )
    return measured, triage, pinpointing
