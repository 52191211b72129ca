"""The report stage: the `report.json` contract and its renderings."""

from ditox_ci.report.kinds import FINDING_KINDS, FindingKind
from ditox_ci.report.model import (
    SCHEMA_VERSION,
    STATUSES,
    Culprit,
    Finding,
    ModelEntry,
    Report,
    read_report,
    write_report,
)

__all__ = [
    "FINDING_KINDS",
    "SCHEMA_VERSION",
    "STATUSES",
    "Culprit",
    "Finding",
    "FindingKind",
    "ModelEntry",
    "Report",
    "read_report",
    "write_report",
]
