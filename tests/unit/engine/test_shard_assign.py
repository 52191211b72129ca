"""Sharding: parse I/N, estimate cost, and split the corpus deterministically and evenly (models whole;
test_shard_split.py covers models split by config)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef, ModelSize
from ditox_ci.engine.plan import Step
from ditox_ci.engine.shard import Shard, estimate_cost, plan_jobs, previous_costs
from ditox_ci.errors import UsageError
from ditox_ci.report.model import ModelEntry, Report

STEPS = (Step("nop", ("nop",)), Step("default", ("a", "b")), Step("pass:a", ("a",)))


def _refs(costs: dict[str, float]) -> list[ModelRef]:
    return [ModelRef(id=name, source="test", path=f"/nowhere/{name}.onnx") for name in costs]


def assign(
    models: list[ModelRef], count: int, cost: Callable[[ModelRef], float], workers: int = 1
) -> list[list[ModelRef]]:
    """The models of each shard, for costs too small to split any model."""
    shards = plan_jobs(models, STEPS, count, workers, cost)
    assert all(job.steps == STEPS for shard in shards for job in shard)
    return [[job.ref for job in shard] for shard in shards]


def _chain_model(path: Path, nodes: int) -> ModelRef:
    graph = helper.make_graph(
        [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(nodes)],
        "chain",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info(f"t{nodes}", TensorProto.FLOAT, [1])],
    )
    onnx.save(helper.make_model(graph), path)
    return ModelRef(id=path.name, source="test", path=str(path))


@pytest.mark.parametrize(
    ("text", "expected"), [("0/1", (0, 1)), ("2/4", (2, 4)), (" 3 / 4 ", (3, 4))]
)
def test_parse_shard_accepts_index_over_count(text: str, expected: tuple[int, int]) -> None:
    assert Shard.parse(text) == Shard(*expected)
    assert str(Shard.parse(text)) == f"{expected[0]}/{expected[1]}"


@pytest.mark.parametrize("text", ["4/4", "1/0", "1", "a/b", "-1/3", "1/2/3", ""])
def test_parse_shard_rejects_malformed_or_out_of_range(text: str) -> None:
    with pytest.raises(UsageError, match="shard"):
        Shard.parse(text)


def test_every_model_lands_in_exactly_one_shard() -> None:
    rng = random.Random(7)
    costs = {f"m{i:03d}": rng.lognormvariate(0, 2) for i in range(97)}
    shards = assign(_refs(costs), 4, lambda ref: costs[ref.id])
    ids = [ref.id for shard in shards for ref in shard]
    assert sorted(ids) == sorted(costs)
    assert len(ids) == len(set(ids))


def test_assignment_is_cost_balanced_on_skewed_costs() -> None:
    rng = random.Random(11)
    costs = {f"m{i:03d}": rng.lognormvariate(0, 1.5) for i in range(200)}
    loads = [
        sum(costs[ref.id] for ref in shard)
        for shard in assign(_refs(costs), 4, lambda ref: costs[ref.id])
    ]
    assert max(loads) / (sum(loads) / len(loads)) <= 1.05


def test_assignment_does_not_depend_on_corpus_order() -> None:
    rng = random.Random(3)
    costs = {f"m{i:02d}": float(rng.randint(1, 5)) for i in range(40)}
    refs = _refs(costs)
    shuffled = refs[:]
    random.Random(5).shuffle(shuffled)
    first = [{ref.id for ref in shard} for shard in assign(refs, 3, lambda ref: costs[ref.id])]
    second = [{ref.id for ref in shard} for shard in assign(shuffled, 3, lambda ref: costs[ref.id])]
    assert first == second


def test_shard_runs_costliest_first_and_more_shards_than_models_leaves_some_empty() -> None:
    costs = {"b": 1.0, "a": 3.0, "c": 2.0}
    shards = assign(_refs(costs), 5, lambda ref: costs[ref.id])
    assert [len(shard) for shard in shards] == [1, 1, 1, 0, 0]
    both = assign(_refs(costs), 1, lambda ref: costs[ref.id], workers=2)
    # the costliest first, then the cheapest while the share of models done lags the share of work
    assert [ref.id for ref in both[0]] == ["a", "b", "c"]
    alone = assign(_refs(costs), 1, lambda ref: costs[ref.id])
    assert [ref.id for ref in alone[0]] == ["b", "a", "c"]


def test_duplicate_model_ids_are_refused() -> None:
    refs = _refs({"a": 1.0}) * 2
    with pytest.raises(UsageError, match="twice"):
        assign(refs, 2, lambda ref: 1.0)


def test_estimate_prefers_measured_time_then_grows_with_nodes(tmp_path: Path) -> None:
    small = _chain_model(tmp_path / "small.onnx", 2)
    large = _chain_model(tmp_path / "large.onnx", 200)
    assert estimate_cost(large, None) > estimate_cost(small, None) > 0
    assert estimate_cost(small, {"small.onnx": 42.0}) == 42.0
    assert estimate_cost(large, {"small.onnx": 42.0}) == estimate_cost(large, None)


def test_a_model_screened_is_expected_to_take_less_of_its_time_from_the_threshold_on() -> None:
    def sized(size: int) -> ModelRef:
        return ModelRef(id=f"m{size}", source="t", path="m.onnx", size=ModelSize(bytes=size, nodes=0))

    at, below = sized(64 * 2**20), sized(64 * 2**20 - 1)
    assert 0 < estimate_cost(at, None, screen_min_mb=64) < estimate_cost(at, None)
    assert estimate_cost(below, None, screen_min_mb=64) == estimate_cost(below, None)
    assert estimate_cost(at, None, screen_min_mb=None) == estimate_cost(at, None)  # screening off
    assert estimate_cost(at, {at.id: 5.0}, screen_min_mb=64) == 5.0  # a measured time stands


def test_unreadable_model_still_gets_a_positive_cost(tmp_path: Path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\xff not a model")
    assert estimate_cost(ModelRef(id="broken", source="t", path=str(broken)), None) > 0


def test_previous_costs_come_from_report_timings_and_drive_the_plan() -> None:
    report = Report(
        tool={},
        optimizer={},
        environment={},
        shard={"index": 0, "count": 1},
        models=(
            ModelEntry(id="heavy", source="t", sha256="", cost_s=9.0),
            ModelEntry(id="light", source="t", sha256="", cost_s=1.0),
            ModelEntry(id="unmeasured", source="t", sha256=""),
        ),
        findings=(),
        coverage={},
        stats={},
    )
    timings = previous_costs(report)
    assert timings == {"heavy": 9.0, "light": 1.0}
    refs = _refs({"heavy": 0, "light": 0, "also-light": 0})
    timings["also-light"] = 1.0
    shards = assign(refs, 2, lambda ref: estimate_cost(ref, timings))
    assert [[ref.id for ref in shard] for shard in shards] == [["heavy"], ["also-light", "light"]]
