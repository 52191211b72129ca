"""`ditox-ci sweep` pinpoints its failures: planted faulty optimizers (file specs wrapping the real
onnxoptimizer) know the true culprit; ONNX Runtime is real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import localize_planted as planted
import onnx
import pytest

PLANTED = Path(planted.__file__).resolve()
NODES = 24


def sweep(tmp_path: Path, fault: str, *flags: str) -> tuple[int, dict[str, Any], Path]:
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    onnx.save(planted.chain_model(nodes=NODES, fault_at=NODES // 2), str(models / "chain.onnx"))
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "ditox_ci", "sweep", "--models", str(models), "--out", str(out)),
            *("--optimizer", f"{PLANTED}:{fault}", "--configs", "default", "--jobs", "1"),
            *("--samples", "2", "--reduce-budget", "10", *flags),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (out / "report.json").exists(), proc.stderr
    return proc.returncode, json.loads((out / "report.json").read_text()), out


def run_repro(bundle: Path, optimizer: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(bundle / "repro.py"), "--optimizer", optimizer],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PLANTED.parent)},
        timeout=120,
    )


@pytest.fixture(scope="module")
def single_pass(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    return sweep(tmp_path_factory.mktemp("single"), "single_pass_fault")


def test_a_single_pass_fault_is_localized_to_that_pass_within_12_runs(
    single_pass: tuple[int, dict[str, Any], Path],
) -> None:
    code, report, _ = single_pass
    assert code == 1
    [finding] = report["findings"]
    assert finding["config"] == "default"
    assert finding["culprit"]["scope"] == "pass"
    assert finding["culprit"]["passes"] == [planted.SINGLE_CULPRIT]
    assert 0 < finding["culprit"]["optimizer_runs"] <= 12
    assert report["stats"]["pinpoint"]["bundles"] == 1


def test_the_reduced_model_is_smaller_and_its_bundle_reproduces_only_the_fault(
    single_pass: tuple[int, dict[str, Any], Path],
) -> None:
    _, report, out = single_pass
    [finding] = report["findings"]
    reduction = finding["evidence"]["reduction"]
    assert reduction["nodes_before"] == NODES
    assert reduction["nodes_after"] < reduction["nodes_before"]
    assert finding["repro"] == f"repro/{finding['fingerprint']}/"
    bundle = out / finding["repro"]
    assert len(onnx.load(str(bundle / "model.onnx")).graph.node) == reduction["nodes_after"]

    broken = run_repro(bundle, "localize_planted:single_pass_fault")
    fixed = run_repro(bundle, "onnxoptimizer")

    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "max abs difference" in broken.stdout
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_a_mismatch_names_the_node_where_the_reduced_model_starts_to_diverge(
    single_pass: tuple[int, dict[str, Any], Path],
) -> None:
    """By the bundle model's short name, which its README maps to the original's."""
    _, report, out = single_pass
    [finding] = report["findings"]
    divergence = finding["evidence"]["divergence"]
    bundle = out / finding["repro"]
    [add] = [node for node in onnx.load(str(bundle / "model.onnx")).graph.node if node.op_type == "Add"]
    assert divergence["tensor"] == add.output[0] == "Y0"
    assert f"| `Y0` | v{NODES // 2}\\_add |" in (bundle / "README.md").read_text()
    assert [label.split()[0] for label in divergence["rewritten"]] == ["Add"]
    assert divergence["max_abs"] > 0.1


def test_a_two_pass_interaction_names_both_passes_in_order(tmp_path: Path) -> None:
    code, report, _ = sweep(tmp_path, "pair_fault", "--reduce-budget", "0")
    assert code == 1
    [finding] = report["findings"]
    assert finding["culprit"]["scope"] == "interaction"
    assert finding["culprit"]["passes"] == list(planted.PAIR_CULPRITS)
    assert "reduction" not in finding["evidence"]
    assert (tmp_path / "out" / finding["repro"] / "repro.py").is_file()


def test_an_infrastructure_fault_stays_one_finding(tmp_path: Path) -> None:
    code, report, _ = sweep(tmp_path, "infrastructure_fault")
    assert code == 1
    [finding] = report["findings"]
    assert finding["config"] == "nop"
    assert finding["culprit"]["scope"] == "infrastructure"
    assert finding["evidence"]["also_in"] == ["default"]
    assert finding["evidence"]["reduction"]["nodes_after"] == 1


def test_localize_off_leaves_the_culprit_unknown_and_writes_no_bundle(tmp_path: Path) -> None:
    code, report, out = sweep(tmp_path, "single_pass_fault", "--localize", "off")
    assert code == 1
    [finding] = report["findings"]
    assert finding["culprit"]["scope"] == "unknown"
    assert finding["repro"] is None
    assert "pinpoint" not in report["stats"]
    assert not (out / "repro").exists()


def test_the_same_bug_in_a_second_model_reuses_the_first_reduction(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    onnx.save(planted.chain_model(nodes=NODES, fault_at=NODES // 2), str(models / "chain.onnx"))
    onnx.save(planted.chain_model(nodes=NODES + 6, fault_at=NODES // 3), str(models / "longer.onnx"))
    _, report, _ = sweep(tmp_path, "single_pass_fault")
    first, second = sorted(report["findings"], key=lambda f: f["model"])
    assert first["fingerprint"] == second["fingerprint"]
    assert first["repro"] == second["repro"]
    assert report["stats"]["pinpoint"]["reductions_reused"] == 1
    assert report["stats"]["pinpoint"]["bundles"] == 1
