"""The values a model computes: every top-level tensor by name, recorded once per input sample.

Node-level divergence compares two models' recorded values; reduction feeds a subgraph the values
the original computed for the tensors it no longer produces.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from ditox_ci.engine import runner

Feeds = list[dict[str, np.ndarray]]


def node_inputs(node: onnx.NodeProto) -> list[str]:
    """Every value a node reads, including outer-scope values its subgraphs (If/Loop/Scan) use."""
    names = [name for name in node.input if name]
    for attribute in node.attribute:
        for graph in (
            [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else attribute.graphs
        ):
            names.extend(sorted(_outer_references(graph)))
    return names


def _outer_references(graph: onnx.GraphProto) -> set[str]:
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {name for node in graph.node for name in node.output}
    used = {name for node in graph.node for name in node_inputs(node)}
    used |= {v.name for v in graph.output}
    return used - defined


def record_values(
    model: onnx.ModelProto, feeds: Sequence[dict[str, np.ndarray]], runner_name: str = "onnxruntime"
) -> Feeds:
    """Every top-level tensor value the model computes, per sample, by name (feeds included), as
    `runner_name` computes them.

    Raises runner.RuntimeLoadError / RuntimeRunError when that runner cannot run the model."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    present = {v.name for v in exposed.graph.output}
    for node in exposed.graph.node:
        for name in node.output:
            if name and name not in present:
                exposed.graph.output.append(onnx.ValueInfoProto(name=name))
                present.add(name)
    session = runner.load_session(exposed.SerializeToString(), runner=runner_name)
    names = [v.name for v in exposed.graph.output]
    recorded: Feeds = []
    for feed in feeds:
        values = dict(feed)
        for name, value in zip(names, runner.run(session, feed), strict=True):
            if isinstance(value, np.ndarray) and value.dtype != object:
                values[name] = value
        recorded.append(values)
    return recorded
