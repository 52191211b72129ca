"""What one optimizer run of one model led to: the unit every oracle, localizer and reducer uses."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ditox_ci.report.effect import Size
from ditox_ci.report.fingerprint import fingerprint, normalize_message
from ditox_ci.report.kinds import (
    INVALID_MODEL,
    RUNTIME_LOAD_ERROR,
    VALUES_KIND,
    FindingKind,
    kind_gates,
    severity,
)

# decades of error_scale (largest difference over the largest expected magnitude) bands are cut at;
# beyond them every error is "tiny" or "huge"
_BAND_LIMITS = (-9, 2)


def magnitude_band(evidence: dict[str, Any]) -> int | None:
    """The decade of an output mismatch's error relative to the output's own magnitude, or None
    when the comparator gave no such number (a task comparator, a shape difference)."""
    try:  # a report read back holds non-finite numbers as strings ("Infinity")
        scale = float(evidence["error_scale"])
    except (KeyError, TypeError, ValueError):
        return None
    if math.isnan(scale):
        return None
    low, high = _BAND_LIMITS
    if scale <= 0:
        return low
    if math.isinf(scale):
        return high
    return max(low, min(high, math.floor(math.log10(scale))))


def _severity(evidence: dict[str, Any]) -> int | None:
    """A mismatch's magnitude band, a structural one (shape, dtype, length …) above every band."""
    if evidence.get("reason", "values") != "values":
        return _BAND_LIMITS[1] + 1
    return magnitude_band(evidence)


def _output_position(evidence: dict[str, Any]) -> Any:
    """Position when the comparator gave one (a pass may rename outputs by design), else name."""
    return evidence.get("output_index", evidence.get("output"))


@dataclass(frozen=True)
class Verdict:
    """One way a result failed: a finding kind, and what was seen."""

    kind: FindingKind
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FindingKind.named(self.kind))  # however its name was given


