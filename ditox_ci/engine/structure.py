"""What an optimized model's graph shows before it runs, read against the original's graph: the
checker's verdict, initializers the optimizer left unused, ONNX Runtime contrib ops, the op types it
removed or added, and differences that are only information (a changed interface: `interface.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import onnx

from ditox_ci.report.effect import Size


def checker_error(data: bytes) -> str | None:
    """What onnx's full checker says is wrong with the model `data` serializes; None when it
    passes. It takes the bytes the sweep holds: given a ModelProto, the checker serializes it
    again (a full check of VGG-19 took 1.9-2.6 s on the model, 0.5-0.6 s on its bytes)."""
    try:
        onnx.checker.check_model(data, full_check=True)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    return None


def _used_names(graph: onnx.GraphProto) -> set[str]:
    used = {o.name for o in graph.output}
    for node in graph.node:
        used.update(node.input)
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                used |= _used_names(sub)
    return used


def unused_initializers(graph: onnx.GraphProto) -> set[str]:
    used = _used_names(graph)
    return {init.name for init in graph.initializer if init.name not in used}


CONTRIB_DOMAIN = "com.microsoft"


def contrib_ops(model: onnx.ModelProto) -> list[str]:
    """The ONNX Runtime contrib op types of the main graph, sorted."""
    return sorted({node.op_type for node in model.graph.node if node.domain == CONTRIB_DOMAIN})


def op_changes(original: onnx.GraphProto, optimized: onnx.GraphProto) -> dict[str, list[str]]:
    """Op types whose count went down / up: what the optimizer rewrote, independent of node names."""
    before = Counter(node.op_type for node in original.node)
    after = Counter(node.op_type for node in optimized.node)
    return {
        "ops_removed": sorted(op for op in before if before[op] > after[op]),
        "ops_added": sorted(op for op in after if after[op] > before[op]),
    }


def info_notes(original: onnx.ModelProto, optimized: onnx.ModelProto) -> list[str]:
    """Differences that are not failures, recorded as information."""
    found = []
    if original.ir_version != optimized.ir_version:
        found.append(f"ir_version {original.ir_version} -> {optimized.ir_version}")
    if len(original.metadata_props) != len(optimized.metadata_props):
        found.append("metadata_props changed")
    # the old names only: a pass that makes up new ones (split_init) numbers them with a counter
    # that lives as long as the process, so they differ with the models a worker ran before
    renamed = [a.name for a, b in zip(original.graph.output, optimized.graph.output) if a.name != b.name]
    if renamed:
        found.append("outputs renamed: " + ", ".join(renamed))
    return found


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """`graph` and every subgraph in it (If branches, Loop and Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                yield from _graphs(sub)


def model_size(model: onnx.ModelProto, nbytes: int) -> Size:
    """The model's size (report/effect.py): what a pass that fuses, folds or removes shrinks."""
    ops: Counter[str] = Counter()
    initializers = 0
    for graph in _graphs(model.graph):
        initializers += len(graph.initializer) + len(graph.sparse_initializer)
        ops.update(
            node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
            for node in graph.node
        )
    return Size(sum(ops.values()), initializers, nbytes, dict(sorted(ops.items())))
