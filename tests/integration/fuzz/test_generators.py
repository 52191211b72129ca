"""Every generator, through the real checker, ONNX Runtime and each installed built-in optimizer
that has its pass: valid models that run finite, that the targeted pass rewrites (its config's
output is not the control's), and near-misses it leaves byte for byte alone, or is caught
rewriting wrongly (a near-miss is where fusions go wrong: ONNX Runtime's LayerNorm fusion does not
read its Pow's exponent)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from ditox_ci.__main__ import main_inner
from ditox_ci.engine import runner
from ditox_ci.errors import ConfigError
from ditox_ci.fuzz import GENERATORS, generate
from ditox_ci.optimizers import LoadedOptimizer, installed_optimizers, load_optimizer
from tests.helpers import run_cli

SEEDS = (0, 1, 2)
# the ONNX Runtime adapter at its basic level offers a part of the extended one's passes
OPTIMIZERS = [name for name in installed_optimizers() if name != "onnxruntime"]


@functools.cache
def _loaded(name: str) -> LoadedOptimizer:
    return load_optimizer(name)


def _owners(pass_name: str) -> list[str]:
    return [name for name in OPTIMIZERS if pass_name in _loaded(name).info.passes]


CASES = [
    (name, seed, near, optimizer)
    for name, gen in sorted(GENERATORS.items())
    for optimizer in _owners(name)
    for seed in SEEDS
    for near in ((False, True) if gen.near_misses else (False,))
]
# the passes of the name in optimizers the pattern does not follow: they fire on one seed at least
BORROWED = [
    (name, optimizer)
    for name, gen in sorted(GENERATORS.items())
    for optimizer in _owners(name)
    if gen.fires and optimizer not in gen.optimizers
]


def _optimized(optimizer: LoadedOptimizer, model: onnx.ModelProto, passes: list[str]) -> bytes:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    result = optimizer.optimize(copy, passes, False)
    return (optimizer.normalize(result) if optimizer.normalize else result).SerializeToString()


def _run(model: bytes, feeds: list[dict[str, Any]]) -> list[list[Any]]:
    """As the generators run their models: ONNX Runtime, or the reference runner for what it cannot
    load (a boolean Where)."""
    try:
        session = runner.load_session(model)
    except runner.RuntimeLoadError:
        session = runner.load_session(model, runner="reference")
    return runner.run_all(session, feeds)


def _outputs(model: bytes, feeds: list[dict[str, Any]]) -> list[list[Any]] | None:
    try:
        return _run(model, feeds)
    except (runner.RuntimeLoadError, runner.RuntimeRunError):
        return None


def _same_values(before: list[list[Any]], after: list[list[Any]] | None) -> bool:
    return after is not None and all(
        len(one) == len(other) and all(
            np.shape(a) == np.shape(b) and np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)
            for a, b in zip(one, other)
        )
        for one, other in zip(before, after)
    )


@pytest.mark.parametrize(("name", "seed", "near", "optimizer_name"), CASES)
def test_generator_fires_on_pattern_and_spares_near_miss(
    name: str, seed: int, near: bool, optimizer_name: str
) -> None:
    item = generate(name, seed, near_miss=near)
    onnx.checker.check_model(item.model, full_check=True)
    before = _run(item.model.SerializeToString(), item.feeds)
    for outputs in before:
        for value in outputs:
            assert value.dtype.kind not in "fc" or np.all(np.isfinite(value))
    optimizer = _loaded(optimizer_name)
    control = _optimized(optimizer, item.model, [])
    after = _optimized(optimizer, item.model, [name])
    if GENERATORS[name].fires and not near:
        fired = after != control
        assert fired or optimizer_name not in GENERATORS[name].optimizers, (
            f"{optimizer_name} {name} did not change its pattern"
        )
    elif after != control:  # a near-miss may only be rewritten wrongly: then it found a bug
        assert not _same_values(before, _outputs(after, item.feeds)), (
            f"{optimizer_name} {name} rewrote the near-miss and kept its values: it is no near-miss"
        )


@pytest.mark.parametrize(("name", "optimizer_name"), BORROWED)
def test_a_pattern_fires_the_pass_of_its_name_in_another_optimizer(name: str, optimizer_name: str) -> None:
    optimizer = _loaded(optimizer_name)
    items = [generate(name, seed, near_miss=False) for seed in SEEDS]
    assert any(
        _optimized(optimizer, item.model, [name]) != _optimized(optimizer, item.model, []) for item in items
    ), f"{optimizer_name} {name} changed none of seeds {SEEDS}"


def test_every_pass_of_every_builtin_optimizer_has_a_generator_or_a_reason() -> None:
    for name in OPTIMIZERS:
        info = _loaded(name).info
        cannot = dict(info.cannot_fire)
        missing = [p for p in info.passes if p not in GENERATORS and p not in cannot]
        assert not missing, f"{name}: no generator for {missing}"
        assert not [p for p in cannot if p in GENERATORS], f"{name}: a pass said not to fire has a generator"


def test_fuzz_cli_regenerates_the_same_bytes(tmp_path: Path) -> None:
    # a count, not the time budget, decides how many models: the two runs must write the same set
    args = ["fuzz", "--seed", "11", "--passes", "fuse_qkv,eliminate_nop_pad", "--no-sweep",
            "--budget", "600", "--limit", "4"]
    assert main_inner([*args, "--out", str(tmp_path / "a")], {}) == 0
    assert main_inner([*args, "--out", str(tmp_path / "b")], {}) == 0
    first = sorted((tmp_path / "a" / "corpus").rglob("*.*"))
    assert len(list((tmp_path / "a" / "corpus").glob("*/model.onnx"))) == 4
    assert sorted((tmp_path / "b" / "corpus").rglob("*.*")) == [
        tmp_path / "b" / path.relative_to(tmp_path / "a") for path in first
    ]
    for path in first:
        twin = tmp_path / "b" / path.relative_to(tmp_path / "a")
        assert path.read_bytes() == twin.read_bytes()
    model = generate("fuse_qkv", 11).model
    written = tmp_path / "a" / "corpus" / f"{generate('fuse_qkv', 11).id}" / "model.onnx"
    assert written.read_bytes() == model.SerializeToString()


def test_fuzz_cli_sweeps_generated_corpus(tmp_path: Path) -> None:
    out = tmp_path / "fuzz"
    code = main_inner(["fuzz", "--seed", "2", "--budget", "600", "--limit", "6", "--jobs", "1", "--passes",
                       "fuse_consecutive_transposes,eliminate_nop_transpose", "--out", str(out)],
                      {})
    assert code in (0, 1)
    report = json.loads((out / "report.json").read_text())
    for name in ("fuse_consecutive_transposes", "eliminate_nop_transpose"):
        assert report["coverage"][name]["models_changed"] >= 1
        assert report["coverage"][name]["models_checked"] == len(report["models"])
    assert report["stats"]["fuzz"]["models"] == len(report["models"])
    assert report["stats"]["fuzz"]["models_per_s"] > 0
    assert "<svg" in (out / "coverage.svg").read_text()


def test_fuzz_takes_its_folder_and_passes_from_the_environment_and_config_as_a_sweep_does(
    tmp_path: Path,
) -> None:
    """fuzz said it read the `sweep:` section and DITOX_<NAME>, but its own default folder came as a
    flag over DITOX_OUT, and --passes was read from the flags alone."""
    env = {"DITOX_OUT": str(tmp_path / "from-env"), "DITOX_PASSES": "fuse_qkv"}
    assert main_inner(["fuzz", "--no-sweep", "--budget", "600", "--limit", "2"], env) == 0
    written = [path.parent.name for path in (tmp_path / "from-env" / "corpus").glob("*/model.onnx")]
    assert len(written) == 2 and all(name.startswith("fuse_qkv") for name in written), written
    # a pass with no generator, from there: the environment's error (3), not a flag's (2)
    with pytest.raises(ConfigError, match=r"environment DITOX_PASSES: unknown fuzz generator 'nosuch'"):
        main_inner(["fuzz", "--no-sweep", "--limit", "1"], {**env, "DITOX_PASSES": "nosuch"})
    config = tmp_path / "ditox.yml"
    config.write_text(f"sweep:\n  out: {tmp_path / 'from-config'}\n")
    assert main_inner(["fuzz", "--no-sweep", "--limit", "1", "--config", str(config)], {}) == 0
    assert list((tmp_path / "from-config" / "corpus").glob("*/model.onnx"))


def test_fuzz_makes_models_for_the_optimizers_own_passes_and_says_how_many_fired(tmp_path: Path) -> None:
    """`fuzz --optimizer onnxruntime-extended` ran onnxoptimizer's generators against ORT (26,491
    models in 180 s) and its report had no pass coverage at all."""
    out = tmp_path / "fuzz"
    # seed 0 draws no near-miss in round 0 (every generator draws its first number alike)
    done = run_cli("fuzz", "--optimizer", "onnxruntime-extended", "--seed", "0", "--budget", "600",
                   "--limit", "6", "--jobs", "1", "--out", str(out), timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    info = load_optimizer("onnxruntime-extended").info
    made = [name for name in info.passes if name in GENERATORS and name not in dict(info.cannot_fire)]
    assert f"models for {len(made)} of its {len(info.passes)} passes; 8 cannot fire here" in done.stderr
    first = made[:6]  # round 0 of the round-robin, in the optimizer's order
    assert sorted(m["id"] for m in report["models"]) == sorted(f"{name}-0/model.onnx" for name in first)
    for name in first:
        assert report["coverage"][name]["models_changed"] >= 1, name
    assert set(report["optimizer"]["cannot_fire"]) == set(dict(info.cannot_fire))
    assert "pass coverage: " in done.stderr and "more cannot fire here" in done.stderr
    assert "Cannot fire here (8)" in (out / "summary.md").read_text()
