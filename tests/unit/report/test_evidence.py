"""A finding's typed parts are written into report.json's `evidence` object, where each stage's
keys always were, and read back into the same parts; what ditox-ci does not write stays measured."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ditox_ci.report.evidence import KnownBy, KnownSource, Pinpointing, Reduction, ReductionEnd, Triage, Tries
from ditox_ci.report.model import Culprit, Finding

MEASURED = {"message": "output 'y' differs", "max_abs": 2.5, "sample": 1, "control": "invalid-model: x"}
EVERY_PART = Finding(
    "f" * 20,
    "output-mismatch",
    "m",
    "default",
    Culprit("pass", ("a",)),
    measured=MEASURED,
    triage=Triage(
        also_in=("pass:a",),
        original_fails="ONNX Runtime cannot load the original",
        on_base="no failure",
        base_tries=3,
        reproduce=Tries(2, 1),
        known_by=KnownBy(KnownSource.BASELINE, "entry-1"),
        base_optimizer="onnxoptimizer==0.4.1 (0.4.1)",
        stale_entry="entry-2",
    ),
    pinpointing=Pinpointing(
        skipped="out of time",
        reduction=Reduction(12, 2, 9, ReductionEnd.MINIMAL, 1.25),
        divergence={"tensor": "t", "producer": "", "rewritten": [], "max_abs": None, "compared": 3},
        standalone={"model": "<ir_version: 8>", "reproduces": True},
        error="JudgeError: gone",
    ),
)


def test_every_part_is_written_under_its_key_after_the_measured_numbers_and_read_back():
    evidence = EVERY_PART.to_json()["evidence"]
    assert list(evidence) == [
        *MEASURED,
        "also_in", "original_fails", "on_base", "base_tries", "reproduce", "pinpoint_skipped",
        "reduction", "divergence", "standalone", "pinpoint_error", "known_by", "base_optimizer",
        "baseline_entry",
    ]  # fmt: skip
    assert evidence["known_by"] == "baseline:entry-1"
    assert evidence["reproduce"] == {"tries": 2, "reproduced": 1}
    assert Finding.from_json(EVERY_PART.to_json()) == EVERY_PART


def test_a_reused_reduction_reads_back_as_the_finding_it_names():
    reused = replace(EVERY_PART, pinpointing=Pinpointing(same_as="other [default]"))
    assert reused.evidence["reduction"] == {"same_as": "other [default]"}
    assert Finding.from_json(reused.to_json()).pinpointing == Pinpointing(same_as="other [default]")


@pytest.mark.parametrize("text", ["base-optimizer", "previous", "engine", "baseline:", "baseline:a:b"])
def test_known_by_round_trips(text: str):
    known_by = KnownBy.from_json(text)
    assert known_by is not None and known_by.to_json() == text


COUNTS = {"nodes_before": 3, "nodes_after": 2, "checks": 1, "elapsed_s": 1}


@pytest.mark.parametrize(
    "stray",
    [
        {"known_by": "someone"},
        {"known_by": "baseline"},
        {"also_in": "nop"},
        {"reduction": {"nodes_after": 2}},
        # a reason no reduction gives (ReductionEnd), or none that is text
        {"reduction": {**COUNTS, "reason": "tired"}},
        {"reduction": {**COUNTS, "reason": ["minimal"]}},
        {"reproduce": {"tries": "3", "reproduced": 0}},
        {"standalone": "text"},
        {"base_tries": True},
    ],
)
def test_what_ditox_ci_does_not_write_under_a_stage_key_stays_measured_as_it_was(stray: dict):
    data = {**EVERY_PART.to_json(), "evidence": {"message": "m", **stray}}
    finding = Finding.from_json(data)
    assert finding.measured == {"message": "m", **stray}
    assert finding.triage == Triage() and finding.pinpointing == Pinpointing()
    assert finding.to_json() == data
