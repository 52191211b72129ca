"""onnx-ir's common passes (onnxscript's optimizer runs them too): inlining model-local functions,
dropping unused functions and opset imports, lifting constants (from the main graph and from
subgraphs) to initializers, fixing outputs and names, adding default attributes, clearing doc
strings."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ditox_ci.fuzz import graphs, ort_rules
from ditox_ci.fuzz.base import register
from ditox_ci.fuzz.builder import GraphBuilder, tensor_type

IR = ("onnx-ir",)
IR_AND_SCRIPT = ("onnx-ir", "onnxscript")
LOCAL = "ditox.local"


def _function(b: GraphBuilder, op: str) -> str:
    """A model-local function `LOCAL.<name>(a) -> op(a)`; returns its name."""
    name = b.fresh("F")
    body = helper.make_node(op, ["a"], ["r"])
    b.functions.append(
        helper.make_function(LOCAL, name, ["a"], ["r"], [body], [helper.make_opsetid("", b.opset)])
    )
    b.domains.setdefault(LOCAL, 1)
    return name


@register("inline", optimizers=IR_AND_SCRIPT)
def call_local_function(b: GraphBuilder, near: bool) -> None:
    """A call of a model-local function: its body in its place; near-miss: the function is there
    but nothing calls it (inlining has nothing to do)."""
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4)), 2, 4), np.float32))
    name = _function(b, b.choice(["Relu", "Tanh", "Neg"]))
    b.output(b.wrap(b.op("Neg", [x]) if near else b.op(name, [x], domain=LOCAL)))


@register("remove_unused_functions", optimizers=IR_AND_SCRIPT)
def unused_function(b: GraphBuilder, near: bool) -> None:
    """A model-local function nothing calls: it goes; near-miss: it is called."""
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4)), 2, 4), np.float32))
    name = _function(b, "Relu")
    b.output(b.wrap(b.op(name, [x], domain=LOCAL) if near else b.op("Relu", [x])))


@register("remove_unused_opsets", optimizers=IR_AND_SCRIPT)
def unused_opset(b: GraphBuilder, near: bool) -> None:
    """An opset import no node uses: it goes; near-miss: a node of that domain is there."""
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4)), 2, 4), np.float32))
    if near:
        value = b.op(
            "LabelEncoder",
            [b.op("Cast", [x], to=tensor_type(np.int64))],
            domain="ai.onnx.ml",
            keys_int64s=[0],
            values_int64s=[1],
            default_int64=-1,
        )
        b.output(b.op("Cast", [value], to=tensor_type(np.float32)))
        return
    b.output(b.wrap(x))
    b.finish.append(lambda model: model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 4)))


@register("lift_constants_to_initializers", optimizers=IR_AND_SCRIPT)
def constant_node(b: GraphBuilder, near: bool) -> None:
    """A Constant node with a tensor of 16 or more values (onnx-ir lifts no smaller one): an
    initializer; near-miss: the Constant's value is a graph output too."""
    shape = [4, int(b.rng.integers(4, 7))]
    x = b.wrap(b.input(shape, np.float32))
    constant = b.constant_node(b.values(shape))
    b.output(b.wrap(b.op("Add", [x, constant])))
    if near:
        b.output(constant)


@register("lift_subgraph_initializers_to_main_graph", optimizers=IR_AND_SCRIPT)
def subgraph_initializer(b: GraphBuilder, near: bool) -> None:
    """An If branch with an initializer of its own: lifted into the main graph; near-miss: the branch
    outputs its initializer as it is (a subgraph output, which stays)."""
    shape = b.dims(int(b.rng.integers(1, 3)), 2, 4)
    x = b.wrap(b.input(shape, np.float32))
    condition = b.op("Greater", [b.op("ReduceSum", [x], keepdims=0), b.const(np.array(0.0, np.float32), "z")])
    weight = onnx.numpy_helper.from_array(b.values(shape), b.fresh("k"))
    out = b.fresh("then")
    then_nodes = [] if near else [helper.make_node("Add", [x, weight.name], [out])]
    then_branch = helper.make_graph(
        then_nodes,
        b.fresh("g"),
        [],
        [helper.make_tensor_value_info(weight.name if near else out, 1, shape)],
        [weight],
    )
    other = b.fresh("else")
    else_branch = helper.make_graph(
        [helper.make_node("Neg", [x], [other])],
        b.fresh("g"),
        [],
        [helper.make_tensor_value_info(other, 1, shape)],
    )
    b.output(b.wrap(b.op("If", [condition], then_branch=then_branch, else_branch=else_branch)))


@register("output_fix", optimizers=IR_AND_SCRIPT)
def input_as_output(b: GraphBuilder, near: bool) -> None:
    """A graph input that is also a graph output as it is: an Identity gives the output a producer;
    near-miss: every output is a node's."""
    x = b.input(b.dims(int(b.rng.integers(1, 4)), 2, 4), np.float32)
    b.output(b.wrap(x))
    b.output(b.op("Identity", [x]) if near else x)


register("name_fix", optimizers=IR_AND_SCRIPT)(graphs.unique_node_names)
register("identity_elimination", optimizers=IR)(ort_rules.identity)


@register("add_default_attributes", optimizers=IR)
def default_attributes(b: GraphBuilder, near: bool) -> None:
    """A node without an attribute that has a default (LeakyRelu's alpha, Softmax's axis …): the
    default written out; near-miss: it is written out already."""
    x = b.wrap(b.input(b.dims(int(b.rng.integers(2, 4)), 2, 4), np.float32))
    op, attribute, default = b.choice(
        [
            ("LeakyRelu", "alpha", 0.01),
            ("Elu", "alpha", 1.0),
            ("Softmax", "axis", -1),
            ("ThresholdedRelu", "alpha", 1.0),
        ]
    )
    b.output(b.wrap(b.op(op, [x], **({attribute: default} if near else {}))))


@register("clear_metadata_and_docstring", optimizers=IR)
def doc_strings(b: GraphBuilder, near: bool) -> None:
    """Doc strings and metadata on nodes or the graph: cleared; near-miss: a doc string on the model
    only, which the pass leaves."""
    x = b.wrap(b.input(b.dims(int(b.rng.integers(1, 4)), 2, 4), np.float32))
    b.output(b.wrap(b.op("Relu", [x])))
    if near:
        b.finish.append(lambda model: setattr(model, "doc_string", "exported by ditox-ci's generator"))
        return
    node = b.nodes[int(b.rng.integers(len(b.nodes)))]
    node.doc_string = "made by ditox-ci's generator"
    if b.chance():
        b.finish.append(lambda model: setattr(model.graph, "doc_string", "a generated graph"))
