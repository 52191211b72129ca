"""The optimizer registry: built-ins by name, opaque custom optimizers, stamped-metadata
normalization, root-cause error keys, baseline entries per optimizer, portable repro pins."""

from __future__ import annotations

import datetime
import importlib.metadata
from dataclasses import replace
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.ci.action import adapter_lock, build_argv, install_commands
from ditox_ci.engine.plan import DEFAULT_CONFIGS, build_steps
from ditox_ci.errors import OptimizerLoadError, UsageError
from ditox_ci.optimizers import ADAPTERS, load_optimizer, optimizer_error, optimizer_help
from ditox_ci.optimizers.adapters import onnx_ir_adapter, onnxscript_adapter, onnxsim_adapter
from ditox_ci.pinpoint.repro import requirements
from ditox_ci.report import Culprit, Finding
from ditox_ci.triage.baseline import load_baseline
from tests.helpers import ROOT

# each built-in and the distribution it is a version of
BUILT_IN = {
    "onnxsim": "onnxsim",
    "onnxscript": "onnxscript",
    "onnx-ir": "onnx-ir",
    "onnxruntime": "onnxruntime",
    "onnxruntime-extended": "onnxruntime",
    "onnxslim": "onnxslim",
}


def _relu_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    helper.set_model_props(model, {"author": "test"})
    return model


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_each_builtin_declares_its_own_passes_default_list_and_version(name: str) -> None:
    info = load_optimizer(name).info
    assert info.name == name
    assert info.version == importlib.metadata.version(BUILT_IN[name])
    assert info.passes and set(info.default_passes) <= set(info.passes)
    assert not info.opaque
    assert "eliminate_nop_transpose" not in info.passes or name == "onnxsim", "never onnxoptimizer's names"
    assert info.distributions[0] == BUILT_IN[name]
    labels = [step.label for step in build_steps(DEFAULT_CONFIGS, (), info)]
    assert labels[:3] == ["nop", "default", "fixed-point"]
    assert len(labels) == 3 + len([p for p in info.passes if p != "nop"])


def test_order_and_fixed_point_are_declared_per_optimizer() -> None:
    assert load_optimizer("onnxsim").info.order_matters is False
    assert load_optimizer("onnxsim").info.fixed_point.startswith("always")
    assert load_optimizer("onnxscript").info.order_matters is True
    assert load_optimizer("onnxoptimizer").info.fixed_point.startswith("native")
    for name in ("onnxruntime", "onnxruntime-extended", "onnxslim"):
        assert load_optimizer(name).info.order_matters is False
        assert load_optimizer(name).info.fixed_point.startswith("always")


def test_onnxsims_stamped_metadata_is_normalized_away() -> None:
    model = _relu_model()
    simplified = onnxsim_adapter.optimize(model, [], False)
    assert any(p.key.startswith("onnxsim.") for p in simplified.metadata_props), "what the hook is for"
    normalized = load_optimizer("onnxsim").normalize(simplified)  # type: ignore[misc]
    assert [(p.key, p.value) for p in normalized.metadata_props] == [("author", "test")]


def test_an_unknown_pass_is_named_in_that_optimizers_own_terms() -> None:
    info = load_optimizer("onnxsim").info
    with pytest.raises(UsageError) as error:
        build_steps(("nop",), ("fuse_bn",), info)
    message = str(error.value)
    assert "fuse_bn" in message and "constant_folding" in message and "onnxsim" in message
    assert "import onnxoptimizer" not in message


def test_a_custom_optimizer_without_pass_lists_is_opaque(tmp_path: Path) -> None:
    adapter = tmp_path / "bare.py"
    adapter.write_text("def optimize(model, passes, fixed_point):\n    return model\n")
    info = load_optimizer(f"{adapter}:optimize").info
    assert info.opaque and info.passes == () and info.default_passes == ("default",)
    steps = build_steps(DEFAULT_CONFIGS, (), info)
    assert [(s.label, s.passes) for s in steps] == [("nop", ()), ("default", ("default",))]
    with pytest.raises(UsageError, match="opaque"):
        build_steps(("nop",), ("eliminate_identity",), info)


