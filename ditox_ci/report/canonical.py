"""Short canonical value names for a reduced model, so a person can read it.

A reduced model keeps the names of the model it was cut from, often 70 characters of a function's
expansion (`GroupNormalization_test_group_normalization_example_expanded_function_XU`); the text,
the script and the diagram of an issue are then hard to read. Graph inputs become `X0, X1, …`,
constants (initializers, `Constant` outputs and small integer inputs, the shapes and indices a
bug usually turns on) `C0, …`, graph outputs `Y0, …` and the rest `t0, …`, in order of use. Node
names are dropped: no pass of an optimizer reads them, and the printer writes each one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

import numpy as np
import onnx

# an integer or bool input at most this big is a constant (a shape, axes, indices): a bug turns on
# its exact values, which the issue shows inline
CONSTANT_INPUT_SIZE = 16
V = TypeVar("V")


def is_constant_input(value: object) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in "iub" and value.size <= CONSTANT_INPUT_SIZE


def _names(model: onnx.ModelProto, feeds: Mapping[str, object]) -> dict[str, str]:
    graph = model.graph
    initializers = [tensor.name for tensor in graph.initializer]
    constants = [*initializers, *(n.output[0] for n in graph.node if n.op_type == "Constant" and n.output)]
    inputs: list[str] = []
    for value in graph.input:
        feed = feeds.get(value.name)
        if value.name in initializers:
            continue
        (constants if is_constant_input(feed) else inputs).append(value.name)
    outputs = [value.name for value in graph.output]
    mapping: dict[str, str] = {}
    for prefix, names in (("X", inputs), ("C", constants), ("Y", outputs)):
        for name in dict.fromkeys(names):
            if name and name not in mapping:
                mapping[name] = f"{prefix}{sum(v.startswith(prefix) for v in mapping.values())}"
    intermediates = (name for node in graph.node for name in node.output if name and name not in mapping)
    for index, name in enumerate(dict.fromkeys(intermediates)):
        mapping[name] = f"t{index}"
    return mapping


def _subgraphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    for node in graph.node:
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                yield sub
                yield from _subgraphs(sub)


def _local_names(graph: onnx.GraphProto) -> set[str]:
    names = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    return names | {name for node in graph.node for name in node.output}


def _rename_graph(graph: onnx.GraphProto, mapping: Mapping[str, str], outer: bool) -> None:
    """Renames the uses of `mapping`'s names; a subgraph (`outer` False) keeps its own names and
    renames only what it reads from the main graph."""
    shadowed = set() if outer else _local_names(graph)

    def new(name: str) -> str:
        return name if name in shadowed else mapping.get(name, name)

    for values in (graph.input, graph.output, graph.value_info):
        for value in values:
            value.name = new(value.name)
    for tensor in graph.initializer:
        tensor.name = new(tensor.name)
    for node in graph.node:
        if outer:
            node.ClearField("name")
        node.input[:] = [new(name) for name in node.input]
        node.output[:] = [new(name) for name in node.output]
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                _rename_graph(sub, mapping, outer=False)


def canonical(
    model: onnx.ModelProto, feeds: Mapping[str, V]
) -> tuple[onnx.ModelProto, dict[str, V], dict[str, str]]:
    """(renamed model, renamed feeds, {old name: new name}); the model unchanged when a name of a
    subgraph would clash with a new one."""
    mapping = _names(model, feeds)
    clashes = set(mapping.values()) & {name for sub in _subgraphs(model.graph) for name in _local_names(sub)}
    if clashes or len(set(mapping.values())) != len(mapping):
        return model, dict(feeds), {}
    renamed = onnx.ModelProto()
    renamed.CopyFrom(model)
    _rename_graph(renamed.graph, mapping, outer=True)
    return renamed, {mapping.get(name, name): value for name, value in feeds.items()}, mapping


def canonical_samples(
    model: onnx.ModelProto, samples: Sequence[Mapping[str, V]]
) -> tuple[onnx.ModelProto, list[dict[str, V]], dict[str, str]]:
    """`canonical` for a model fed several samples: the first decides which inputs are constants."""
    renamed, _, mapping = canonical(model, samples[0] if samples else {})
    return renamed, [{mapping.get(name, name): value for name, value in s.items()} for s in samples], mapping
