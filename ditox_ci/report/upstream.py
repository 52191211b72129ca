"""What a maintainer needs to close the loop upstream: where the culprit pass's source is, and a
regression test in the optimizer's own test style, built from the reduced model.

Each built-in optimizer whose repository layout is known has an `Upstream` entry: its GitHub
repository, the file of a pass, the test file a regression test goes in and the template that
writes one. The test is Python text for someone else's suite, so it is rendered (like the
standalone script, from the standalone record): it cannot import ditox-ci.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnx.parser
from onnx import numpy_helper

from ditox_ci.control import NOP
from ditox_ci.registry import Registry
from ditox_ci.report.model import Finding, Report
from ditox_ci.report.standalone import feed_expression, input_spec
from ditox_ci.report.templates import render

_RELEASE = re.compile(r"^\d+(\.\d+)*$")
_DESCRIBED_COMMIT = re.compile(r"-g([0-9a-f]{7,40})(-dirty)?$")


@dataclass(frozen=True)
class Upstream:
    """Where an optimizer lives: `source` maps a pass to its file (None: no file of its own);
    `tag` maps a released version to its git tag."""

    repository: str
    source: Callable[[str], str | None]
    test_file: str
    test_template: str
    tag: Callable[[str], str]


def _onnxoptimizer_source(pass_name: str) -> str | None:
    # each pass of onnx/optimizer is a header named after it; split_init and split_predict share one
    header = "split" if pass_name in ("split_init", "split_predict") else pass_name
    return f"onnxoptimizer/passes/{header}.h" if pass_name != NOP else None


UPSTREAMS: Registry[Upstream] = Registry("optimizer repository layout")
UPSTREAMS["onnxoptimizer"] = Upstream(
    repository="onnx/optimizer",
    source=_onnxoptimizer_source,
    test_file="onnxoptimizer/test/optimizer_test.py",
    test_template="upstream_onnxoptimizer.py.j2",
    tag=lambda version: f"v{version}",
)


def _upstream(report: Report) -> Upstream | None:
    return UPSTREAMS.get(report.optimizer.name)


# a pass name that can name a file of the repository: anything else (from a fork's report, or an
# optimizer's own pass list) is no path, and no link is made of it
_PASS_NAME = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*")


def pass_source(report: Report, finding: Finding) -> str | None:
    """The repository path of the culprit pass's source, where the optimizer's layout is known."""
    upstream = _upstream(report)
    if upstream and finding.culprit.scope in ("pass", "interaction") and finding.culprit.passes:
        name = finding.culprit.passes[0]
        return upstream.source(name) if _PASS_NAME.fullmatch(name) else None
    return None


def _revision(report: Report, upstream: Upstream) -> str:
    """The tested build's commit (a checkout's git describe), its release tag, else the default branch."""
    build = report.optimizer.build or {}
    described = _DESCRIBED_COMMIT.search(str(build.get("git_describe", "")))
    if described:
        return described.group(1)
    version = report.optimizer.version
    return upstream.tag(version) if _RELEASE.match(version) else "HEAD"


def source_url(report: Report, finding: Finding) -> str | None:
    """A link to the culprit pass's source file at the tested version."""
    upstream, path = _upstream(report), pass_source(report, finding)
    if upstream is None or path is None:
        return None
    return f"https://github.com/{upstream.repository}/blob/{_revision(report, upstream)}/{path}"


def regression_test_file(report: Report) -> str | None:
    upstream = _upstream(report)
    return upstream.test_file if upstream else None


def _py(value: Any) -> str:
    """Python source for a name, a number or a list of them, with the double quotes of the
    optimizer's own tests."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    return repr(value)


# TensorProto's element types by number, as the test writes them (TensorProto.FLOAT)
def _elem_type(number: int) -> str:
    return f"TensorProto.{onnx.TensorProto.DataType.Name(number)}"


def _value_info(value: onnx.ValueInfoProto) -> str | None:
    if not value.type.HasField("tensor_type"):
        return None
    tensor = value.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim]
    shape = _py(dims) if tensor.HasField("shape") else "None"
    return f"helper.make_tensor_value_info({_py(value.name)}, {_elem_type(tensor.elem_type)}, {shape})"


def _array(array: np.ndarray) -> str | None:
    spec = input_spec(array)
    if spec is None or "values" not in spec:
        return None
    return feed_expression(spec)


def _attribute(attribute: onnx.AttributeProto) -> str | None:
    value = onnx.helper.get_attribute_value(attribute)
    if isinstance(value, onnx.TensorProto):
        array = _array(numpy_helper.to_array(value))
        return f"{attribute.name}=numpy_helper.from_array({array})" if array else None
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, list):
        value = [v.decode() if isinstance(v, bytes) else v for v in value]
        if not all(isinstance(v, (int, float, str)) for v in value):
            return None  # subgraphs, tensor lists: beyond a pasted test
    elif not isinstance(value, (int, float, str)):
        return None
    return f"{attribute.name}={_py(value)}"


def _node(node: onnx.NodeProto) -> str | None:
    attributes = [_attribute(a) for a in node.attribute]
    if None in attributes:
        return None
    domain = [f"domain={_py(node.domain)}"] if node.domain else []
    args = [_py(node.op_type), _py(list(node.input)), _py(list(node.output)), *attributes, *domain]
    return f"helper.make_node({', '.join(str(a) for a in args)})"


def _graph_code(model: onnx.ModelProto) -> dict[str, Any] | None:
    graph = model.graph
    nodes = [_node(node) for node in graph.node]
    inputs = [_value_info(v) for v in graph.input]
    outputs = [_value_info(v) for v in graph.output]
    initializers = [(t.name, _array(numpy_helper.to_array(t))) for t in graph.initializer]
    if None in nodes or None in inputs or None in outputs or any(code is None for _, code in initializers):
        return None
    return {
        "nodes": nodes,
        "inputs": inputs,
        "outputs": outputs,
        "initializers": [f"numpy_helper.from_array({code}, {_py(name)})" for name, code in initializers],
        "opsets": [f"helper.make_opsetid({_py(o.domain)}, {o.version})" for o in model.opset_import],
        "ir_version": model.ir_version,
    }


def regression_test_name(finding: Finding) -> str:
    words = [*finding.culprit.passes[:2], finding.kind]
    return "test_" + re.sub(r"[^0-9a-z_]+", "_", "_".join(words).lower()).strip("_")


def regression_test(report: Report, record: Mapping[str, Any] | None, finding: Finding) -> str | None:
    """A unittest method for the optimizer's own test file that fails while the bug is there;
    None when the layout is not known or the reduced model is beyond plain `onnx.helper` code."""
    upstream = _upstream(report)
    if upstream is None or not record or not finding.culprit.passes:
        return None
    try:
        model = onnx.parser.parse_model(record["model"])
    except Exception:  # a record the parser no longer reads: no test rather than a broken one
        return None
    code = _graph_code(model)
    if code is None:
        return None
    feeds = [(name, feed_expression(spec)) for name, spec in record.get("inputs", {}).items()]
    return render(
        upstream.test_template,
        name=regression_test_name(finding),
        finding=finding,
        record=record,
        feeds=feeds,
        seeded=any("values" not in spec for spec in record.get("inputs", {}).values()),
        **code,
    )