def test_a_custom_optimizer_with_pass_lists_is_not_opaque(tmp_path: Path) -> None:
    adapter = tmp_path / "listed.py"
    adapter.write_text(
        "PASS_ORDER_MATTERS = False\n"
        "def get_available_passes():\n    return ['a', 'b']\n"
        "def optimize(model, passes, fixed_point):\n    return model\n"
    )
    loaded = load_optimizer(f"{adapter}:optimize")
    assert not loaded.info.opaque and loaded.info.passes == ("a", "b") == loaded.info.default_passes
    assert loaded.info.order_matters is False
    assert loaded.adapter_file == str(adapter)


def _if_with_identity_branches() -> onnx.ModelProto:
    then_branch = helper.make_graph(
        [helper.make_node("Identity", ["u"], ["t"])], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["u"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["u"]),
            helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch),
        ],
        "g",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_an_optimizer_error_is_keyed_on_its_root_cause() -> None:
    """onnx-ir wraps a pass's exception in PassErrors that name the passes run before it: two pass
    lists with the same culprit raise different text, but one root cause."""
    raised = []
    for passes in (["identity_elimination"], ["inline", "remove_unused_nodes", "identity_elimination"]):
        with pytest.raises(Exception) as error:
            onnx_ir_adapter.optimize(_if_with_identity_branches(), passes, False)
        raised.append(error.value)
    messages = [optimizer_error(exc) for exc in raised]
    assert messages[0][0] == messages[1][0]
    assert messages[0][0].startswith("ValueError: ")
    assert messages[0][1]["raised"].startswith("PassError: ")
    inner = [str(exc.__cause__) for exc in raised]
    assert inner[0] != inner[1], "the wrappers' own text differs: keyed on it, one bug would be two"


def test_baseline_entries_apply_to_the_optimizer_they_name(tmp_path: Path) -> None:
    path = tmp_path / "baseline.yml"
    path.write_text(
        "version: 1\nentries:\n"
        "  - {id: sim-folding, optimizer: onnxsim, passes: [constant_folding], reason: known}\n"
        "  - {id: opt-only, passes: [fuse_bn_into_conv], reason: known}\n"
    )
    for_onnxsim = {entry.id for entry in load_baseline(path, "onnxsim").entries}
    for_onnxoptimizer = {entry.id for entry in load_baseline(path).entries}
    assert for_onnxsim == {"sim-folding"}, "split_init & co. are onnxoptimizer's, not onnxsim's"
    assert "opt-only" in for_onnxoptimizer and "sim-folding" not in for_onnxoptimizer
    assert "split-init-by-design" in for_onnxoptimizer


def test_help_says_which_builtins_are_installed() -> None:
    text = optimizer_help()
    builtins = "onnxsim, onnxscript, onnx-ir, onnxruntime, onnxruntime-extended, onnxslim"
    assert f"onnxoptimizer | {builtins.replace(', ', ' | ')}" in text
    assert f"installed here: onnxoptimizer, {builtins}" in text
    assert set(ADAPTERS) == set(builtins.split(", "))


def test_repro_requirements_pin_every_distribution_the_optimizer_imports() -> None:
    lines = requirements("onnxscript").splitlines()
    for distribution in ("onnxscript", "onnx-ir", "ml_dtypes", "onnx", "onnxruntime"):
        assert f"{distribution}=={importlib.metadata.version(distribution)}" in lines


def test_each_builtin_is_an_extra_with_the_pin_the_action_installs() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    for adapter in ADAPTERS.values():
        assert f'\n{adapter.extra} = ["{adapter.requirement}"]\n' in pyproject
        # in the dev extra too: their tests run in `make test`, never skipped
        assert f'\n    "{adapter.requirement}",\n' in pyproject


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_the_action_installs_a_builtin_and_sweeps_it_by_name(name: str) -> None:
    if BUILT_IN[name] == "onnxruntime":  # ditox-ci's own dependency: the image has it
        assert install_commands(name, "python") == []
    else:
        [command] = install_commands(name, "python")
        assert command[-4:] == ["--require-hashes", "--no-deps", "-r", str(adapter_lock(name))]
    (sweep,) = build_argv({"INPUT_MODE": "sweep", "INPUT_OPTIMIZER": name})
    assert sweep[sweep.index("--optimizer") + 1] == name


