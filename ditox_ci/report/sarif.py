"""SARIF 2.1.0 for GitHub code scanning: one result per new finding, one rule per finding kind.

Code scanning then keeps its own open / fixed / dismissed lifecycle per `partialFingerprints`
(our fingerprint). A result points at the culprit pass's source file in the optimizer's
repository when the optimizer's layout is known, so the alert lands on the code that is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ditox_ci import PROJECT_URL
from ditox_ci.report.kinds import FINDING_KINDS, NEW, FindingKind, kind_gates, verdicts_gate
from ditox_ci.report.model import Finding, Report, write_text_atomic
from ditox_ci.report.upstream import pass_source

__all__ = ["sarif_log", "write_sarif"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = PROJECT_URL
# the place of last resort of a result no file is known for: the report itself
REPORT_URI = "report.json"
# where a finding's result goes: a file of the repository, None when none is known
Place = Callable[[Report, Finding], "str | None"]




def _level(kind: str) -> str:
    """A kind that gates is an error in code scanning, one that does not a note."""
    return "error" if kind_gates(kind) else "note"

def _rule_id(kind: str) -> str:
    return f"ditox-ci/{kind}"


def _rules() -> list[dict[str, Any]]:
    return [
        {
            "id": _rule_id(kind.value),
            "name": "".join(part.capitalize() for part in kind.value.split("-")),
            "shortDescription": {"text": kind.sarif_rule},
            "helpUri": f"{INFORMATION_URI}/blob/main/docs/cli.md",
            "defaultConfiguration": {"level": _level(kind.value)},
            "properties": {"tags": ["correctness", "onnx", "optimizer"]},
        }
        for kind in FindingKind
    ]


def _result(report: Report, finding: Finding, place: Place | None) -> dict[str, Any]:
    passes = " + ".join(finding.culprit.passes) or finding.culprit.scope
    message = finding.message.strip()[:2000]
    return {
        "ruleId": _rule_id(finding.kind),
        "ruleIndex": FINDING_KINDS.index(finding.kind),
        "level": "error" if verdicts_gate(finding.verdicts, finding.tier, report.gate_tiers) else "note",
        "message": {
            "text": f"{finding.kind} in {passes} on model {finding.model} (config {finding.config})"
            + (f": {message}" if message else "")
        },
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": (place or pass_source)(report, finding) or REPORT_URI},
                    "region": {"startLine": 1},
                }
            }
        ],
        "partialFingerprints": {"ditoxFingerprint/v1": finding.fingerprint},
        "properties": {
            "model": finding.model,
            "config": finding.config,
            "culprit": {"scope": finding.culprit.scope, "passes": list(finding.culprit.passes)},
            **({"repro": finding.repro} if finding.repro else {}),
        },
    }


def sarif_log(report: Report, place: Place | None = None) -> dict[str, Any]:
    """The log of the report's new findings, each placed on the file `place` names (publish: a
    file of the repository, as the check's annotations), else the culprit pass's source."""
    new = [f for f in report.findings if f.status == NEW]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ditox-ci",
                        "version": report.tool.version,
                        "informationUri": INFORMATION_URI,
                        "rules": _rules(),
                    }
                },
                # one category per optimizer: code scanning keeps their alerts apart
                "automationDetails": {"id": f"ditox-ci/{report.optimizer.name or 'optimizer'}/"},
                "results": [_result(report, f, place) for f in new],
            }
        ],
    }


def write_sarif(report: Report, path: Path, place: Place | None = None) -> None:
    write_text_atomic(path, json.dumps(sarif_log(report, place), indent=2) + "\n")
