"""The standalone repro an issue carries: model text that parses back, inputs that come back with
the same values (or a seeded draw in the recorded range), and a diagram untrusted names cannot
break out of."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ditox_ci.report.model import Culprit, Finding
from ditox_ci.report.standalone import INLINE_FLOATS, feed_expression, mermaid, script, standalone_record

HOSTILE = 'x"] --> evil[`<script>`'


def _model(input_name: str = "x") -> onnx.ModelProto:
    graph = helper.make_graph(
        [
            helper.make_node("Relu", [input_name], ["r"]),
            helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2]),
        ],
        "g",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, 2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 7])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    # a generator's notes: JSON with quotes and backslashes, which a plain string literal would eat
    helper.set_model_props(model, {"ditox.value_ranges": '{"x": {"low": -1.0, "high": "a\\\\b"}}'})
    return model


def _script_namespace(record: dict, kind: str = "output-mismatch") -> dict:
    finding = Finding("f" * 20, kind, "m", "pass:x", Culprit("pass", ("fuse_pad_into_pool",)))
    namespace: dict = {}
    exec(compile(script(record, finding), "standalone.py", "exec"), namespace)
    return namespace


def test_the_script_rebuilds_the_model_and_its_inputs():
    small = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 2, 8)
    record = standalone_record(_model(), {"x": small}, ["fuse_pad_into_pool"], False, 1e-3, 1e-4, {})
    assert record is not None and "metadata_props" not in record["model"]
    namespace = _script_namespace(record)
    rebuilt = namespace["build_model"]()
    assert [n.op_type for n in rebuilt.graph.node] == ["Relu", "MaxPool"]
    feeds = namespace["make_feeds"]()
    assert feeds["x"].dtype == np.float32 and np.array_equal(feeds["x"], small)


def test_an_invalid_model_finding_is_present_when_the_checker_rejects_what_onnx_runtime_runs(capsys):
    record = standalone_record(_model(), {"x": np.ones((1, 2, 8), np.float32)}, ["p"], False, 1e-3, 1e-4, {})
    assert record is not None

    def optimize(model: onnx.ModelProto) -> onnx.ModelProto:
        # same outputs, but a value_info full_check's shape inference contradicts
        broken = onnx.ModelProto()
        broken.CopyFrom(model)
        broken.graph.value_info.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 2, 9]))
        return broken

    for kind, code, said in (("invalid-model", 1, "BUG PRESENT: "), ("output-mismatch", 0, "OK: ")):
        namespace = _script_namespace(record, kind)
        namespace["optimize"] = optimize  # the script's main() looks it up when it runs
        assert namespace["main"]() == code
        assert capsys.readouterr().out.startswith(said)


def test_inputs_too_long_to_quote_in_an_issue_make_no_record():
    # 4,096 int64 values are inlined (exact indices matter); this many digits outgrow an issue body
    graph = helper.make_graph(
        [helper.make_node("Identity", ["i"], ["o"])],
        "g",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [4096])],
        [helper.make_tensor_value_info("o", TensorProto.INT64, [4096])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    short = np.arange(4096, dtype=np.int64)
    assert standalone_record(model, {"i": short}, ["p"], False, 0, 0, {}) is not None
    assert standalone_record(model, {"i": short + 10**15}, ["p"], False, 0, 0, {}) is None


def test_a_sequence_or_omitted_input_makes_no_record_and_no_error():
    # a sequence input is fed as a list of tensors (ragged here: numpy cannot stack it)
    for value in ([np.zeros(2, np.float32), np.zeros(3, np.float32)], None):
        assert standalone_record(_model(), {"x": value}, ["p"], False, 0, 0, {}) is None


def test_bool_values_are_spelled_for_numpy_1_and_2():
    expression = feed_expression({"dtype": "bool", "shape": [2], "values": [True, False]})
    assert "np.bool_" in expression
    assert eval(expression, {"np": np}).tolist() == [True, False]


def test_an_output_whose_element_type_changed_is_an_interface_change_the_script_shows(capsys):
    record = standalone_record(_model(), {"x": np.ones((1, 2, 8), np.float32)}, ["p"], False, 1e-3, 1e-4, {})
    assert record is not None
    namespace = _script_namespace(record, "interface-change")

    def optimize(model: onnx.ModelProto) -> onnx.ModelProto:
        # the same values, as float64: np.allclose alone says they agree
        changed = onnx.ModelProto()
        changed.CopyFrom(model)
        changed.graph.node.append(helper.make_node("Cast", ["y64"], ["y"], to=TensorProto.DOUBLE))
        changed.graph.node[1].output[0] = "y64"
        changed.graph.output[0].type.tensor_type.elem_type = TensorProto.DOUBLE
        return changed

    namespace["optimize"] = optimize
    assert namespace["main"]() == 1
    assert capsys.readouterr().out.startswith("BUG PRESENT: output y has dtype float64, not float32")


def test_large_float_inputs_are_a_seeded_draw_in_the_recorded_range():
    large = np.random.default_rng(3).uniform(-5, 2, size=(1, 2, INLINE_FLOATS)).astype(np.float32)
    record = standalone_record(_model(), {"x": large}, ["p"], False, 1e-3, 1e-4, {})
    assert record is not None and "values" not in record["inputs"]["x"]
    first = _script_namespace(record)["make_feeds"]()["x"]
    again = _script_namespace(record)["make_feeds"]()["x"]
    assert first.shape == large.shape and np.array_equal(first, again)
    assert large.min() <= first.min() and first.max() <= large.max()


def test_the_diagram_shows_before_and_after_and_names_cannot_break_it():
    feeds = {HOSTILE: np.zeros((1, 2, 8), np.float32)}
    record = standalone_record(_model(HOSTILE), feeds, ["p"], False, 0, 0, {})
    assert record is not None
    after = helper.make_model(
        helper.make_graph(
            [helper.make_node("MaxPool", [HOSTILE], ["y"], kernel_shape=[2], pads=[0, 1])],
            "g",
            [helper.make_tensor_value_info(HOSTILE, TensorProto.FLOAT, [1, 2, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8])],
        ),
        opset_imports=[helper.make_opsetid("", 13)],
    )
    record["optimized"] = onnx.printer.to_text(after)
    diagram = mermaid(record)
    assert diagram is not None
    assert 'subgraph before["before"]' in diagram and 'subgraph after["after p"]' in diagram
    # lists as ONNX writes them, in Mermaid's entity codes for brackets
    assert "MaxPool<br/>kernel_shape=#91;2#93;<br/>pads=#91;0, 1#93;" in diagram
    for bad in ("<script>", "`", "evil["):
        assert bad not in diagram
    # every line is a node, an edge or subgraph syntax: nothing the name injected
    assert all(line.strip().split(" ")[0] in ("flowchart", "subgraph", "direction", "end") or
               line.strip()[:2] in ("bi", "bn", "bo", "ai", "an", "ao") for line in diagram.splitlines())
