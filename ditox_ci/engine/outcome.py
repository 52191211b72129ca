"""What one optimizer run of one model led to: the unit every oracle, localizer and reducer uses."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ditox_ci.report.fingerprint import fingerprint, normalize_message
from ditox_ci.report.kinds import kind_gates

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
class Outcome:
    """The verdict for (model, pass list).

    `kind` is None when the optimized model behaves like the original, else a finding kind.
    `digest` is the sha256 of the optimized model bytes ("" when the optimizer produced nothing);
    `changed` says whether those bytes differ from the original's.
    """

    kind: str | None
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    changed: bool = False

    @property
    def failed(self) -> bool:
        return self.kind is not None and kind_gates(self.kind)

    def same_failure(self, other: Outcome, *, same_interface: bool = True) -> bool:
        """The one "same failure" matcher (nop folding, localization, the base build, reduction).

        Same kind, and the same evidence: for an output mismatch the comparator, the way it differs
        (values, shape, dtype, length, …) and the magnitude band of its error, and, when both ran on
        models with the same interface, the output position. A reduction candidate
        (`same_interface=False`: it has other outputs) keeps a mismatch when its error is at least
        as severe, within a decade. For every other kind the message once addresses, numbers and names
        are normalized, and the signal. Warnings compare like failures, so a warning the nop
        control shows is not blamed on passes.
        """
        if self.kind is None or self.kind != other.kind:
            return False
        if self.evidence.get("signal") != other.evidence.get("signal"):
            return False
        if self.kind != "output-mismatch":
            return normalize_message(self.message) == normalize_message(other.message)
        mine, theirs = self.evidence, other.evidence
        if mine.get("comparator", "tensor") != theirs.get("comparator", "tensor"):
            return False
        if same_interface and _output_position(mine) != _output_position(theirs):
            return False
        if not same_interface:
            # `self` is a candidate cut out of the model `other` failed on: with the ops after the
            # wrong rewrite gone, it shows at least as clearly (a dropped Reshape may even show as
            # a shape change), never as a mere drift
            severity, other_severity = _severity(mine), _severity(theirs)
            return severity is None or other_severity is None or severity >= other_severity - 1
        if mine.get("reason") != theirs.get("reason"):
            return False
        band, other_band = magnitude_band(mine), magnitude_band(theirs)
        return band is None or other_band is None or abs(band - other_band) <= 1

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "evidence": self.evidence,
            "digest": self.digest,
            "changed": self.changed,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        return cls(
            kind=data.get("kind"),
            message=data.get("message", ""),
            evidence=dict(data.get("evidence", {})),
            digest=data.get("digest", ""),
            changed=bool(data.get("changed", False)),
        )


def failure_fingerprint(failure: Outcome, passes: Sequence[str], rewrites: Outcome | None = None) -> str:
    """The same bug's id however it was found: kind, culprit passes, the normalized message and
    signal, and the op types the culprit's rewrite of the original removed and added (`rewrites`,
    the outcome of the culprit passes alone; the failure itself by default).

    Nothing in it depends on reduction, so neither `--reduce-budget` nor a loaded machine (which
    stops reduction at another candidate) changes it."""
    evidence = (rewrites or failure).evidence
    message = f"{failure.message} {failure.evidence.get('signal', '')}"
    removed = [f"-{op}" for op in evidence.get("ops_removed", ())]
    added = [f"+{op}" for op in evidence.get("ops_added", ())]
    return fingerprint(failure.kind or "", passes, message, removed + added)

