"""report.json's JSON Schema (shipped in the package) agrees with the report model and refuses
what publish must not act on: odd fingerprints, unknown statuses or kinds."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ditox_ci.errors import InputError
from ditox_ci.report.model import (
    CULPRIT_SCOPES,
    MODEL_STATUSES,
    STATUSES,
    Culprit,
    Finding,
    ModelEntry,
    Report,
)
from ditox_ci.report.schema import read_checked_report, report_schema, schema_errors
from ditox_ci.report.since import BAD, CHANGES, COMMITS, GOOD, RELEASES, SKIP, Point, Since, Tried

FINDING = Finding(
    fingerprint="0123456789abcdef0001",
    kind="output-mismatch",
    model="test_abs/model.onnx",
    config="pass:fuse_bn_into_conv",
    culprit=Culprit("pass", ("fuse_bn_into_conv",), "bisect", 3),
    measured={"message": "max_abs=1"},
    repro="repro/0123456789abcdef0001/",
)
REPORT = Report(
    tool={"name": "ditox-ci", "version": "0.1.0"},
    optimizer={"name": "onnxoptimizer", "version": "0.4.2", "passes": ["nop"], "default_passes": []},
    environment={"onnx": "1.23.2"},
    shard={"index": 0, "count": 1},
    models=(ModelEntry("test_abs/model.onnx", "onnx-node", "0" * 64),),
    findings=(FINDING,),
    coverage={},
    stats={"interrupted": False},
)


def test_enumerations_match_the_report_model() -> None:
    """The kinds' enumeration: tests/unit/report/test_kinds.py."""
    finding = report_schema()["$defs"]["finding"]["properties"]
    assert tuple(finding["status"]["enum"]) == STATUSES
    assert tuple(finding["culprit"]["properties"]["scope"]["enum"]) == CULPRIT_SCOPES
    assert tuple(report_schema()["$defs"]["model"]["properties"]["status"]["enum"]) == MODEL_STATUSES
    since = report_schema()["$defs"]["since"]["properties"]
    assert tuple(since["change"]["enum"]) == CHANGES
    assert tuple(since["over"]["enum"]) == (RELEASES, COMMITS)
    assert tuple(since["tried"]["items"]["properties"]["verdict"]["enum"]) == (GOOD, BAD, SKIP)


def test_a_bisected_finding_is_valid_and_reads_back() -> None:
    since = Since(
        RELEASES,
        "introduced",
        Point("0.3.8", "0.3.8"),
        Point("0.3.9", "0.3.9", "https://pypi.org/project/onnxoptimizer/0.3.9/"),
        tried=(Tried("0.3.8", GOOD, 3, 0), Tried("0.3.9", BAD, 3, 3)),
        builds=2,
    )
    report = replace(REPORT, findings=(replace(FINDING, since=since),))
    assert schema_errors(report.to_json()) == []
    assert Report.from_json(json.loads(json.dumps(report.to_json()))).findings[0].since == since


def test_a_report_the_model_writes_is_valid() -> None:
    assert schema_errors(REPORT.to_json()) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("findings", 0, "fingerprint"), ""),
        (("findings", 0, "fingerprint"), "0123456789abcdef.001"),
        (("findings", 0, "fingerprint"), "0123456789abcdef" * 6),
        (("findings", 0, "fingerprint"), "0123456789ABCDEF0001"),
        (("findings", 0, "status"), "reopen"),
        (("findings", 0, "kind"), "pwned"),
        (("findings", 0, "culprit", "scope"), "everything"),
        (("models", 0, "status"), "maybe"),
        (("models", 0, "verdicts"), {"judged_as": "a" * 64, "passed": [True]}),
        (("models", 0, "verdicts"), {"judged_as": "a" * 64, "passed": [], "results": {"default": "x"}}),
        (("models", 0, "cost_s"), True),
        (("shard", "index"), -1),
        (("stats", "interrupted"), "no"),
        (("schema_version",), 2),
    ],
)
def test_untrusted_values_are_refused(tmp_path: Path, path: tuple, value: object) -> None:
    data = copy.deepcopy(REPORT.to_json())
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    # an error only when both the compiled check and jsonschema refuse it: the first passing a
    # value the second refuses would let it through
    assert schema_errors(data), f"{path} = {value!r} should be refused"
    file = tmp_path / "report.json"
    file.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"does not follow the report\.json schema"):
        read_checked_report(file)
