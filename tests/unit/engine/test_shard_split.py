"""Sharding by (model, config): costly models split into parts over their configs, each part
repeating the nop control, and the parts' results combined back into one result per model."""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Sequence

import pytest

from ditox_ci.corpus import ModelRef
from ditox_ci.engine.outcome import Outcome
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import Job, JobCounts, JobResult
from ditox_ci.engine.reuse import OriginalInfo
from ditox_ci.engine.shard import combine_results, job_cost, makespan, plan_jobs, shard_walls, split_model

STEPS = (
    Step("nop", ("nop",)),
    Step("default", ("p0", "p1")),
    Step("fixed-point", ("p0", "p1"), fixed_point=True),
    *(Step(f"pass:p{index}", (f"p{index}",)) for index in range(12)),
)
LABELS = [step.label for step in STEPS]


def _refs(costs: dict[str, float]) -> list[ModelRef]:
    return [ModelRef(id=name, source="test", path=f"/nowhere/{name}.onnx") for name in costs]


def _skewed() -> dict[str, float]:
    """One model near 40 % of the sweep, a few mid-sized ones, many cheap ones."""
    rng = random.Random(5)
    costs = {f"small{index:03d}": rng.uniform(0.01, 2.0) for index in range(300)}
    costs.update({"mid-a": 60.0, "mid-b": 45.0, "mid-c": 30.0})
    costs["huge"] = 0.4 * sum(costs.values()) / 0.6
    return costs


def _plan(costs: dict[str, float], shards: int = 4, workers: int = 2) -> list[list[Job]]:
    return plan_jobs(_refs(costs), STEPS, shards, workers, lambda ref: costs[ref.id])


def _shape(plan: Sequence[Sequence[Job]]) -> list[list[tuple[str, list[str]]]]:
    return [[(job.ref.id, [step.label for step in job.steps]) for job in shard] for shard in plan]


def _job_cost(job: Job, costs: dict[str, float]) -> float:
    return job_cost(job, costs[job.ref.id], STEPS)


def test_plan_is_deterministic_and_ignores_corpus_order() -> None:
    costs = _skewed()
    refs = _refs(costs)
    shuffled = refs[:]
    random.Random(9).shuffle(shuffled)
    first = plan_jobs(refs, STEPS, 4, 2, lambda ref: costs[ref.id])
    again = plan_jobs(refs, STEPS, 4, 2, lambda ref: costs[ref.id])
    reordered = plan_jobs(shuffled, STEPS, 4, 2, lambda ref: costs[ref.id])
    assert _shape(first) == _shape(again) == _shape(reordered)


def test_every_model_config_pair_runs_once_and_every_part_starts_with_nop() -> None:
    costs = _skewed()
    plan = _plan(costs)
    jobs = [job for shard in plan for job in shard]
    pairs = Counter((job.ref.id, step.label) for job in jobs for step in job.steps)
    parts = Counter(job.ref.id for job in jobs)
    assert set(pairs) == {(model, label) for model in costs for label in LABELS}
    for (model, label), times in pairs.items():
        assert times == (parts[model] if label == "nop" else 1), (model, label)
    assert all(job.steps[0].label == "nop" for job in jobs)
    assert all(len(job.steps) >= 2 for job in jobs)


def test_the_huge_model_is_split_and_cheap_ones_are_not() -> None:
    costs = _skewed()
    parts = Counter(job.ref.id for shard in _plan(costs) for job in shard)
    assert parts["huge"] >= 4
    assert all(parts[model] == 1 for model in costs if model.startswith("small"))
    assert all(any(job.ref.id == "huge" for job in shard) for shard in _plan(costs))


def test_split_plan_meets_the_balance_target_whole_models_cannot() -> None:
    costs = _skewed()
    shards = _plan(costs)
    spans = [makespan([_job_cost(job, costs) for job in shard], 2) for shard in shards]
    mean = sum(spans) / len(spans)
    assert max(spans) / mean <= 1.25
    # with whole models some shard waits for "huge" alone, whatever the assignment
    whole_mean = sum(costs.values()) / (4 * 2)
    assert costs["huge"] / whole_mean > 1.25
    assert max(spans) < costs["huge"]


def _runs_of(
    shard: Sequence[Job], costs: dict[str, float], steps: Sequence[Step], workers: int
) -> list[tuple[str, float, float]]:
    """(model, start, end) of each job on a pool that takes the jobs in order, as WorkerPool does."""
    free = [(0.0, worker) for worker in range(workers)]
    runs = []
    for job in shard:
        start, worker = heapq.heappop(free)
        end = start + job_cost(job, costs[job.ref.id], steps)
        heapq.heappush(free, (end, worker))
        runs.append((job.ref.id, start, end))
    return runs


def _runs(shard: Sequence[Job], costs: dict[str, float], workers: int) -> list[tuple[str, float, float]]:
    return _runs_of(shard, costs, STEPS, workers)


