"""Localization, node-level divergence and reduction against planted faulty optimizers that call
the real onnxoptimizer, on models run by the real ONNX Runtime."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import localize_planted as planted
import onnx
import onnxoptimizer

from ditox_ci.engine.divergence import first_divergence
from ditox_ci.engine.outcome import Outcome, failure_fingerprint
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import WorkerConfig, WorkerPool
from ditox_ci.engine.values import Feeds
from ditox_ci.pinpoint.judge import PoolJudge
from ditox_ci.pinpoint.localize import PART_RUNS, VERIFY_RUNS, Probe, localize
from ditox_ci.pinpoint.reduce import reduce, same_finding
from ditox_ci.report.evidence import ReductionEnd

DEFAULT = tuple(onnxoptimizer.get_fuse_and_elimination_passes())
RTOL, ATOL = 1e-4, 1e-5


def outcome(model: onnx.ModelProto, feeds: Feeds, spec: str, passes: Sequence[str]) -> Outcome:
    return planted.engine_outcome(model, feeds, spec, passes, RTOL, ATOL)


def probe_for(model: onnx.ModelProto, feeds: Feeds, spec: str) -> Probe:
    return lambda passes: outcome(model, feeds, spec, passes)


def test_single_pass_fault_localizes_within_budget() -> None:
    model, feeds = planted.chain_model(), planted.feeds()
    spec = "localize_planted:single_pass_fault"
    failure = outcome(model, feeds, spec, DEFAULT)
    assert failure.kind == "output-mismatch"
    culprit = localize(DEFAULT, failure, probe_for(model, feeds, spec))
    assert (culprit.scope, culprit.passes) == ("pass", (planted.SINGLE_CULPRIT,))
    assert culprit.optimizer_runs <= 12


def test_pair_fault_is_an_ordered_interaction() -> None:
    model, feeds = planted.chain_model(nodes=60, fault_at=30), planted.feeds()
    spec = "localize_planted:pair_fault"
    failure = outcome(model, feeds, spec, DEFAULT)
    culprit = localize(DEFAULT, failure, probe_for(model, feeds, spec))
    assert (culprit.scope, culprit.passes) == ("interaction", planted.PAIR_CULPRITS)
    # the search, then the repeats that confirm it: the pair, and each of its passes alone
    assert culprit.optimizer_runs <= 24 + VERIFY_RUNS + 2 * PART_RUNS


def test_fault_in_every_run_is_infrastructure() -> None:
    model, feeds = planted.chain_model(nodes=20, fault_at=5), planted.feeds()
    spec = "localize_planted:infrastructure_fault"
    failure = outcome(model, feeds, spec, DEFAULT)
    assert failure.kind == "optimizer-error"
    culprit = localize(DEFAULT, failure, probe_for(model, feeds, spec))
    assert (culprit.scope, culprit.optimizer_runs) == ("infrastructure", 1)


def test_two_hundred_node_model_reduces_to_the_planted_pattern() -> None:
    model, feeds = planted.chain_model(nodes=200, fault_at=100), planted.feeds()
    spec = "localize_planted:single_pass_fault"
    passes = [planted.SINGLE_CULPRIT]
    failure = outcome(model, feeds, spec, passes)

    result = reduce(model, feeds, same_finding(lambda m, f: outcome(m, f, spec, passes), failure), 60.0)

    assert result.record.nodes_before == 200
    assert sorted(node.op_type for node in result.model.graph.node) == ["Add", "Mul"]
    assert result.record.reason is ReductionEnd.MINIMAL
    onnx.checker.check_model(result.model)
    assert outcome(result.model, result.feeds, spec, passes).kind == "output-mismatch"
    assert outcome(result.model, result.feeds, "onnxoptimizer", passes).kind is None


def test_reduction_of_a_model_that_does_not_fail_keeps_it() -> None:
    model, feeds = planted.chain_model(nodes=30, fault_at=10), planted.feeds()
    failure = Outcome("output-mismatch", "planted")
    result = reduce(
        model, feeds, same_finding(lambda m, f: outcome(m, f, "onnxoptimizer", DEFAULT), failure), 5
    )
    record = result.record
    assert (record.reason, record.nodes_after, record.checks) == (ReductionEnd.NOT_REPRODUCIBLE, 30, 1)


def test_first_divergence_names_the_rewritten_node() -> None:
    model, feeds = planted.chain_model(nodes=40, fault_at=20), planted.feeds()
    optimized = planted.single_pass_fault(model, [planted.SINGLE_CULPRIT], False)
    divergence = first_divergence(model, optimized, feeds, rtol=RTOL, atol=ATOL)
    assert divergence.tensor == "v20_add"
    assert divergence.producer.startswith("Add")
    assert [label.split()[0] for label in divergence.rewritten] == ["Add"]
    assert divergence.max_abs is not None and divergence.max_abs > ATOL


def test_same_bug_in_two_models_shares_a_fingerprint_other_culprit_does_not() -> None:
    spec = "localize_planted:single_pass_fault"
    passes = [planted.SINGLE_CULPRIT]
    prints = []
    for nodes, fault_at in ((120, 40), (80, 60)):
        model, feeds = planted.chain_model(nodes=nodes, fault_at=fault_at), planted.feeds()
        failure = outcome(model, feeds, spec, passes)
        prints.append(failure_fingerprint(failure, passes))
    assert prints[0] == prints[1]
    assert failure_fingerprint(failure, list(planted.PAIR_CULPRITS)) != prints[0]


def test_pool_judge_survives_an_aborting_optimizer(tmp_path: Path) -> None:
    model, feeds = planted.chain_model(nodes=10, fault_at=3), planted.feeds()
    config = WorkerConfig(optimizer=f"{planted.__file__}:aborting_fault", timeout_s=60.0)
    aborting = Step("culprit", (planted.ABORT_CULPRIT,))
    with WorkerPool(config) as pool:
        judge = PoolJudge(pool, tmp_path)
        crashed = judge.candidate("chain", model, feeds, aborting)
        assert crashed.kind == "optimizer-crash"
        assert crashed.evidence["signal"] == "SIGABRT"
        assert judge.candidate("chain", model, feeds, aborting).same_failure(crashed)
        assert judge.candidate("chain", model, feeds, Step("fine", ("eliminate_identity",))).kind is None
