"""What the pinpoint stage hands its workers: candidate folders and the culprit step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import make_feeds
from ditox_ci.pinpoint import Pinpointed, culprit_step, write_candidate
from ditox_ci.plan import Step
from ditox_ci.report.model import Culprit


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

    write_candidate(folder, model, feeds)

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
