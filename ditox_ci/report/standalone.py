"""A bug report that stands alone: the reduced model in ONNX's textual syntax, its inputs, and a
short script that rebuilds it with `onnx.parser`, runs the optimizer and ONNX Runtime, and says
whether the bug is present — so an issue reproduces after the run's artifact has expired and can
be forwarded upstream as it is. Also the Mermaid diagram of the reduced graph before and after the
culprit passes.

The record lives in the finding's `pinpointing.standalone` (report.json's `evidence.standalone`;
one finding per bug carries it):
`model` (printer text), `optimized` (text of the model after the culprit passes, when the
optimizer returned one), `inputs` (per input: dtype, shape and either `values` or a `seed` with
`low`/`high`), `passes`, `fixed_point`, `rtol`, `atol`, `versions`, `reproduces` (whether the
script printed BUG PRESENT when ditox-ci ran it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import onnx.parser
import onnx.printer

from ditox_ci.report.model import Finding, Report
from ditox_ci.report.templates import render

# the optimizer the script imports and calls (its `import onnxoptimizer`)
STANDALONE_OPTIMIZER = "onnxoptimizer"
MODEL_TEXT_LIMIT = 20_000
# an issue shows the model twice (the script's text, the regression test's onnx.helper code) and
# the inputs' code twice (both feed them); beyond this the body outgrows GitHub's 65,536
# characters and its cut drops the artifact's repro
ISSUE_TEXT_LIMIT = 50_000
# inline values up to these sizes (integer tensors are often shapes or indices: exact values matter)
INLINE_FLOATS = 256
INLINE_INTEGERS = 4096
DIAGRAM_NODES = 60
INPUT_SEED = 0
_DTYPES = {"bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64"}


def model_text(model: onnx.ModelProto) -> str | None:
    """The model in ONNX's textual syntax, if it is small and parses back to the same graph.

    Metadata is left out (a generator's notes, not the bug); the script holds the text in a raw
    triple-quoted string, so a text with three double quotes in a row does not stand alone."""
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.metadata_props[:]
    try:
        text = onnx.printer.to_text(bare)
        parsed = onnx.parser.parse_model(text)
    except Exception:  # the printer and parser do not cover every valid model
        return None
    same = [n.op_type for n in parsed.graph.node] == [n.op_type for n in model.graph.node]
    return text if same and len(text) <= MODEL_TEXT_LIMIT and '"""' not in text else None


def input_spec(value: Any) -> dict[str, Any] | None:
    """How the script makes one input: its values when small, else a seeded uniform draw over the
    recorded range; None for a dtype the script cannot write as numpy code, or a value that is not
    a tensor (a sequence input is a list, an omitted optional one None)."""
    array = np.asarray(value) if isinstance(value, np.generic) else value
    if not isinstance(array, np.ndarray) or array.dtype.name not in _DTYPES:
        return None
    spec: dict[str, Any] = {"dtype": array.dtype.name, "shape": list(array.shape)}
    limit = INLINE_FLOATS if array.dtype.kind == "f" else INLINE_INTEGERS
    if array.size <= limit:
        spec["values"] = array.reshape(-1).tolist()
        return spec
    finite = array[np.isfinite(array)] if array.dtype.kind == "f" else array
    low = float(finite.min()) if finite.size else 0.0
    high = float(finite.max()) if finite.size else 1.0
    spec.update(seed=INPUT_SEED, low=low, high=high)
    return spec


def standalone_record(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    passes: list[str],
    fixed_point: bool,
    rtol: float,
    atol: float,
    versions: Mapping[str, str],
) -> dict[str, Any] | None:
    """The record for a reduced model and one sample of its inputs; None when it cannot stand
    alone (too big for an issue, not printable, an input dtype numpy code cannot spell)."""
    text = model_text(model)
    if text is None:
        return None
    inputs = {}
    for name, value in feeds.items():
        spec = input_spec(value)
        if spec is None:
            return None
        inputs[name] = spec
    if 2 * (len(text) + sum(len(feed_expression(spec)) for spec in inputs.values())) > ISSUE_TEXT_LIMIT:
        return None
    return {
        "model": text,
        "inputs": inputs,
        "passes": list(passes),
        "fixed_point": fixed_point,
        "rtol": rtol,
        "atol": atol,
        "versions": dict(versions),
    }


def pip_line(record: Mapping[str, Any]) -> str:
    """The script's dependencies, pinned as they were seen; a build that is not a release (the
    record's `build`) is left out: pip would install the release of its version instead."""
    pins = [
        f"{name}=={version}"
        for name, version in sorted(record["versions"].items())
        if not (record.get("build") and name == STANDALONE_OPTIMIZER)
    ]
    return " ".join(["pip install", *pins, "numpy"])


def standalone_of(report: Report, fingerprint: str) -> Mapping[str, Any] | None:
    """The standalone record of a bug: the finding that was reduced carries it."""
    for finding in report.findings:
        record = finding.pinpointing.standalone
        if finding.fingerprint == fingerprint and record is not None and record.get("model"):
            return record
    return None


def _number(value: Any, dtype: str) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "np.nan"
        if math.isinf(value):
            return "np.inf" if value > 0 else "-np.inf"
        # the shortest text that reads back to the same float32/float16 (1.7640524, not
        # 1.764052391052246): the values are exact in the input's own dtype
        return str(np.dtype(dtype).type(value)) if dtype in ("float16", "float32") else repr(value)
    return repr(value)


def feed_expression(spec: Mapping[str, Any]) -> str:
    """numpy code for one input."""
    dtype, shape = spec["dtype"], list(spec["shape"])
    if "values" in spec:
        values = ", ".join(_number(v, dtype) for v in spec["values"])
        # np.bool_, not np.bool: numpy 1.24 to 1.26 have no np.bool
        scalar = "bool_" if dtype == "bool" else dtype
        return f"np.array([{values}], dtype=np.{scalar}).reshape({shape})"
    low, high = spec["low"], spec["high"]
    if dtype == "bool":
        return f"rng.integers(0, 2, size={shape}).astype(np.bool_)"
    if np.dtype(dtype).kind in "iu":
        return f"rng.integers({int(low)}, {int(high) + 1}, size={shape}).astype(np.{dtype})"
    return f"rng.uniform({low!r}, {high!r}, size={shape}).astype(np.{dtype})"


def script(record: Mapping[str, Any], finding: Finding) -> str:
    """The copy-paste script: exits 1 and prints BUG PRESENT while the bug is there, else 0."""
    seeded = any("values" not in spec for spec in record["inputs"].values())
    feeds = [(name, feed_expression(spec)) for name, spec in record["inputs"].items()]
    return render(
        "standalone.py.j2",
        record=record,
        finding=finding,
        feeds=feeds,
        seeded=seeded,
        seed=INPUT_SEED,
        pip=pip_line(record),
        optimizer=STANDALONE_OPTIMIZER,
    )


_UNSAFE_LABEL = re.compile(r'["<>`\\{}|#;]')
# Mermaid's entity codes: a label shows brackets as ONNX writes lists (perm=[0, 2, 1])
_BRACKETS = {"[": "#91;", "]": "#93;"}


def _label(text: str, limit: int = 40, keep_end: bool = False) -> str:
    """Mermaid-inert text; long names keep their end, where names that share a prefix differ."""
    text = _UNSAFE_LABEL.sub("_", text.replace("\n", " "))
    if len(text) > limit:
        text = "…" + text[1 - limit :] if keep_end else text[: limit - 1] + "…"
    return re.sub(r"[\[\]]", lambda bracket: _BRACKETS[bracket.group()], text)


def _attribute(attribute: onnx.AttributeProto) -> str | None:
    value = onnx.helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if isinstance(value, (int, float, str)) or (
        isinstance(value, list) and len(value) <= 8 and all(isinstance(v, (int, float)) for v in value)
    ):
        return f"{attribute.name}={value}"
    return None


def small_values(spec: Mapping[str, Any]) -> Any:
    """The values of an input small enough to show inline (a shape, axes, an index), a rank-0
    input's as its one value; None when not shown."""
    values = spec.get("values")
    exact = str(spec.get("dtype")) in _DTYPES and np.dtype(str(spec["dtype"])).kind in "iub"
    if not (exact and isinstance(values, list) and len(values) <= 8):
        return None
    return values[0] if spec.get("shape") == [] and len(values) == 1 else values


def _input_label(name: str, spec: Mapping[str, Any] | None) -> str:
    values = small_values(spec) if spec else None
    return f"{name} = {values}" if values is not None else name


def _graph_lines(graph: onnx.GraphProto, prefix: str, inputs: Mapping[str, Any]) -> list[str]:
    lines = []
    producer: dict[str, str] = {}
    for index, value in enumerate(graph.input):
        node_id = f"{prefix}i{index}"
        label = _label(_input_label(value.name, inputs.get(value.name)), keep_end=True)
        lines.append(f'{node_id}(["{label}"])')
        producer[value.name] = node_id
    for index, node in enumerate(graph.node):
        node_id = f"{prefix}n{index}"
        details = [text for text in map(_attribute, node.attribute) if text][:3]
        label = "<br/>".join([_label(node.op_type), *(_label(d) for d in details)])
        lines.append(f'{node_id}["{label}"]')
        for name in node.input:
            if name in producer:
                lines.append(f"{producer[name]} --> {node_id}")
        for name in node.output:
            producer[name] = node_id
    for index, value in enumerate(graph.output):
        node_id = f"{prefix}o{index}"
        lines.append(f'{node_id}(["{_label(value.name, keep_end=True)}"])')
        if value.name in producer:
            lines.append(f"{producer[value.name]} --> {node_id}")
    return lines


def mermaid(record: Mapping[str, Any]) -> str | None:
    """A Mermaid flowchart of the reduced graph before and after the culprit passes."""
    try:
        before = onnx.parser.parse_model(record["model"]).graph
        after = onnx.parser.parse_model(record["optimized"]).graph if record.get("optimized") else None
    except Exception:
        return None
    if len(before.node) > DIAGRAM_NODES or (after is not None and len(after.node) > DIAGRAM_NODES):
        return None
    passes = ", ".join(_label(name) for name in record.get("passes", ()))
    lines = ["flowchart LR", '  subgraph before["before"]', "    direction LR"]
    lines += [f"    {line}" for line in _graph_lines(before, "b", record.get("inputs", {}))]
    lines.append("  end")
    if after is not None:
        lines += [f'  subgraph after["after {passes}"]', "    direction LR"]
        lines += [f"    {line}" for line in _graph_lines(after, "a", record.get("inputs", {}))]
        lines.append("  end")
    return "\n".join(lines)
