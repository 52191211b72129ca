"""The onnx-node index: listed without unpacking, current with the installed onnx, families that
name the operator group a case tests."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from onnx import helper

from ditox_ci.corpus import CorpusContext, resolve_sources
from ditox_ci.corpus.node_cases import SHIPPED_INDEX, cases_key, node_family, node_root, operator_under_test


def test_the_shipped_index_is_the_one_for_the_installed_onnx() -> None:
    """Else every machine unpacks all 1,884 cases before its first sweep: after a bump of onnx,
    remake it as node_cases.py says."""
    shipped = json.loads(SHIPPED_INDEX.read_text())
    assert shipped["key"] == cases_key()
    assert len(shipped["cases"]) > 1800 and all(case["module"] for case in shipped["cases"])


def test_a_glob_is_resolved_from_the_index_without_unpacking_anything(tmp_path: Path) -> None:
    ctx = CorpusContext(tmp_path)
    refs = resolve_sources(["onnx-node:test_conv*"], ctx, unpacked=False)
    assert refs and all(ref.id.startswith("onnx-node:test_conv") for ref in refs)
    assert all(ref.size is not None and ref.size.bytes > 0 and ref.size.nodes > 0 for ref in refs)
    assert all(Path(ref.path).parent.parent == node_root(ctx) for ref in refs)
    assert not tmp_path.joinpath("onnx-node").exists()


def _case(*ops: str) -> onnx.ModelProto:
    nodes = [helper.make_node(op, [], [f"v{i}"]) for i, op in enumerate(ops)]
    return helper.make_model(helper.make_graph(nodes, "case", [], []))


def test_a_case_is_named_after_the_operator_it_tests_not_its_first_node() -> None:
    """The old family, the first node's op, put most cases under "Constant" and made ~190 columns."""
    constant_then_pad = _case("Constant", "Constant", "Pad")
    assert operator_under_test(constant_then_pad, "test_constant_pad", "pad") == ("Pad", "")
    # an expanded case holds the function body: Cast nodes, not CastLike; the module names it
    assert (
        operator_under_test(_case("Cast", "Cast"), "test_castlike_float_expanded", "castlike")[0]
        == "CastLike"
    )
    assert operator_under_test(_case("Less", "Equal", "Or"), "test_less_equal_expanded", "less_or_equal")[
        0
    ] == ("LessOrEqual")
    # made before the index knew its module: the name, else the last node that is not a Constant
    assert operator_under_test(_case("Relu"), "test_rangeop_int32", "")[0] == "Range"
    assert operator_under_test(_case("Constant", "Relu", "Constant"), "test_basic_thing", "")[0] == "Relu"


def test_families_are_a_handful_of_operator_groups() -> None:
    assert node_family(_case("Constant", "Pad"), "test_constant_pad", "pad") == "node/tensor"
    assert node_family(_case("LSTM"), "test_lstm_defaults", "lstm") == "node/nn"
    assert node_family(_case("Loop"), "test_loop11", "loop") == "node/control-flow"
    assert (
        node_family(_case("Binarizer"), "test_ai_onnx_ml_binarizer", "ai_onnx_ml.binarizer") == "node/other"
    )
    assert node_family(_case("NoSuchOp"), "test_no_such_op", "") == "node/other"
    shipped = json.loads(SHIPPED_INDEX.read_text())["cases"]
    families = {case["family"] for case in shipped}
    assert families == {
        f"node/{group}"
        for group in ("math", "nn", "tensor", "reduction", "logical", "quantization", "control-flow", "other")
    }
