"""Models whose round trip the planted builds and onnxoptimizer 0.4.2 treat apart: a sequence
output whose type a round trip may drop, and the same model without it."""

import numpy as np
import onnx
from onnx import TensorProto, helper


def sequence_output_model(name: str) -> onnx.ModelProto:
    """x + w through Tanh, and the sum in a sequence output: onnxoptimizer 0.4.2's round trip
    drops the sequence output's type, so even its nop control fails the checker."""
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
    """The same model without its sequence output: every round trip keeps it valid."""
    model = sequence_output_model(name)
    del model.graph.output[1]
    del model.graph.node[3]
    return model
