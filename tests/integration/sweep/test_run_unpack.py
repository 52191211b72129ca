"""A shard job unpacks only the models it sweeps: globs and the shard's share are resolved from
the sources' indexes first (every shard job of a PR check unpacked all 1,884 operator cases)."""

from __future__ import annotations

from pathlib import Path

from ditox_ci.corpus import CorpusContext
from ditox_ci.corpus.node_cases import node_root
from ditox_ci.engine.shard import Shard
from ditox_ci.optimizers import load_optimizer
from ditox_ci.sweep.plan import plan_sweep
from ditox_ci.sweep.setup import SweepOptions


def test_each_shard_unpacks_its_own_models_and_no_other(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    root = node_root(CorpusContext(cache))
    swept: list[set[str]] = []
    for index in range(2):
        shard, out = Shard(index, 2), str(tmp_path / "out")
        options = SweepOptions(models=("onnx-node:test_a[bc]*",), shard=shard, cache_dir=str(cache), out=out)
        before = set(root.iterdir()) if root.exists() else set()
        _, jobs = plan_sweep(options, load_optimizer(options.optimizer).info)
        unpacked = {path.name for path in set(root.iterdir()) - before}
        swept.append({job.ref.id.removeprefix("onnx-node:") for job in jobs})
        assert unpacked == swept[-1]
    assert swept[0] and swept[1] and not swept[0] & swept[1]
