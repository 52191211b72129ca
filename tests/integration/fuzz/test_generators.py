"""Every generator, through the real checker, ONNX Runtime and onnxoptimizer: valid models that
run finite, that the targeted pass rewrites, and near-misses it leaves byte for byte alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxoptimizer
import pytest

from ditox_ci.__main__ import main_inner
from ditox_ci.engine import runner
from ditox_ci.errors import ConfigError
from ditox_ci.fuzz import GENERATORS, generate

SEEDS = (0, 1, 2)
CASES = [
    (name, seed, near)
    for name, gen in sorted(GENERATORS.items())
    for seed in SEEDS
    for near in ((False, True) if gen.near_misses else (False,))
]


@pytest.mark.parametrize(("name", "seed", "near"), CASES)
def test_generator_fires_on_pattern_and_spares_near_miss(name: str, seed: int, near: bool) -> None:
    item = generate(name, seed, near_miss=near)
    onnx.checker.check_model(item.model, full_check=True)
    session = runner.load_session(item.model.SerializeToString())
    for outputs in runner.run_all(session, item.feeds):
        for value in outputs:
            assert value.dtype.kind not in "fc" or np.all(np.isfinite(value))
    before = item.model.SerializeToString()
    after = onnxoptimizer.optimize(item.model, [name]).SerializeToString()
    expect_change = GENERATORS[name].fires and not near
    assert (before != after) == expect_change


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
