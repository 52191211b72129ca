"""A tiny corpus for the Action's tests and the self-test workflow: `python action_models.py DIR`.

Four small models of different size, one of them (Identity before an output) exercising a pass
the default optimizer rewrites.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(
    directory: Path, name: str, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], out: str
) -> None:
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2, 4])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, directory / f"{name}.onnx")


def write_models(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    weight = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4) / 16, "w")
    _save(directory, "relu", [helper.make_node("Relu", ["x"], ["y"])], [], "y")
    _save(
        directory,
        "identity_chain",
        [
            helper.make_node("Identity", ["x"], ["a"]),
            helper.make_node("Relu", ["a"], ["b"]),
            helper.make_node("Identity", ["b"], ["y"]),
        ],
        [],
        "y",
    )
    _save(
        directory,
        "matmul_add",
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "x"], ["y"])],
        [weight],
        "y",
    )
    _save(
        directory,
        "deep",
        [
            helper.make_node("Sigmoid" if i % 2 else "Relu", [f"t{i}" if i else "x"], [f"t{i + 1}"])
            for i in range(12)
        ],
        [],
        "t12",
    )
    return sorted(directory.glob("*.onnx"))


def write_wrong_add(path: Path) -> Path:
    """Identity then Add of a weight, in a graph named `wrong_add`: the fake faulty optimizer
    (tests/fakes/faulty_optimizers.py) flips the Add of `wrong*` graphs, so a sweep finds a bug."""
    weight = numpy_helper.from_array(np.ones((2, 4), np.float32), "w")
    nodes = [helper.make_node("Identity", ["x"], ["t"]), helper.make_node("Add", ["t", "w"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "wrong_add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [weight],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


if __name__ == "__main__":
    write_models(Path(sys.argv[1]))