def _finished_by(shard: Sequence[Job], costs: dict[str, float], workers: int) -> list[float]:
    """When each model of the shard is done: its last part's end."""
    done: dict[str, float] = {}
    for model, _, end in _runs(shard, costs, workers):
        done[model] = max(done.get(model, 0.0), end)
    return sorted(done.values())


def _done_share(finished: Sequence[float], fraction: float) -> float:
    return sum(1 for end in finished if end <= fraction * finished[-1]) / len(finished)


@pytest.mark.parametrize(("shards", "workers"), [(4, 2), (1, 2), (2, 4)])
def test_models_finish_steadily_not_all_at_the_end(shards: int, workers: int) -> None:
    """Costliest job first across all parts left "huge" and the mid-sized models unfinished until
    their last parts ran: a cancel after a third of the run kept almost nothing."""
    costs = _skewed()
    for shard in _plan(costs, shards, workers):
        finished = _finished_by(shard, costs, workers)
        assert _done_share(finished, 0.1) > 0
        assert _done_share(finished, 1 / 3) >= 0.25


def test_two_large_models_do_not_hold_both_workers_while_cheap_ones_wait() -> None:
    """The share of models done alone would start large-b after ~540 tiny models, at ~6.5 s."""
    costs = {"large-a": 10.0, "large-b": 9.0}
    costs.update({f"small{index:04d}": 0.03 for index in range(1000)})
    costs.update({f"tiny{index:04d}": 0.012 for index in range(1000)})
    (shard,) = _plan(costs, shards=1, workers=2)
    (_, _, a_ends), (_, b_starts, _) = (run for run in _runs(shard, costs, 2) if run[0].startswith("large"))
    assert b_starts >= a_ends
    assert [job.ref.id for job in shard[:1]] == ["large-a"]


def test_with_the_cheap_half_done_short_models_fill_in_while_the_count_lags_the_work() -> None:
    """A job that is most of the work alone, and the cheaper half done in seconds: the default
    sweep then ran zfnet512 and alexnet side by side for two minutes with nothing finishing."""
    costs = {"long-a": 300.0, "long-b": 60.0}
    costs.update({f"mid{index:03d}": 0.5 for index in range(200)})
    costs.update({f"tiny{index:03d}": 0.01 for index in range(200)})
    (shard,) = plan_jobs(_refs(costs), STEPS[:2], 1, 2, lambda ref: costs[ref.id])
    runs = _runs_of(shard, costs, STEPS[:2], 2)
    b_starts = next(start for model, start, _ in runs if model == "long-b")
    done_before = [model for model, _, end in runs if end <= b_starts and model.startswith("mid")]
    assert len(done_before) > 50


def test_each_shard_starts_with_its_costliest_job() -> None:
    costs = _skewed()
    for shard in _plan(costs):
        job_costs = [_job_cost(job, costs) for job in shard]
        assert job_costs[0] == max(job_costs)


