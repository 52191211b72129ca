"""A model split by config over shards, then merged, gives what one unsharded run gives: the real
CLI, optimizer and runtime on a few onnx-node models, one of them made to dominate the sweep by a
`--previous` report that says it took 1000 s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ditox_ci.errors import MergeError
from ditox_ci.report.model import Finding, write_report
from ditox_ci.report.stats import CHANGED_BY_FAMILY, CHECKED_BY_FAMILY
from tests.helpers import timed_report

# test_identity_opt fails already in the nop control, so every part reports that finding
HEAVY = "onnx-node:test_identity_opt"
MODELS = ("onnx-node:test_conv_with_strides*", HEAVY)
SHARDS = 3


def _cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ditox_ci", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cache.parent), "DITOX_CACHE": str(cache)},
    )


def _sweep(root: Path, out: str, *args: str) -> dict[str, Any]:
    process = _cli(
        "sweep",
        "--models",
        *MODELS,
        "--localize",
        "off",
        "--jobs",
        "1",
        "--previous",
        str(root / "previous.json"),
        "--out",
        str(root / out),
        *args,
        cache=root / "cache",
    )
    assert process.returncode in (0, 1), process.stderr
    return json.loads((root / out / "report.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("split")
    previous = timed_report({HEAVY: 1000.0})
    write_report(previous, root / "previous.json")
    whole = _sweep(root, "whole")
    shards = [_sweep(root, f"shards/shard-{i}", "--shard", f"{i}/{SHARDS}") for i in range(SHARDS)]
    return root, whole, shards


def _findings(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted(
        (f["fingerprint"], f["model"], f["config"], f["kind"], f["status"], f["evidence"].get("also_in"))
        for f in report["findings"]
    )


def _models(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{key: value for key, value in m.items() if key != "cost_s"} for m in report["models"]]


def test_the_dominating_model_runs_in_parts_that_share_only_nop(
    runs: tuple[Path, dict[str, Any], list[dict[str, Any]]],
) -> None:
    _, whole, shards = runs
    parts = [m["configs"] for shard in shards for m in shard["models"] if m["id"] == HEAVY]
    assert len(parts) >= 2
    assert all(configs[0] == "nop" for configs in parts)
    others = [config for configs in parts for config in configs[1:]]
    assert sorted(others) == sorted(config for config in whole["stats"]["configs"] if config != "nop")
    assert not any("configs" in m for shard in shards for m in shard["models"] if m["id"] != HEAVY)
    nop_findings = [f for s in shards for f in s["findings"] if (f["model"], f["config"]) == (HEAVY, "nop")]
    assert len(nop_findings) == len(parts)


def test_merged_split_shards_equal_one_unsharded_run(
    runs: tuple[Path, dict[str, Any], list[dict[str, Any]]],
) -> None:
    root, whole, _ = runs
    dirs = [str(root / "shards" / f"shard-{index}") for index in range(SHARDS)]
    process = _cli("merge", *dirs, "--out", str(root / "merged"), cache=root / "cache")
    gate = any(Finding.from_json(f).closes_gate() for f in whole["findings"])
    assert process.returncode == int(gate), process.stderr
    merged = json.loads((root / "merged" / "report.json").read_text())
    assert any(f["model"] == HEAVY and f["config"] == "nop" for f in whole["findings"])
    assert _findings(merged) == _findings(whole)
    assert _models(merged) == _models(whole)
    assert merged["coverage"] == whole["coverage"]
    assert merged["stats"]["models_total"] == whole["stats"]["models_total"]
    # the split model is checked by each pass in one part only: the picture counts it once
    for key in (CHANGED_BY_FAMILY, CHECKED_BY_FAMILY):
        assert merged["stats"][key] == whole["stats"][key]
    assert (root / "merged" / "coverage.svg").read_text() == (root / "whole" / "coverage.svg").read_text()


def test_merge_refuses_the_same_part_twice(runs: tuple[Path, dict[str, Any], list[dict[str, Any]]]) -> None:
    root, _, shards = runs
    index = next(i for i, shard in enumerate(shards) if any(m["id"] == HEAVY for m in shard["models"]))
    other = (index + 1) % SHARDS
    heavy_part = [m for m in shards[index]["models"] if m["id"] == HEAVY]
    forged = {**shards[other], "models": shards[other]["models"] + heavy_part}
    (root / "forged").mkdir(exist_ok=True)
    (root / "forged" / "report.json").write_text(json.dumps(forged))
    dirs = [str(root / ("forged" if i == other else f"shards/shard-{i}")) for i in range(SHARDS)]
    process = _cli("merge", *dirs, "--out", str(root / "merged-forged"), cache=root / "cache")
    assert process.returncode == MergeError.exit_code
    assert "different corpora" in process.stderr
