"""onnxsim, onnxscript, onnx-ir, ONNX Runtime's optimizer and onnxslim as built-in optimizers: a
real sweep of each (real optimizer, real ONNX Runtime) finds the bugs issues 18 and 29 list, with
the right kind, pinned on that optimizer's own passes, and nothing on clean models. The models
are built here or selected from the named sources; `make test` installs the optimizers through the
`dev` extra, so nothing is skipped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.fuzz import GENERATORS, generate
from ditox_ci.optimizers import installed_optimizers, load_optimizer
from ditox_ci.report.kinds import kind_gates
from tests.helpers import run_cli

# clean for every optimizer here: a finding on one of them is a false alarm
CLEAN = ("onnx-node:test_relu", "onnx-node:test_add", "onnx-data:pytorch-converted/test_Conv2d")


def _model(
    nodes: list[onnx.NodeProto], inputs: list, outputs: list, opset: int, **graph: Any
) -> onnx.ModelProto:
    model = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs, **graph),
        opset_imports=[helper.make_opsetid("", opset)],
        ir_version=7,
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def opset12_split_to_sequence() -> onnx.ModelProto:
    """onnxscript folds it into Split/Unsqueeze with their opset-13 inputs inside an opset-12 model."""
    return _model(
        [
            helper.make_node("SplitToSequence", ["x", "sizes"], ["seq"], axis=1),
            helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, new_axis=1),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3])],
        opset=12,
        initializer=[helper.make_tensor("sizes", TensorProto.INT64, [2], [3, 3])],
    )


def if_branches_output_identities() -> onnx.ModelProto:
    """Both If branches output an Identity of one outer value: onnx-ir's identity elimination
    moves that value into the first branch's outputs, then raises on the second."""
    value = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in ("t", "e")]
    then_branch = helper.make_graph([helper.make_node("Identity", ["u"], ["t"])], "then", [], [value[0]])
    else_branch = helper.make_graph([helper.make_node("Identity", ["u"], ["e"])], "else", [], [value[1]])
    return _model(
        [
            helper.make_node("Relu", ["x"], ["u"]),
            helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch),
        ],
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        opset=13,
    )


def run_sweep(optimizer: str, out: Path, *args: str, code: int, timeout: float) -> dict:
    """`ditox-ci sweep --optimizer OPTIMIZER --out OUT ARGS`, asserted to exit with `code`: its report."""
    done = run_cli("sweep", "--optimizer", optimizer, "--out", str(out), *args, timeout=timeout)
    assert done.returncode == code, done.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


def sweep(
    tmp_path: Path,
    optimizer: str,
    models: dict[str, onnx.ModelProto],
    sources: tuple[str, ...],
    clean: tuple[str, ...] = CLEAN,
) -> dict:
    folder = tmp_path / "models"
    folder.mkdir()
    for name, model in models.items():
        onnx.save(model, str(folder / f"{name}.onnx"))
    out = tmp_path / "out"
    args = ("--models", str(folder), *sources, *clean, "--configs", "default", "--jobs", "2")
    report = run_sweep(optimizer, out, *args, "--reduce-budget", "5", code=1, timeout=900)
    report["summary"] = (out / "summary.md").read_text()
    report["out"] = out
    return report


def by_model(report: dict) -> dict[str, dict]:
    failures = [f for f in report["findings"] if kind_gates(f["kind"])]
    found = {f["model"]: f for f in failures}
    assert len(found) == len(failures), [(f["model"], f["config"]) for f in failures]
    return found


@pytest.fixture(scope="module")
def onnxsim_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    sources = (
        "onnx-node:test_affine_grid_3d_align_corners_expanded",
        "onnx-data:pytorch-converted/test_PixelShuffle",
        "packaged:silero-vad-16k-op15",  # `make test` installs the packaged models
    )
    return sweep(tmp_path_factory.mktemp("onnxsim"), "onnxsim", {}, sources)