def test_a_split_models_parts_run_in_a_row_of_the_costlier_models() -> None:
    """Between two parts of "huge" run only models of the cheaper half, never a mid-sized one."""
    costs = _skewed()
    (shard,) = _plan(costs, shards=1, workers=4)
    where = [index for index, job in enumerate(shard) if job.ref.id == "huge"]
    assert len(where) >= 2
    between = {job.ref.id for job in shard[where[0] : where[-1]]} - {"huge"}
    median = sorted(costs.values())[len(costs) // 2]
    assert all(costs[model] <= median for model in between)


def test_unsharded_run_splits_a_dominating_model_over_local_workers() -> None:
    costs = {"huge": 500.0, **{f"m{index}": 5.0 for index in range(20)}}
    (local,) = _plan(costs, shards=1, workers=4)
    assert sum(1 for job in local if job.ref.id == "huge") >= 3
    (alone,) = _plan(costs, shards=1, workers=1)
    assert [job.ref.id for job in alone] == list(costs)
    assert all(job.steps == STEPS for job in alone)


def test_cheap_models_run_whole_even_when_one_dominates() -> None:
    costs = {"big": 8.0, **{f"m{index}": 0.05 for index in range(10)}}
    jobs = [job for shard in _plan(costs) for job in shard]
    assert all(job.steps == STEPS for job in jobs)
    assert len(jobs) == len(costs)


def test_a_part_never_goes_below_one_config_besides_nop() -> None:
    few = STEPS[:3]
    costs = {"huge": 1000.0, "tiny": 1.0}
    jobs = [job for shard in plan_jobs(_refs(costs), few, 8, 2, lambda ref: costs[ref.id]) for job in shard]
    huge = [[step.label for step in job.steps] for job in jobs if job.ref.id == "huge"]
    assert sorted(huge) == [["nop", "default"], ["nop", "fixed-point"]]


# ---------------------------------------------------------------- combining part results

REF = ModelRef(id="m", source="test", path="/nowhere/m.onnx")


def _part(
    outcomes: dict[str, Outcome],
    status: str = "ok",
    reason: str = "",
    sha256: str = "abc",
    wall_s: float = 2.0,
    restarts: int = 0,
) -> JobResult:
    return JobResult(
        ref=REF,
        status=status,
        reason=reason,
        nodes=7 if sha256 else 0,
        sha256=sha256,
        outcomes=outcomes,
        info=OriginalInfo("random") if sha256 else OriginalInfo(),
        wall_s=wall_s,
        counts=JobCounts(len(outcomes), runtime_runs=1, cache_hits=1, screened=2, restarts=restarts),
    )


def test_combined_result_unites_outcomes_and_adds_up_times_and_counters() -> None:
    nop = Outcome(None, digest="n", changed=True)
    first = _part({"nop": nop, "default": Outcome(None, digest="d")}, restarts=1)
    second = _part({"nop": nop, "pass:p0": Outcome("output-mismatch", "x")}, wall_s=3.5)
    combined = combine_results([second, first], STEPS)
    assert combined.outcomes == {
        "nop": nop,
        "default": first.outcomes["default"],
        "pass:p0": second.outcomes["pass:p0"],
    }
    assert (combined.wall_s, combined.counts.optimizer_runs, combined.counts.runtime_runs) == (5.5, 4, 2)
    assert (combined.counts.cache_hits, combined.counts.screened, combined.counts.restarts) == (2, 4, 1)
    assert (combined.status, combined.nodes, combined.sha256, combined.ref) == ("ok", 7, "abc", REF)


def test_the_control_outcome_comes_from_the_part_with_the_earliest_configs() -> None:
    early = _part({"nop": Outcome("runtime-error", "early"), "default": Outcome(None)})
    late = _part({"nop": Outcome("runtime-error", "late"), "pass:p3": Outcome(None)})
    assert combine_results([late, early], STEPS).outcomes["nop"].message == "early"
    assert combine_results([early, late], STEPS).outcomes["nop"].message == "early"


def test_a_skipped_part_makes_the_model_skipped_with_its_reason() -> None:
    done = _part({"nop": Outcome(None), "default": Outcome(None)})
    skipped = _part({}, status="skipped", reason="the original model crashed", sha256="")
    combined = combine_results([skipped, done], STEPS)
    assert (combined.status, combined.reason) == ("skipped", "the original model crashed")
    assert (combined.sha256, combined.nodes) == ("abc", 7)
    assert combined.outcomes == done.outcomes


def test_a_single_part_is_the_result_itself() -> None:
    only = _part({"nop": Outcome(None)})
    assert combine_results([only], STEPS) is only


@pytest.mark.parametrize("count", [2, 3])
def test_combining_the_parts_of_a_split_model_gives_every_step_once(count: int) -> None:
    costs = {"m": 900.0, **{f"s{index}": 1.0 for index in range(5)}}
    jobs = [job for shard in _plan(costs, shards=count, workers=1) for job in shard if job.ref.id == "m"]
    assert len(jobs) > 1
    parts = [_part({step.label: Outcome(None, digest=step.label) for step in job.steps}) for job in jobs]
    combined = combine_results(parts, STEPS)
    assert sorted(combined.outcomes) == sorted(LABELS)
    assert combined.counts.optimizer_runs == len(LABELS) + len(jobs) - 1


def test_a_split_models_configs_are_dealt_out_so_the_head_of_the_list_spreads_over_the_parts() -> None:
    """The passes at the head of the list change most models (each a call and a run of its own on
    a screened model): cut into runs, they all fell in the first part."""
    ref = _refs({"m": 1.0})[0]
    parts = split_model(ref, STEPS, 4)
    assert [[step.label for step in job.steps] for job in parts] == [
        ["nop", "default", "pass:p2", "pass:p6", "pass:p10"],
        ["nop", "fixed-point", "pass:p3", "pass:p7", "pass:p11"],
        ["nop", "pass:p0", "pass:p4", "pass:p8"],
        ["nop", "pass:p1", "pass:p5", "pass:p9"],
    ]
    assert len(split_model(ref, STEPS[:3], 4)) == 2  # no part without a config of its own


def test_shard_walls_are_each_shards_jobs_in_order_on_its_workers() -> None:
    costs = {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}
    plan = [[Job(ref, STEPS) for ref in _refs(costs)[:2]], [Job(ref, STEPS) for ref in _refs(costs)[2:]]]
    walls = shard_walls(plan, lambda ref: costs[ref.id], STEPS, workers=1)
    assert walls == [7.0, 3.0]  # whole models cost what the model costs, one after another
    assert shard_walls(plan, lambda ref: costs[ref.id], STEPS, workers=2) == [4.0, 2.0]
    # a model's part costs its share of the model (and its own nop control), not the whole model
    (part, _) = split_model(_refs(costs)[0], STEPS, 2)
    assert shard_walls([[part]], lambda ref: costs[ref.id], STEPS, workers=1) == [_job_cost(part, costs)]
    assert _job_cost(part, costs) < costs["a"]
