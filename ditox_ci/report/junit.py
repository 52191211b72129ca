"""JUnit XML for test-report tools: one test case per model × config.

A case fails with a new finding, is skipped when its model was skipped or its finding is known
(accepted by the baseline, the previous report or the base build), and passes otherwise.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from ditox_ci.report.kinds import FIXED, KNOWN, ModelStatus
from ditox_ci.report.model import Finding, Report, write_text_atomic

# XML 1.0 cannot carry most control characters at all, even escaped
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value: object, limit: int = 20_000) -> str:
    text = _NOT_XML.sub("\ufffd", str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _known_by(finding: Finding) -> str:
    known_by = finding.triage.known_by
    return known_by.to_json() if known_by else "known"


def _cases(report: Report) -> list[tuple[str, str]]:
    swept = report.stats.configs
    cases = [(entry.id, config) for entry in report.models for config in (entry.configs or swept)]
    # a finding whose config the model list does not name still gets its case
    cases += [(f.model, f.config) for f in report.findings if f.status != FIXED]
    return list(dict.fromkeys(cases))


def junit_xml(report: Report) -> str:
    skipped_models = {entry.id: entry.reason for entry in report.models if entry.status != ModelStatus.OK}
    findings: dict[tuple[str, str], list[Finding]] = {}
    for finding in report.findings:
        if finding.status != FIXED:
            findings.setdefault((finding.model, finding.config), []).append(finding)
    suite = ET.Element("testsuite", name=f"ditox-ci {report.optimizer.name or 'optimizer'}")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for model, config in _cases(report):
        case = ET.SubElement(suite, "testcase", classname=_text(model, 1000), name=_text(config, 1000))
        counts["tests"] += 1
        here = findings.get((model, config), [])
        new = [f for f in here if f.closes_gate(report.gate_tiers)]
        if new:
            counts["failures"] += 1
            for finding in new:
                failure = ET.SubElement(
                    case,
                    "failure",
                    message=_text(f"{finding.kind}: {finding.message}", 1000),
                    type=finding.kind,
                )
                failure.text = _text(
                    f"fingerprint {finding.fingerprint}\nculprit {finding.culprit.scope}: "
                    f"{' + '.join(finding.culprit.passes)}\nrepro {finding.repro or '(none)'}\n"
                    f"{finding.message}"
                )
        elif model in skipped_models:
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=_text(f"model skipped: {skipped_models[model]}", 1000))
        elif any(f.status == KNOWN for f in here):
            counts["skipped"] += 1
            reasons = sorted({_known_by(f) for f in here if f.status == KNOWN})
            ET.SubElement(case, "skipped", message=_text(f"known: {', '.join(reasons)}", 1000))
    for name, value in counts.items():
        suite.set(name, str(value))
    suite.set("errors", "0")
    suite.set("time", str(report.stats.wall_s))
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def write_junit(report: Report, path: Path) -> None:
    write_text_atomic(path, junit_xml(report))
