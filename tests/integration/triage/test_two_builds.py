"""Two builds of a planted optimizer (tests/fakes/planted_builds.py) as a PR check sees them: a
control that fails on the base only, a failure that comes and goes, the same bug in the plain
sweep, the PR check and the nightly."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests import helpers
from tests.helpers import FAKES

HEAD = "planted_head:optimize"
BASE = "planted_base:optimize"
CONFIGS = "default,fixed-point,pass:eliminate_identity"


def sequence_model(name: str) -> onnx.ModelProto:
    """x + w through Tanh, and the sum in a sequence output, whose type the base's round trip drops."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, [2, 3])
    sequence = helper.make_value_info("s", helper.make_sequence_type_proto(element))
    weight = onnx.numpy_helper.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "w")
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Add", ["i", "w"], ["a"]),
        helper.make_node("Tanh", ["a"], ["y"]),
        helper.make_node("SequenceConstruct", ["a", "x"], ["s"]),
    ]
    graph = helper.make_graph(nodes, name, [x], [y, sequence], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def plain_model(name: str) -> onnx.ModelProto:
    model = sequence_model(name)
    del model.graph.output[1]
    del model.graph.node[3]
    return model


def sweep(tmp_path: Path, model: onnx.ModelProto, *args: str, out: str, **env: str) -> tuple[int, dict, str]:
    path = tmp_path / f"{model.graph.name}.onnx"
    onnx.save(model, path)
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]),
        "PLANTED_FLAKY_COUNT": str(tmp_path / f"{out}.count"),
        **env,
    }
    common = ("--jobs", "1", "--models", str(path), "--cache-dir", str(tmp_path / "cache"))
    return helpers.sweep(*common, *args, out=tmp_path / out, env=environment)


def by_config(report: dict) -> dict[str, dict]:
    return {f["config"]: f for f in report["findings"] if f["status"] != "fixed"}


def test_a_bugs_identity_does_not_depend_on_the_control_and_is_one_in_every_mode(tmp_path: Path):
    model = sequence_model("retype_seq")
    code, plain, stderr = sweep(tmp_path, model, "--optimizer", BASE, "--configs", CONFIGS, out="base")
    assert code == 1, stderr
    on_base = by_config(plain)
    assert on_base["nop"]["kind"] == "invalid-model"
    retyped = on_base["pass:eliminate_identity"]
    # the base's control fails the checker: context, not what decides the kind
    assert retyped["kind"] == "interface-change"
    assert retyped["evidence"]["control"].startswith("invalid-model")
    bug = retyped["fingerprint"]
    assert {on_base[c]["fingerprint"] for c in ("default", "fixed-point")} == {bug}

    args = ("--optimizer", HEAD, "--configs", CONFIGS)
    code, pr, stderr = sweep(tmp_path, model, *args, "--base-optimizer", BASE, out="pr")
    assert code == 0, stderr
    on_head = by_config(pr)
    assert "nop" not in on_head, "the head's round trip is fixed"
    for config in ("default", "fixed-point", "pass:eliminate_identity"):
        finding = on_head[config]
        assert (finding["kind"], finding["status"]) == ("interface-change", "known"), config
        assert finding["evidence"]["known_by"] == "base-optimizer" and "control" not in finding["evidence"]
        assert finding["fingerprint"] == bug, f"{config}: one bug, one fingerprint, reduced or not"

    previous = ("--previous", str(tmp_path / "base" / "report.json"))
    code, nightly, stderr = sweep(tmp_path, model, *args, *previous, out="nightly")
    assert code == 0, stderr
    fixed = [f for f in nightly["findings"] if f["status"] == "fixed"]
    assert [f["config"] for f in fixed] == ["nop"], "only the round trip's bug is fixed"
    assert {f["fingerprint"] for f in nightly["findings"] if f["status"] == "known"} == {bug}


def test_a_failure_no_rerun_shows_is_flaky_and_does_not_gate(tmp_path: Path):
    model = plain_model("flaky_plain")
    args = ("--optimizer", HEAD, "--configs", "pass:eliminate_deadend")
    code, report, stderr = sweep(tmp_path, model, *args, out="once", PLANTED_FLAKY_CRASHES="1")
    assert code == 0, stderr
    (flaky,) = report["findings"]
    assert (flaky["kind"], flaky["status"]) == ("optimizer-crash", "flaky")
    assert flaky["evidence"]["reproduce"] == {"tries": 3, "reproduced": 0}
    assert flaky["repro"] is None
    summary = (tmp_path / "once" / "summary.md").read_text()
    assert "1 flaky, not blocking" in summary and "### Flaky, not blocking (1)" in summary

    # shown again in the second try: a real bug, which gates
    code, report, stderr = sweep(tmp_path, model, *args, out="twice", PLANTED_FLAKY_CRASHES="1,3")
    assert code == 1, stderr
    (new,) = report["findings"]
    assert new["status"] == "new" and new["evidence"]["reproduce"] == {"tries": 2, "reproduced": 1}


def test_a_failure_the_base_shows_in_any_try_is_known(tmp_path: Path):
    model = plain_model("flaky_plain")
    args = ("--optimizer", HEAD, "--configs", "pass:eliminate_deadend", "--base-optimizer", BASE)
    # the head's sweep crashes (call 1); the base's first try does not (2), its second does (3)
    code, report, stderr = sweep(tmp_path, model, *args, out="pr", PLANTED_FLAKY_CRASHES="1,3")
    assert code == 0, stderr
    (known,) = report["findings"]
    assert (known["status"], known["evidence"]["known_by"]) == ("known", "base-optimizer")
    assert report["stats"]["base_optimizer"]["tries"] == 2


def test_two_builds_of_one_version_are_told_apart_and_the_summary_warns(tmp_path: Path):
    args = ("--optimizer", HEAD, "--configs", "pass:eliminate_identity", "--base-optimizer", BASE)
    code, report, stderr = sweep(tmp_path, plain_model("fine"), *args, out="pr")
    assert code == 0, stderr
    head, base = report["optimizer"]["build"], report["stats"]["base_optimizer"]["build"]
    assert head["version"] == base["version"] == "0.4.2"
    assert head["passes_sha256"] != base["passes_sha256"] and head["files_sha256"] != base["files_sha256"]
    warning = report["stats"]["base_optimizer"]["look_alike"]
    assert "both report version 0.4.2 but differ in pass list and files" in warning
    assert "differ in pass list and files" in stderr
    summary = (tmp_path / "pr" / "summary.md").read_text()
    # the fakes' checkout is this one: both rows name its commit, and differ in their hashes
    assert f"| head | 0.4.2 | {head['git_describe']} | {head['files_sha256'][:12]} |" in summary
    assert f"| {base['files_sha256'][:12]} | {base['passes_sha256'][:12]} |" in summary
    assert "**Warning:** head and base both report version 0.4.2" in summary
