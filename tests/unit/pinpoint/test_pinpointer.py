"""What the pinpoint stage hands its workers: candidate folders, the culprit step, the original."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import make_feeds, write_recorded_inputs
from ditox_ci.engine.original import Draw
from ditox_ci.engine.outcome import Outcome, failure_fingerprint
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import JobResult, WorkerConfig, WorkerPool
from ditox_ci.log import Log
from ditox_ci.pinpoint import pinpointer as pinpoint
from ditox_ci.pinpoint.pinpointer import Pinpointed, PinpointOptions, culprit_step
from ditox_ci.report.model import INTERNAL_ERROR, Culprit, Finding


def _model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Mul", ["b", "a"], ["m"]), helper.make_node("Add", ["m", "w"], ["y"])],
        "cut",
        # declared in another order than the feed dict, and with an initializer among the inputs
        [
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 3]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("a", TensorProto.INT64, [1, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(np.ones(3, np.float32), "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_candidate_folder_feeds_back_exactly_its_values_per_sample(tmp_path: Path) -> None:
    model = _model()
    feeds = [
        {"a": np.full((1, 3), sample, np.int64), "b": np.arange(3, dtype=np.float32)[None] + sample}
        for sample in range(2)
    ]
    folder = tmp_path / "candidate"

    write_recorded_inputs(folder, model, feeds)

    ref = ModelRef(id="c", source="reduce", path=str(folder / "model.onnx"), inputs_dir=str(folder))
    read = make_feeds(onnx.load(ref.path), ref, samples=2, seed=99, attempt=3)
    assert len(read) == 2
    for want, got in zip(feeds, read, strict=True):
        assert sorted(got) == ["a", "b"]
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
            assert got[name].dtype == want[name].dtype


def test_the_culprit_step_keeps_fixed_point_and_falls_back_to_what_is_known() -> None:
    config = Step("fixed-point", ("nop", "eliminate_identity", "eliminate_deadend"), fixed_point=True)
    nop = Step("nop", ("nop",))
    steps = {"nop": nop, "fixed-point": config}

    localized = culprit_step(config, Culprit("pass", ("eliminate_identity",)), steps)
    assert localized.passes == ("eliminate_identity",) and localized.fixed_point
    assert culprit_step(config, Culprit("infrastructure"), steps) == nop
    assert culprit_step(config, Culprit("unknown", config.passes), steps) == config


def test_pinpoint_stats_are_plain_json_numbers() -> None:
    stats = Pinpointed(findings=(), probe_runs=7, reduce_checks=10, bundles=1).to_json()
    assert stats == {"probe_runs": 7, "reduce_checks": 10, "bundles": 1, "errors": 0, "reductions_reused": 0}


def test_a_models_findings_share_one_load_and_one_draw_of_feeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[str] = []
    real_load = pinpoint.load_model
    monkeypatch.setattr(pinpoint, "load_model", lambda ref: loads.append(ref.id) or real_load(ref))
    refs = []
    for name in ("a", "b"):
        onnx.save(_model(), str(tmp_path / f"{name}.onnx"))
        refs.append(ModelRef(id=name, source="test", path=str(tmp_path / f"{name}.onnx")))
    pool = cast(WorkerPool, SimpleNamespace(config=WorkerConfig()))
    pinpointer = pinpoint._Pinpointer(pool, (), PinpointOptions(tmp_path), tmp_path, Log({}))
    a, b = (JobResult(ref, "ok", draw=Draw(WorkerConfig().settings.samples, attempt=1)) for ref in refs)

    first = pinpointer._original(a)
    again = pinpointer._original(a)
    other = pinpointer._original(b)

    assert loads == ["a", "b"]
    assert again[0] is first[0] and again[1] is first[1]
    settings = WorkerConfig().settings
    redrawn = make_feeds(first[0], refs[0], settings.samples, settings.seed, settings.dynamic_dim, 1)
    for want, got in zip(redrawn, first[1], strict=True):
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
    assert other[0] is not first[0]


def test_the_fingerprint_tells_findings_apart_by_culprit_and_the_ops_its_passes_rewrite() -> None:
    passes = ("fuse_bn_into_conv",)

    def mismatch(message: str, removed: list[str], added: list[str]) -> Outcome:
        evidence = {"ops_removed": removed, "ops_added": added}
        return Outcome("output-mismatch", message, evidence)

    key = failure_fingerprint(mismatch("output 'y' max_abs 2.0", ["Add"], []), passes)
    again = mismatch("output 'z' max_abs 0.5", ["Add"], [])
    assert failure_fingerprint(again, passes) == key
    for other in (mismatch("output 'y' max_abs 2.0", ["Mul"], []), mismatch("output 'y'", [], ["Add"])):
        assert failure_fingerprint(other, passes) != key
    assert failure_fingerprint(again, ("eliminate_identity",)) != key
    # a default-config failure rewrites more ops; the culprit's own rewrite decides
    default = mismatch("output 'y' max_abs 2.0", ["Add", "Identity"], [])
    assert failure_fingerprint(default, passes, rewrites=again) == key


def test_a_bug_of_ours_while_pinpointing_is_recorded_against_its_model_and_the_rest_goes_on(
    tmp_path: Path,
) -> None:
    """A worker's internal failure on a probe is ditox-ci's bug: the model is named in
    `internal_errors` (the run exits 70 at the end); a model the pool skipped is only a warning."""
    steps = (Step("nop", ("nop",)), Step("default", ("a_pass", "b_pass")))
    failure = Outcome("optimizer-error", "boom")
    refs = {name: ModelRef(id=name, source="test", path="-") for name in ("ours", "skipped", "later")}
    results = {name: JobResult(ref, "ok", outcomes={"default": failure}) for name, ref in refs.items()}
    verdicts = {"ours": JobResult(refs["ours"], INTERNAL_ERROR, reason="probe: KeyError: 'planted'")}

    def run(jobs):
        (job,) = jobs
        return [verdicts.get(job.ref.id, JobResult(job.ref, "skipped", reason="gone"))]

    pool = cast(WorkerPool, SimpleNamespace(config=WorkerConfig(), run=run))
    unknown = Culprit("unknown")
    findings = [Finding("0" * 20, "optimizer-error", name, "default", unknown) for name in refs]
    options = PinpointOptions(tmp_path)
    done = pinpoint.pinpoint(findings, list(results.values()), steps, pool, options, Log({}))

    assert dict(done.internal_errors) == {
        "ours": "pinpointing [default]: ours under probe:nop: probe: KeyError: 'planted'"
    }
    assert done.errors == 3
    assert [finding.model for finding in done.findings] == ["ours", "skipped", "later"]
    assert all("pinpoint_error" in finding.evidence for finding in done.findings)
