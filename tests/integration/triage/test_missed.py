"""Missed optimizations, end to end: the real onnxoptimizer as the reference build and a planted
build of it (tests/fakes/planted_lazy.py) whose eliminate_identity stops running on `lazy*` models,
both swept over the same two models; what each result did is in report.json, and the lazy build's
sweep against the reference's report finds what it no longer does, warns or gates, and keeps
the finding known on later nights until the optimizer does the work again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import onnx
from planted_lazy import LAZY_PASS

from tests import helpers
from tests.helpers import FAKES
from tests.integration.sequence_models import plain_model

LAZY = "planted_lazy:optimize"
CONFIGS = f"default,pass:{LAZY_PASS},pass:fuse_bn_into_conv"


def _sweep(tmp_path: Path, optimizer: str, out: str, *args: str) -> tuple[int, dict[str, Any], str]:
    models = tmp_path / "models"
    if not models.is_dir():
        models.mkdir()
        for name in ("lazy_plain", "busy_plain"):
            onnx.save(plain_model(name), models / f"{name}.onnx")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])}
    common = ("--jobs", "1", "--models", "models", "--configs", CONFIGS, "--optimizer", optimizer)
    return helpers.sweep(*common, "--cache-dir", "cache", *args, out=tmp_path / out, env=env, cwd=tmp_path)


def _missed(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (f["model"].rsplit("/", 1)[-1], f["config"]): f
        for f in report["findings"]
        if f["kind"] == "missed-optimization"
    }


def test_what_each_config_did_is_recorded_per_model_and_added_up(tmp_path: Path) -> None:
    code, report, stderr = _sweep(tmp_path, "onnxoptimizer", "base")
    assert code == 0, stderr
    effects = {entry["id"].rsplit("/", 1)[-1]: entry["effect"] for entry in report["models"]}
    for effect in effects.values():
        # Identity, Add, Tanh: the Identity goes under the default passes and eliminate_identity
        assert (effect["nodes"], effect["initializers"]) == (3, 1)
        for config in ("default", f"pass:{LAZY_PASS}"):
            assert effect["configs"][config]["nodes"] == -1
            assert effect["configs"][config]["ops"] == {"Identity": -1}
            assert effect["configs"][config]["bytes"] < 0
        # a pass with nothing to fuse leaves the model as it was: nothing recorded
        assert "pass:fuse_bn_into_conv" not in effect["configs"]
    totals = report["stats"]["effect"]
    assert totals["default"] == {
        "models_changed": 2,
        "nodes": -2,
        "initializers": 0,
        "bytes": sum(e["configs"]["default"]["bytes"] for e in effects.values()),
    }
    assert "pass:fuse_bn_into_conv" not in totals


def test_a_pass_that_stops_firing_is_a_missed_optimization_pinned_on_it(tmp_path: Path) -> None:
    code, _, stderr = _sweep(tmp_path, "onnxoptimizer", "base")
    assert code == 0, stderr
    code, lazy, stderr = _sweep(tmp_path, LAZY, "lazy", "--previous", "base/report.json")
    # a warning by default: the lazy build's results are all correct
    assert code == 0, stderr
    missed = _missed(lazy)
    assert set(missed) == {("lazy_plain.onnx", "default"), ("lazy_plain.onnx", f"pass:{LAZY_PASS}")}
    for finding in missed.values():
        assert finding["culprit"]["passes"] == [LAZY_PASS]
        assert finding["culprit"]["scope"] == "pass"
        evidence = finding["evidence"]
        assert (evidence["nodes"], evidence["reference_nodes"]) == (3, 2)
        assert evidence["not_removed"] == {"Identity": 1}
        assert "1 more (Identity ×1 no longer removed)" in finding["evidence"]["message"]
        assert finding["status"] == "new"
    # the single pass's own config and the default set's are one bug: the pass stopped
    assert len({f["fingerprint"] for f in missed.values()}) == 1
    assert lazy["stats"]["missed"]["findings"] == 2
    # the whole optimizer's node reduction per family, here and in the reference: 6 nodes, the
    # lazy build leaves 5 (one Identity kept), the reference 4
    [family] = lazy["stats"]["missed"]["by_family"].values()
    assert family == {"models": 2, "nodes": 6, "after": 5, "reference_after": 4}
    summary = (tmp_path / "lazy" / "summary.md").read_text()
    assert "| 2 | 6 | 5 | 1 (16.7%) | 4 | 2 (33.3%) |" in summary
    assert "with the reference build (onnxoptimizer 0.4.2)" in summary

    code, gated, stderr = _sweep(tmp_path, LAZY, "gated", "--previous", "base/report.json", "--gate-missed")
    assert code == 1, stderr
    assert gated["stats"]["gate_missed"] is True
    assert set(_missed(gated)) == set(missed)


def test_a_missed_optimization_stays_known_until_the_optimizer_does_the_work_again(tmp_path: Path) -> None:
    _sweep(tmp_path, "onnxoptimizer", "base")
    _sweep(tmp_path, LAZY, "night1", "--previous", "base/report.json")
    # the next night the build is as lazy as the night before: no new difference, the bug known
    code, night2, stderr = _sweep(tmp_path, LAZY, "night2", "--previous", "night1/report.json")
    assert code == 0, stderr
    assert {key: f["status"] for key, f in _missed(night2).items()} == {
        ("lazy_plain.onnx", "default"): "known",
        ("lazy_plain.onnx", f"pass:{LAZY_PASS}"): "known",
    }
    # the night the pass runs again, it is fixed
    code, night3, stderr = _sweep(tmp_path, "onnxoptimizer", "night3", "--previous", "night2/report.json")
    assert code == 0, stderr
    assert {f["status"] for f in _missed(night3).values()} == {"fixed"}


def test_another_optimizers_report_is_no_reference(tmp_path: Path) -> None:
    _sweep(tmp_path, "onnxoptimizer", "base")
    other = json.loads((tmp_path / "base" / "report.json").read_text())
    other["optimizer"].update(name="onnxsim", default_passes=["simplify"])
    (tmp_path / "other.json").write_text(json.dumps(other))
    code, lazy, stderr = _sweep(tmp_path, LAZY, "lazy", "--reuse-from", "other.json")
    assert code == 0, stderr
    assert _missed(lazy) == {} and "missed" not in lazy["stats"]


def test_on_the_base_build_a_missed_optimization_is_confirmed_and_reduced_to_a_repro(tmp_path: Path) -> None:
    """A PR check: the reference report says the base branch removed the Identity; the base build
    in hand confirms it, and the model is cut down to where the base build still removes it and
    the head does not. Its repro.py exits 1 on the head's build and 0 on the base's."""
    _sweep(tmp_path, "onnxoptimizer", "base")
    args = ("--previous", "base/report.json", "--base-optimizer", "onnxoptimizer", "--exercise-budget", "0")
    code, pr, stderr = _sweep(tmp_path, LAZY, "pr", *args)
    assert code == 0, stderr
    missed = _missed(pr)
    assert set(missed) == {("lazy_plain.onnx", "default"), ("lazy_plain.onnx", f"pass:{LAZY_PASS}")}
    first = missed[("lazy_plain.onnx", "default")]
    assert first["evidence"]["base_nodes"] == 2
    reduction = first["evidence"]["reduction"]
    # the Identity alone would be the graph's output, which eliminate_identity keeps on any build
    assert (reduction["nodes_before"], reduction["nodes_after"]) == (3, 2)
    assert first["evidence"]["reduced"] == {"head_left": {"Add": 1, "Identity": 1}, "base_left": {"Add": 1}}
    assert pr["stats"]["missed"]["not_on_base"] == 0
    bundle = tmp_path / "pr" / first["repro"]
    assert {"model.onnx", "repro.py"} <= {p.name for p in bundle.iterdir()}
    assert [n.op_type for n in onnx.load(bundle / "model.onnx").graph.node] == ["Identity", "Add"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])}
    for optimizer, code, says in (
        (LAZY, 1, "BUG PRESENT: the optimizer leaves Identity ×1"),
        ("onnxoptimizer", 0, "OK"),
    ):
        ran = subprocess.run(
            [sys.executable, "repro.py", "--optimizer", optimizer],
            cwd=bundle,
            env=env,
            capture_output=True,
            text=True,
        )
        assert ran.returncode == code and says in ran.stdout, ran.stdout + ran.stderr

    # a base build that does no better (the lazy one itself) makes no missed optimization
    args = ("--previous", "base/report.json", "--base-optimizer", LAZY, "--exercise-budget", "0")
    code, same, stderr = _sweep(tmp_path, LAZY, "same", *args)
    assert code == 0, stderr
    assert _missed(same) == {} and same["stats"]["missed"]["not_on_base"] == 2