def test_a_builtin_optimizers_own_shipped_baseline_applies_to_it_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ditox_ci.triage.baseline as baseline

    shipped = tmp_path / "baseline-default.yml"
    shipped.write_text(baseline.DEFAULT_BASELINE.read_text())
    (tmp_path / "baseline-onnxsim.yml").write_text(
        "version: 1\nentries:\n  - {id: sim-by-design, passes: [shape_inference], reason: documented}\n"
    )
    monkeypatch.setattr(baseline, "DEFAULT_BASELINE", shipped)
    assert [e.id for e in load_baseline(None, "onnxsim").entries] == ["sim-by-design"]
    assert "sim-by-design" not in {e.id for e in load_baseline(None, "onnxscript").entries}
    assert "sim-by-design" not in {e.id for e in load_baseline(None).entries}


def test_onnxscripts_folded_from_stamps_are_normalized_away() -> None:
    graph = helper.make_graph(
        [helper.make_node("Add", ["c1", "c2"], ["a"]), helper.make_node("Mul", ["x", "a"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        initializer=[
            helper.make_tensor("c1", TensorProto.FLOAT, [2], [1, 2]),
            helper.make_tensor("c2", TensorProto.FLOAT, [2], [3, 4]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    folded = onnxscript_adapter.optimize(model, ["fold_constants"], False)
    assert "pkg.onnxscript.optimizer.folded_from" in str(folded), "what the hook is for"
    normalized = load_optimizer("onnxscript").normalize(folded)  # type: ignore[misc]
    assert "pkg.onnxscript" not in str(normalized)
    onnx.checker.check_model(normalized, full_check=True)


def test_the_shipped_by_design_baselines_of_orts_extended_level_and_onnxslim() -> None:
    """ORT extended writes LayerNormalization into opset-12 models, onnxslim drops unused inputs:
    accepted for their own optimizer only, and only as the kind the change has."""
    today = datetime.date.today()
    layernorm = Finding(
        "f" * 16,
        "invalid-model",
        "m",
        "default",
        Culprit("pass", ("LayerNormFusionL2",)),
        measured={"message": "No Op registered for LayerNormalization with domain_version of 12"},
    )
    assert load_baseline(None, "onnxruntime-extended").match(layernorm, today) is not None
    assert load_baseline(None, "onnxruntime").match(layernorm, today) is None
    opset17 = replace(
        layernorm, measured={"message": "No Op registered for LayerNormalization with domain_version of 17"}
    )
    assert load_baseline(None, "onnxruntime-extended").match(opset17, today) is None
    inputs = Finding(
        "e" * 16,
        "interface-change",
        "m",
        "default",
        Culprit("pass", ("dead_node_elimination",)),
        measured={"message": "graph input count changed from 2 to 1"},
    )
    assert load_baseline(None, "onnxslim").match(inputs, today) is not None
    assert load_baseline(None, "onnxslim").match(replace(inputs, kind="output-mismatch"), today) is None


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("raise RuntimeError('no build')", r"get_available_passes\(\) raised RuntimeError: no build"),
        ("return 3", r"get_available_passes\(\) must return a list of pass names, got 3"),
        # what report.json's schema refuses (publish would refuse the sweep's report)
        ("return ['fuse bn']", r"get_available_passes\(\): 'fuse bn' is no pass name"),
    ],
)
def test_an_optimizers_own_pass_list_failing_is_its_load_error_not_ours(
    tmp_path: Path, body: str, says: str
) -> None:
    """It was an internal error of ditox-ci (exit 70); the same failure in a wheel was exit 5."""
    module = tmp_path / "mine.py"
    optimize = "def optimize(model, passes, fixed_point):\n    return model\n"
    module.write_text(f"def get_available_passes():\n    {body}\n\n\n{optimize}")
    with pytest.raises(OptimizerLoadError, match=says) as refused:
        load_optimizer(f"{module}:optimize")
    assert refused.value.exit_code == 5