def test_onnxsim_bugs_are_found_and_pinned_on_its_passes_as_sets(onnxsim_report: dict) -> None:
    found = by_model(onnxsim_report)
    assert set(found) == {
        "onnx-node:test_affine_grid_3d_align_corners_expanded",
        "onnx-data:pytorch-converted/test_PixelShuffle",
        "packaged:silero-vad-16k-op15",
    }
    silero = found["packaged:silero-vad-16k-op15"]
    assert silero["kind"] == "optimizer-error"
    assert "must be topologically sorted" in silero["evidence"]["message"]
    assert "constant_folding" in silero["culprit"]["passes"]
    affine = found["onnx-node:test_affine_grid_3d_align_corners_expanded"]
    assert affine["kind"] == "optimizer-error"
    assert "must be topologically sorted" in affine["evidence"]["message"]
    # If elimination with constant folding; a set, so sorted, and the repro does not say "then"
    assert affine["culprit"]["scope"] == "interaction"
    assert affine["culprit"]["passes"] == ["constant_folding", "eliminate_if_with_const_cond"]
    bundle = onnxsim_report["out"] / affine["repro"]
    readme = (bundle / "README.md").read_text()
    assert "`constant_folding` with `eliminate_if_with_const_cond`" in readme
    assert " then " not in readme
    # portable: the adapter travels in the bundle, needs nothing of ditox-ci, and pins onnxsim
    assert "ditox_ci" not in (bundle / "optimizer_adapter.py").read_text()
    assert f"onnxsim=={onnxsim_report['optimizer']['version']}" in (bundle / "requirements.txt").read_text()
    repro = subprocess.run(
        [sys.executable, "repro.py"], cwd=bundle, capture_output=True, text=True, timeout=300
    )
    assert repro.returncode == 1 and "BUG PRESENT" in repro.stdout, repro.stdout + repro.stderr
    ir3 = found["onnx-data:pytorch-converted/test_PixelShuffle"]
    assert ir3["kind"] == "optimizer-error"
    assert "initializer but not in graph input" in ir3["evidence"]["message"]
    assert ir3["culprit"]["scope"] == "pass"
    assert ir3["culprit"]["passes"] == ["constant_folding"]
    assert onnxsim_report["optimizer"]["order_matters"] is False


def test_onnxsim_stamped_metadata_is_not_a_change(tmp_path: Path) -> None:
    """onnxsim writes its options (which passes it skipped) into metadata_props on every run.
    Normalized away, a pass that rewrites nothing gives the control's bytes: it neither counts as a
    change in coverage nor costs a runtime run of its own."""
    args = ("--models", "onnx-node:test_relu", "onnx-node:test_add", "--configs", "single", "--jobs", "1")
    report = run_sweep("onnxsim", tmp_path / "out", *args, code=0, timeout=600)
    assert len(report["coverage"]) == len(report["optimizer"]["passes"]) > 60
    assert {name for name, c in report["coverage"].items() if c["models_changed"]} == set()
    # all 2 x 66 single-pass results are the control's bytes: judged once per model, not per pass
    assert report["stats"]["cache_hits"] == 2 * len(report["coverage"])
    assert report["stats"]["runtime_runs"] < len(report["coverage"])


@pytest.fixture(scope="module")
def onnxscript_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    models = {"opset12_split_to_sequence": opset12_split_to_sequence()}
    # a split that is a graph input (its recorded value 2), so constant folding cannot know it;
    # a CastLike to float8 with saturate=0, whose recorded inputs overflow float8
    sources = (
        "onnx-node:test_split_to_sequence_1",
        "onnx-node:test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN",
    )
    return sweep(tmp_path_factory.mktemp("onnxscript"), "onnxscript", models, sources)