@dataclass(frozen=True)
class Outcome:
    """The verdict for (model, pass list).

    `kind` is None when the optimized model behaves like the original, else the most severe of the
    verdicts the result shows (`kinds.severity`), with its `message`; `also` holds the others, less
    severe first to last (an optimized model both retyped and refused by the checker is an invalid
    model also changing the interface). `digest` is the sha256 of the optimized model bytes (""
    when the optimizer produced nothing); `changed` says whether those bytes differ from the
    original's; `reused` whether the verdict was judged before, in another run or on another build
    (engine/reuse.py), instead of in this job; `size` the changed result's size (report/effect.py;
    None when the result is the original or there is none).
    """

    kind: FindingKind | None
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    changed: bool = False
    also: tuple[Verdict, ...] = ()
    reused: bool = False
    size: Size | None = None

    def __post_init__(self) -> None:
        if self.kind is not None:  # however its name was given
            object.__setattr__(self, "kind", FindingKind.named(self.kind))

    @classmethod
    def of(cls, verdicts: Sequence[Verdict], evidence: dict[str, Any]) -> Outcome:
        """The outcome of a result that shows `verdicts` (none: it behaves like the original), its
        evidence's message the headline's."""
        if not verdicts:
            return cls(None, "", evidence)
        ordered = sorted(verdicts, key=lambda verdict: severity(verdict.kind))
        head = ordered[0]
        return cls(head.kind, head.message, {**evidence, "message": head.message}, also=tuple(ordered[1:]))

    def to_json(self) -> dict[str, Any]:
        """Its verdicts and evidence, as a report keeps a failure to reuse it (engine/reuse.py)."""
        also = [[verdict.kind, verdict.message] for verdict in self.also]
        return {"kind": self.kind, "message": self.message, "evidence": self.evidence, "also": also}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], digest: str = "", changed: bool = False) -> Outcome:
        kind = None if data.get("kind") is None else FindingKind.named(str(data["kind"]))
        also = tuple(Verdict(FindingKind.named(str(k)), str(message)) for k, message in data.get("also", ()))
        evidence = dict(data.get("evidence") or {})
        return cls(kind, str(data.get("message", "")), evidence, digest, changed, also)

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """Every verdict, the most severe first; () when nothing failed."""
        return () if self.kind is None else (Verdict(self.kind, self.message), *self.also)

    @property
    def kinds(self) -> tuple[FindingKind, ...]:
        return tuple(verdict.kind for verdict in self.verdicts)

    @property
    def failed(self) -> bool:
        return self.kind is not None and kind_gates(self.kind)

    def same_failure(self, other: Outcome, *, same_interface: bool = True) -> bool:
        """The one "same failure" matcher (nop folding, localization, the base build, reduction).

        The same verdicts (kinds, as `identity` has them), each with the same evidence: for an
        output mismatch the comparator, the way it differs (values, shape, dtype, length, …) and
        the magnitude band of its error, and, when both ran on models with the same interface, the
        output position. A reduction candidate (`same_interface=False`: it has other outputs) keeps
        a mismatch when its error is at least as severe, within a decade. For every other kind the
        message once addresses, numbers and names are normalized (but the checker's beside other
        verdicts: `_checker_beside_others`), and the signal. Warnings compare like failures, so a
        warning the nop control shows is not blamed on passes.
        """
        mine, theirs = self.identity, other.identity
        if not mine or [v.kind for v in mine] != [v.kind for v in theirs]:
            return False
        if self.evidence.get("signal") != other.evidence.get("signal"):
            return False
        worded = [(a, b) for a, b in zip(mine, theirs) if not _checker_beside_others(a, mine)]
        return all(self._same_verdict(a, b, other, same_interface) for a, b in worded)

    @property
    def identity(self) -> tuple[Verdict, ...]:
        """The verdicts that say which failure this is: all of them but ONNX Runtime refusing to load
        a model the checker refuses too, which most often refuses it for the same reason (a round
        trip that drops value types is one failure, whether or not ONNX Runtime also needs them)."""
        kinds = self.kinds
        return tuple(
            v for v in self.verdicts if not (v.kind == RUNTIME_LOAD_ERROR and INVALID_MODEL in kinds)
        )

    @property
    def identity_message(self) -> str:
        """The message a bug's identity keys on: the headline's, the checker's only when nothing
        else failed (`_checker_beside_others`)."""
        identity = self.identity
        return next((v.message for v in identity if not _checker_beside_others(v, identity)), self.message)

    def _same_verdict(self, mine: Verdict, theirs: Verdict, other: Outcome, same_interface: bool) -> bool:
        if mine.kind != VALUES_KIND:
            return normalize_message(mine.message) == normalize_message(theirs.message)
        ours, their_evidence = self.evidence, other.evidence
        if ours.get("comparator", "tensor") != their_evidence.get("comparator", "tensor"):
            return False
        if same_interface and _output_position(ours) != _output_position(their_evidence):
            return False
        if not same_interface:
            # `self` is a candidate cut out of the model `other` failed on: with the ops after the
            # wrong rewrite gone, it shows at least as clearly (a dropped Reshape may even show as
            # a shape change), never as a mere drift
            severity_, other_severity = _severity(ours), _severity(their_evidence)
            return severity_ is None or other_severity is None or severity_ >= other_severity - 1
        if ours.get("reason") != their_evidence.get("reason"):
            return False
        band, other_band = magnitude_band(ours), magnitude_band(their_evidence)
        return band is None or other_band is None or abs(band - other_band) <= 1

    def beyond(self, control: Outcome | None) -> Outcome:
        """This outcome without the verdicts `control` (the nop control's outcome on the same model)
        shows alike: what the config itself did. Nothing failed when every verdict is the control's."""
        if self.kind is None or control is None or control.kind is None:
            return self
        own = [
            verdict
            for verdict in self.verdicts
            if not any(
                verdict.kind == theirs.kind and self._same_verdict(verdict, theirs, control, True)
                for theirs in control.verdicts
            )
        ]
        if len(own) == len(self.verdicts):
            return self
        return replace(Outcome.of(own, self.evidence), digest=self.digest, changed=self.changed)


def _checker_beside_others(verdict: Verdict, identity: Sequence[Verdict]) -> bool:
    """The checker's verdict on a result that failed in other ways too: the checker names only the
    first problem it meets, which differs with what else the model holds (a round trip that drops
    value types on one build and not on another), so its words do not say which failure this is;
    the other verdicts do."""
    return verdict.kind == INVALID_MODEL and len(identity) > 1


def failure_fingerprint(failure: Outcome, passes: Sequence[str], rewrites: Outcome | None = None) -> str:
    """The same bug's id however it was found: the kinds of its verdicts (`Outcome.identity`: one
    kind alone hashes as before there were sets), culprit passes, the normalized message
    (`identity_message`) and signal, and the op types the culprit's rewrite of the original removed
    and added (`rewrites`, the outcome of the culprit passes alone; the failure itself by default).
    Every verdict the result shows counts, whatever the nop control showed: one result is one bug
    on builds whose round trips differ.

    Nothing in it depends on reduction, so neither `--reduce-budget` nor a loaded machine (which
    stops reduction at another candidate) changes it."""
    evidence = (rewrites or failure).evidence
    message = f"{failure.identity_message} {failure.evidence.get('signal', '')}"
    removed = [f"-{op}" for op in evidence.get("ops_removed", ())]
    added = [f"+{op}" for op in evidence.get("ops_added", ())]
    return fingerprint("+".join(v.kind for v in failure.identity), passes, message, removed + added)

