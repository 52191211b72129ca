"""A fuzz run keeps its budget: --budget bounds the whole run's wall time, models are made as the
workers ask for them, and only models with a failure worth reading stay on disk; the others are
reproducible from the seed ranges the report lists."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from ditox_ci.fuzz import generate
from ditox_ci.report.kinds import kind_gates
from ditox_ci.report.model import Finding

BUDGET_S = 20.0


def _pass_and_seed(model_id: str) -> tuple[str, int]:
    """`<pass>-<seed>[-near]/model.onnx` → (pass, seed); the seed decides whether it is a near-miss."""
    target, seed = model_id.split("/")[0].removesuffix("-near").rsplit("-", 1)
    return target, int(seed)


def test_fuzz_keeps_its_budget_and_only_models_with_findings(tmp_path: Path) -> None:
    out = tmp_path / "fuzz"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ditox_ci", "fuzz", "--budget", str(BUDGET_S), "--seed", "0", "--jobs", "2",
         "--passes", "fuse_pad_into_pool,eliminate_identity,fuse_bn_into_conv", "--out", str(out)],
        capture_output=True, text=True, timeout=BUDGET_S * 3,
    )
    wall_s = time.monotonic() - started
    assert done.returncode == 1, done.stderr[-2000:]  # fuse_pad_into_pool's bugs are new findings
    assert 0.9 * BUDGET_S <= wall_s <= 1.1 * BUDGET_S

    report = json.loads((out / "report.json").read_text())
    fuzz = report["stats"]["fuzz"]
    assert fuzz["models"] == len(report["models"]) > 30
    # every model run lies in the seed ranges the report lists, and only those
    ranges = {name: entry["seeds"] for entry in fuzz["seed_ranges"] for name in entry["passes"]}
    seeds_run = {_pass_and_seed(m["id"]) for m in report["models"]}
    in_ranges = {(name, seed) for name, (first, last) in ranges.items() for seed in range(first, last + 1)}
    assert seeds_run == in_ranges

    failing = {f["model"].split("/")[0] for f in report["findings"] if Finding.from_json(f).closes_gate()}
    kept = {folder.name for folder in (out / "corpus").iterdir()}
    assert failing and kept == failing and len(kept) == fuzz["models_kept"] < fuzz["models"]
    assert sum(path.stat().st_size for path in out.rglob("*") if path.is_file()) < 20 * 2**20

    # a model that was not kept comes back byte for byte from its seed
    dropped = next(m for m in report["models"] if m["id"].split("/")[0] not in kept)
    item = generate(*_pass_and_seed(dropped["id"]))
    assert f"{item.id}/model.onnx" == dropped["id"]
    model = item.model
    assert hashlib.sha256(model.SerializeToString()).hexdigest() == dropped["sha256"]

    # what fuzzing finds: fuse_pad_into_pool folds a constant-0 Pad into MaxPool, whose implicit
    # padding is -inf, so negative inputs give other maxima
    mismatches = [f for f in report["findings"]
                  if f["kind"] == "output-mismatch" and f["culprit"]["passes"] == ["fuse_pad_into_pool"]]
    assert mismatches and all(f["repro"] for f in mismatches)


def test_with_a_base_build_only_models_with_findings_worth_reading_stay_too(tmp_path: Path) -> None:
    """The base build re-runs each model with a finding after the sweep: the others go at once, and
    those whose findings are not worth reading go once it is done (they all stayed before)."""
    out = tmp_path / "fuzz"
    done = subprocess.run(
        [sys.executable, "-m", "ditox_ci", "fuzz", "--budget", "10", "--seed", "0", "--jobs", "2",
         "--passes", "fuse_pad_into_pool,eliminate_identity", "--base-optimizer", "onnxoptimizer",
         "--out", str(out)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]  # the base build shows every finding: known
    report = json.loads((out / "report.json").read_text())
    assert report["stats"]["base_optimizer"]["findings_checked"] > 0
    failing = {f["model"].split("/")[0] for f in report["findings"] if kind_gates(f["kind"])}
    kept = {folder.name for folder in (out / "corpus").iterdir()}
    fuzz = report["stats"]["fuzz"]
    assert failing and kept == failing and len(kept) == fuzz["models_kept"] < fuzz["models"]


def test_an_optimizer_without_the_generated_passes_is_fuzzed_with_its_default_and_the_control(
    tmp_path: Path,
) -> None:
    """The generators aim at onnxoptimizer's passes; ONNX Runtime has none of them, and the run's
    `pass:<p>` configs failed as unknown passes once the optimizer was loaded."""
    out = tmp_path / "fuzz"
    done = subprocess.run(
        [sys.executable, "-m", "ditox_ci", "fuzz", "--optimizer", "onnxruntime", "--limit", "4",
         "--seed", "0", "--jobs", "1", "--passes", "fuse_bn_into_conv", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert "onnxruntime has 0 of the 1 passes the models are made for" in done.stderr
    report = json.loads((out / "report.json").read_text())
    assert sorted(report["stats"]["configs"]) == ["default", "nop"]
    assert report["stats"]["fuzz"]["models"] == len(report["models"]) == 4
