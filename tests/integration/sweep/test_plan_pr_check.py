"""A PR check's plan costs a model by the configs it calls (sweep/plan.py `plan_sweep`): a model a
full sweep splits over the shards, each part loading it again, runs whole in a PR check that
carries all but the configs the PR changed. The model is made to dominate the sweep by a
`--previous` report that says it took 20 s, as light/vgg19 takes here."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from ditox_ci.control import NOP
from ditox_ci.engine.plan import build_steps
from ditox_ci.engine.shard import Shard
from ditox_ci.optimizers import load_optimizer
from ditox_ci.sweep.plan import plan_sweep
from ditox_ci.sweep.setup import SweepOptions
from tests.helpers import timed_report

HEAVY = "onnx-node:test_identity_opt"
MODELS = ("onnx-node:test_conv_with_strides*", HEAVY)
SHARDS = 3
INFO = load_optimizer("onnxoptimizer").info
PREVIOUS = timed_report({HEAVY: 20.0})


def _parts(tmp_path: Path, carried: Collection[str]) -> list[int]:
    """The jobs of HEAVY in each shard's plan."""
    parts = []
    for index in range(SHARDS):
        shard, cache = Shard(index, SHARDS), str(tmp_path / "cache")
        options = SweepOptions(models=MODELS, shard=shard, jobs=2, cache_dir=cache, out=str(tmp_path / "out"))
        _, jobs = plan_sweep(options, INFO, previous=PREVIOUS, carried=carried)
        parts.append(sum(job.ref.id == HEAVY for job in jobs))
    return parts


def test_a_pr_check_runs_whole_a_model_a_full_sweep_splits(tmp_path: Path) -> None:
    labels = {step.label for step in build_steps(SweepOptions().configs, (), INFO)}
    assert sum(_parts(tmp_path, ())) >= 2
    # a PR that changed fuse_bn_into_conv calls it alone, default and fixed-point: a few seconds of
    # a model whose full sweep took 20
    changed = {"default", "fixed-point", "pass:fuse_bn_into_conv"}
    assert sorted(_parts(tmp_path, labels - changed - {NOP})) == [0] * (SHARDS - 1) + [1]