def test_onnxscript_bugs_are_found_and_pinned_on_constant_folding(onnxscript_report: dict) -> None:
    found = by_model(onnxscript_report)
    cast = "onnx-node:test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN"
    assert set(found) == {"onnx-node:test_split_to_sequence_1", "opset12_split_to_sequence.onnx", cast}
    crash = found["onnx-node:test_split_to_sequence_1"]
    assert crash["kind"] == "optimizer-error"
    assert crash["evidence"]["message"].startswith("AttributeError:"), "the root cause, not the PassError"
    assert crash["culprit"]["passes"] == ["fold_constants"]
    opset = found["opset12_split_to_sequence.onnx"]
    assert opset["kind"] == "invalid-model"
    assert "Split" in opset["evidence"]["message"]
    assert opset["culprit"]["passes"] == ["fold_constants"]
    # CastLike becomes a Cast without saturate=0: what overflows saturates instead of turning inf
    saturated = found[cast]
    assert (saturated["kind"], saturated["culprit"]["passes"]) == ("output-mismatch", ["fold_constants"])
    rewrite = (saturated["evidence"]["ops_removed"], saturated["evidence"]["ops_added"])
    assert rewrite == (["CastLike"], ["Cast"])


@pytest.fixture(scope="module")
def onnx_ir_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    models = {"if_branches_output_identities": if_branches_output_identities()}
    return sweep(tmp_path_factory.mktemp("onnx-ir"), "onnx-ir", models, ("onnx-node:test_if_opt",))


def test_onnx_ir_bugs_get_one_culprit_each_from_the_root_cause(onnx_ir_report: dict) -> None:
    found = by_model(onnx_ir_report)
    assert set(found) == {"if_branches_output_identities.onnx", "onnx-node:test_if_opt"}
    identity = found["if_branches_output_identities.onnx"]
    assert identity["kind"] == "optimizer-error"
    # onnx-ir's PassError names the passes that ran before: keyed on it, every prefix would be
    # another failure and the bug would get two culprits
    assert identity["evidence"]["message"].startswith("ValueError:")
    assert "PassError" in identity["evidence"]["raised"]
    assert identity["culprit"] == {**identity["culprit"], "scope": "pass", "passes": ["identity_elimination"]}
    types = found["onnx-node:test_if_opt"]
    assert types["kind"] == "invalid-model"
    # name_fix joins it: the checker's message names the nodes only once name_fix has named them,
    # so shape_inference alone fails with another message
    assert types["culprit"]["passes"] in (["shape_inference"], ["shape_inference", "name_fix"])


def test_a_custom_optimizer_without_pass_lists_is_opaque(tmp_path: Path) -> None:
    adapter = tmp_path / "opaque_adapter.py"
    adapter.write_text(
        "import onnxoptimizer\n\n"
        "def optimize(model, passes, fixed_point):\n"
        "    # its own default for ['default'], nothing for the control's []\n"
        "    return onnxoptimizer.optimize(model, ['fuse_bn_into_conv'] if passes else [], fixed_point)\n"
    )
    out = tmp_path / "out"
    args = ("--models", "onnx-node:test_relu", "--jobs", "1")
    report = run_sweep(f"{adapter}:optimize", out, *args, code=0, timeout=300)
    assert report["optimizer"]["opaque"] is True
    assert report["optimizer"]["passes"] == []
    assert report["stats"]["configs"] == ["nop", "default"], "default and control only"
    summary = (out / "summary.md").read_text()
    assert summary.count("is opaque") == 1
    assert "eliminate_identity" not in json.dumps(report), "never onnxoptimizer's pass names"


@pytest.fixture(scope="module")
def onnxruntime_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return sweep(
        tmp_path_factory.mktemp("onnxruntime"),
        "onnxruntime",
        {},
        ("onnx-data:pytorch-converted/test_Linear_no_bias",),
    )


