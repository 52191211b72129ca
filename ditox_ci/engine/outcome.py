"""What one optimizer run of one model led to: the unit every oracle, localizer and reducer uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ditox_ci.report.fingerprint import normalize_message


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
        return self.kind is not None and self.kind != "warning"

    def same_failure(self, other: Outcome) -> bool:
        """Same kind and the same message once addresses, numbers and names are normalized.

        Warnings compare like failures, so a warning the nop control shows is not blamed on passes.
        """
        if self.kind is None or self.kind != other.kind:
            return False
        if self.kind == "output-mismatch":
            return True
        return normalize_message(self.message) == normalize_message(other.message)

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