def test_onnxruntimes_ir3_initializer_bug_is_pinned_on_its_transformer(onnxruntime_report: dict) -> None:
    """ORT's offline optimizer folds a constant into an initializer that an IR-3 model does not
    list as a graph input; localization disables transformers until ConstantFolding alone is left."""
    found = by_model(onnxruntime_report)
    assert set(found) == {"onnx-data:pytorch-converted/test_Linear_no_bias"}
    ir3 = found["onnx-data:pytorch-converted/test_Linear_no_bias"]
    assert ir3["kind"] == "invalid-model"
    assert "initializer but not in graph input" in ir3["evidence"]["message"]
    assert ir3["culprit"] == {**ir3["culprit"], "scope": "pass", "passes": ["ConstantFolding"]}
    assert onnxruntime_report["optimizer"]["noise_floor"] == "reference"
    assert "EliminateIdentity" in onnxruntime_report["optimizer"]["passes"]


def conv_bn() -> onnx.ModelProto:
    """Conv then BatchNormalization: onnxslim's FusionConvBN folds it correctly."""
    params = [helper.make_tensor(name, TensorProto.FLOAT, [2], [0.5, 2.0]) for name in ("s", "b", "m", "v")]
    weight = helper.make_tensor("w", TensorProto.FLOAT, [2, 1, 1, 1], [1.5, -1.0])
    return _model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 3])],
        opset=13,
        initializer=[weight, *params],
    )


@pytest.fixture(scope="module")
def onnxslim_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    sources = (
        "onnx-node:test_squeeze_negative_axes",
        "onnx-node:test_affine_grid_2d_expanded",
        "onnx-node:test_flexattention_score_mod",
    )
    # slim's round trip drops the initializers of IR-3 models (test_Conv2d) from the graph inputs
    clean = ("onnx-node:test_relu", "onnx-node:test_add")
    return sweep(tmp_path_factory.mktemp("onnxslim"), "onnxslim", {"conv_bn": conv_bn()}, sources, clean)


def test_onnxslims_bugs_are_pinned_on_its_stages(onnxslim_report: dict) -> None:
    found = by_model(onnxslim_report)
    squeeze = found.pop("onnx-node:test_squeeze_negative_axes")
    assert (squeeze["kind"], squeeze["culprit"]["passes"]) == ("optimizer-error", ["shape_inference"])
    assert squeeze["evidence"]["message"].startswith("IndexError:")
    unsorted = found.pop("onnx-node:test_affine_grid_2d_expanded")
    assert unsorted["kind"] == "invalid-model"
    assert "topologically sorted" in unsorted["evidence"]["message"]
    assert unsorted["culprit"]["passes"] == ["constant_folding"]
    # a constant the score_mod subgraph reads is dropped by slim's graph round trip, which every
    # config goes through, the control too: the optimizer's infrastructure, not constant_folding
    flex = found.pop("onnx-node:test_flexattention_score_mod")
    where = (flex["kind"], flex["config"], flex["culprit"]["scope"])
    assert where == ("runtime-error", "nop", "infrastructure")
    assert "Unable to find input 'bias'" in flex["evidence"]["message"]
    assert found == {}, "the clean models and the correct Conv-BN fusion give nothing"
    assert onnxslim_report["optimizer"]["order_matters"] is False


# passes that change any model by design: they rename, cut or annotate whatever they are given
CHANGES_ANY_MODEL = {
    ("onnxoptimizer", "rename_input_output"),
    ("onnxoptimizer", "split_init"),
    ("onnxslim", "shape_inference"),
}


def _nothing_to_rewrite() -> onnx.ModelProto:
    """Two named nodes with every shape declared, no constant, no dead end: no pass's pattern."""
    nodes = [
        helper.make_node("Sin", ["x"], ["a"], name="sin"),
        helper.make_node("Cos", ["a"], ["y"], name="cos"),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        opset=17,
        value_info=[helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])],
    )


@pytest.mark.parametrize("name", [n for n in installed_optimizers() if n != "onnxruntime"])
def test_a_pass_changes_a_model_only_beyond_the_control(name: str) -> None:
    """Coverage counts a pass's config against the control's: with onnxslim's control outside slim's
    round trip, each of its 25 passes "changed" 958 of 1,023 operator models; with onnxsim's
    batched MatMul+Add fusion unskipped, every single-pass config fused it."""
    optimizer = load_optimizer(name)

    def optimized(model: onnx.ModelProto, passes: list[str]) -> bytes:
        result = optimizer.optimize(model, passes, False)
        return (optimizer.normalize(result) if optimizer.normalize else result).SerializeToString()

    control = optimized(_nothing_to_rewrite(), [])
    inert = dict(optimizer.info.cannot_fire)
    offered = [p for p in optimizer.info.passes if p not in inert]
    changed = {p for p in offered if optimized(_nothing_to_rewrite(), [p]) != control}
    assert changed == {p for n, p in CHANGES_ANY_MODEL if n == name}
    # and a pass changes a model that holds its pattern (tests/integration/fuzz: each, every seed)
    firing = [p for p in optimizer.info.passes if p in GENERATORS and GENERATORS[p].fires][:5]
    for pass_name in firing:
        item = generate(pass_name, 0, near_miss=False)
        assert optimized(item.model, [pass_name]) != optimized(item.model, []), pass_name


def test_onnxsims_control_unsets_all_zero_rnn_states_as_its_single_passes_do() -> None:
    """onnxsim unsets an RNN's all-zero initial state whenever it optimizes, whatever it skips: with
    a control that did not optimize, each of its 65 passes "changed" the three silero-vad models."""
    hidden, size = 2, 3
    weights = [
        helper.make_tensor("w", TensorProto.FLOAT, [1, 4 * hidden, size], [0.1] * (4 * hidden * size)),
        helper.make_tensor("r", TensorProto.FLOAT, [1, 4 * hidden, hidden], [0.2] * (4 * hidden * hidden)),
        helper.make_tensor("h0", TensorProto.FLOAT, [1, 1, hidden], [0.0] * hidden),
    ]
    model = _model(
        [helper.make_node("LSTM", ["x", "w", "r", "", "", "h0"], ["", "y"], hidden_size=hidden)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, hidden])],
        opset=14,
        initializer=weights,
    )
    optimizer = load_optimizer("onnxsim")

    def optimized(passes: list[str]) -> bytes:
        copy = onnx.ModelProto.FromString(model.SerializeToString())
        return optimizer.normalize(optimizer.optimize(copy, passes, False)).SerializeToString()  # type: ignore[misc]

    control = optimized([])
    assert "h0" not in onnx.ModelProto.FromString(control).graph.node[0].input  # the control unset it too
    assert {p for p in ("fuse_rope", "fuse_qkv", "eliminate_nop_pad") if optimized([p]) != control} == set()


def test_onnxsims_single_passes_leave_a_batched_matmul_and_add_alone() -> None:
    """simplify() runs fuse_matmul_add_bias_into_gemm_batched unless told to skip it by name, and it
    is not in the list of passes onnxsim gives: every single-pass config fused MatMul+Add."""
    weights = helper.make_tensor("w", TensorProto.FLOAT, [4, 5], [0.1] * 20)
    bias = helper.make_tensor("b", TensorProto.FLOAT, [5], [0.5] * 5)
    model = _model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5])],
        opset=13,
        initializer=[weights, bias],
    )
    optimizer = load_optimizer("onnxsim")
    alone = optimizer.optimize(model, ["eliminate_identity"], False)
    assert [n.op_type for n in alone.graph.node] == ["MatMul", "Add"]
    fused = optimizer.optimize(model, ["fuse_matmul_add_bias_into_gemm_batched"], False)
    assert "Gemm" in [n.op_type for n in fused.graph.node]
    assert {"eliminate_shape_gather", "extract_constant_to_initializer"}.isdisjoint(optimizer.info.passes)
