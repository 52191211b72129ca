"""A bug in plain words: the first sentence of an issue or comment, and the evidence labelled.

An upstream maintainer acts on "`eliminate_consecutive_idempotent_ops` rewrote
`Reshape(Reshape(X0, [3, 2, 2, 2, 2]), [0, 0, -1])` into `Reshape(X0, [0, 0, -1])`; …, so output
`Y0` became float32[3, 4, 4] instead of float32[3, 2, 8]", not on a table of `noise_ratio` and
`error_scale`. The sentence is built from the standalone record (the reduced model before and
after the culprit passes, and what each output became when the script ran); without one, from
the finding's kind and message. Numbers keep four significant digits.

The sentence is Markdown: every name in it comes from a model, so it goes through the same
escapes as the templates (`md`, and `span` for a code span it cannot close).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import onnx
import onnx.parser
from onnx import numpy_helper

from ditox_ci.registry import Registry
from ditox_ci.report.kinds import INVALID_MODEL, FindingKind
from ditox_ci.report.model import Finding
from ditox_ci.report.standalone import small_values
from ditox_ci.report.text import first_line, md, span

SIGNIFICANT_DIGITS = 4
# an expression longer than this says less than "changed N nodes into M"
EXPRESSION_LIMIT = 160
_INLINE_VALUES = 8

# what each kind of finding means, once: the Kind row, SARIF's rule text
# each kind in one sentence: the finding kinds' own text (report/kinds.py), as SARIF's rules say it
KIND_TEXT = {kind.value: kind.sarif_rule for kind in FindingKind}

# evidence keys in words, in the order a reader wants them; keys not listed follow by name
EVIDENCE_LABELS = {
    "reason": "what differs",
    "max_abs": "largest absolute difference",
    "max_rel": "largest relative difference",
    "mismatch_fraction": "share of elements beyond tolerance",
    "expected_value": "expected value at the worst element",
    "actual_value": "optimized value at the worst element",
    "worst_index": "index of the worst element",
    "error_scale": "typical magnitude of the expected output",
    "rule": "rule that judged it (fp64, noise-floor, tolerance, exact)",
    "fp64_error": "its largest error against the float64 reference",
    "original_fp64_error": "the original's own largest error against float64",
    "error_ratio": "its error over the original's own",
    "fp64_bound": "largest error the float64 rule lets through",
    "ties": "differing elements a float64 tie explains",
    "unexplained": "differing elements no tie explains",
    "fp64": "why there is no float64 reference",
    "noise_floor": "runtime's own run-to-run difference (noise floor)",
    "noise_ratio": "difference over the noise floor",
    "output_index": "output position",
    "sample": "input sample (0: random, then wide and sign-structured)",
    "comparator": "comparator",
    "ops_removed": "op types the optimizer removed",
    "ops_added": "op types the optimizer added",
}
# shown elsewhere, or records of other stages that have their own section
_NOT_EVIDENCE = {
    "message",
    "output",
    "known_by",
    "traceback",
    "standalone",
    "reduction",
    "reproduce",
    "divergence",
    "saturated",
}


def rounded(value: Any) -> str:
    """A number with four significant digits (also inside numpy's repr, `np.float32(1.6451218)`)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{SIGNIFICANT_DIGITS}g}"
    if isinstance(value, str):
        return re.sub(r"np\.\w+\((-?[\d.]+(?:e[-+]?\d+)?)\)", lambda m: rounded(float(m.group(1))), value)
    if isinstance(value, list):
        return "[" + ", ".join(rounded(v) for v in value) + "]"
    return str(value)


def evidence_rows(evidence: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) per scalar or short-list evidence entry, labelled in words, rounded."""
    keys = [k for k in EVIDENCE_LABELS if k in evidence] + sorted(set(evidence) - set(EVIDENCE_LABELS))
    rows = []
    for key in keys:
        value = evidence[key]
        if key in _NOT_EVIDENCE or isinstance(value, dict) or (isinstance(value, list) and len(value) > 16):
            continue
        if key == "mismatch_fraction" and isinstance(value, (int, float)):
            shown = f"{100 * value:.{SIGNIFICANT_DIGITS}g}%"
        else:
            shown = rounded(value) if value != [] else "none"
        rows.append((EVIDENCE_LABELS.get(key, key), shown))
    return rows


# op type → what an argument pattern of it means, for the sentence (the bug usually hides there)
Hint = Callable[[Sequence[Any]], "str | None"]
HINTS: Registry[Hint] = Registry("operator hint")


@HINTS.register("Reshape")
def _reshape_zero(args: Sequence[Any]) -> str | None:
    shape = args[1] if len(args) > 1 else None
    if isinstance(shape, list) and 0 in shape:
        return "a `0` in Reshape's shape copies its input's dim at that position"
    return None


def _constants(graph: onnx.GraphProto, inputs: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, spec in inputs.items():
        small = small_values(spec)
        if small is not None:
            values[name] = small
    tensors = [(t.name, t) for t in graph.initializer]
    tensors += [
        (n.output[0], a.t)
        for n in graph.node
        if n.op_type == "Constant"
        for a in n.attribute
        if a.name == "value" and n.output
    ]
    for name, tensor in tensors:
        array = numpy_helper.to_array(tensor)
        if array.size <= _INLINE_VALUES and array.dtype.kind in "iub":
            # a scalar shows as one: `[2]` for a rank-0 2 hid the very bug of a Squeeze on it
            values[name] = array.tolist() if array.ndim == 0 else array.reshape(-1).tolist()
    return values


def _attributes(node: onnx.NodeProto) -> list[str]:
    shown = []
    for attribute in node.attribute:
        value = onnx.helper.get_attribute_value(attribute)
        if isinstance(value, (int, float)) or (
            isinstance(value, list)
            and len(value) <= _INLINE_VALUES
            and all(isinstance(v, (int, float)) for v in value)
        ):
            shown.append(f"{attribute.name}={rounded(value)}")
    return shown


class _Graph:
    """A graph's values as nested call expressions, constants inline."""

    def __init__(self, graph: onnx.GraphProto, inputs: Mapping[str, Any]) -> None:
        self.graph = graph
        self.constants = _constants(graph, inputs)
        self.producers = {
            name: (node, index) for node in graph.node for index, name in enumerate(node.output)
        }

    def expression(self, name: str, depth: int = 0) -> str:
        if name in self.constants:
            return str(self.constants[name])
        if name not in self.producers or depth > 12:
            return name or "∅"
        node, index = self.producers[name]
        if node.op_type == "Constant":
            return name
        args = [self.expression(value, depth + 1) for value in node.input]
        call = f"{node.op_type}({', '.join([*args, *_attributes(node)])})"
        return f"{call}[{index}]" if len(node.output) > 1 else call

    def hints(self) -> list[str]:
        found = []
        for node in self.graph.node:
            hint = HINTS.get(node.op_type)
            said = hint([self.constants.get(name) for name in node.input]) if hint else None
            if said and said not in found:
                found.append(said)
        return found


def _shape(described: Sequence[Any]) -> str:
    dtype, shape = described
    return f"{dtype}[{', '.join(str(d) for d in shape)}]"


def _effect(outcome: Sequence[Mapping[str, Any]]) -> tuple[str | None, str]:
    """(the output that went wrong, what happened to it), from the standalone run's outcome."""
    for entry in outcome:
        if entry.get("same"):
            continue
        name, expected, actual = str(entry["output"]), entry["expected"], entry["actual"]
        if expected != actual:
            return name, f"output {span(name)} became {_shape(actual)} instead of {_shape(expected)}"
        return name, f"output {span(name)} ({_shape(expected)}) computes different values"
    return None, ""


def how_wrong(finding: Finding) -> str:
    """A values bug's severity in a maintainer's units, Markdown: its tier, then its error against
    float64 next to the original's own (or over the output's magnitude and its noise floor, where
    float64 did not judge it), and the share of elements it affects; a task comparator's verdict.
    "" for a finding without a values verdict."""
    if finding.tier is None:
        return ""
    measured = finding.measured
    said = [finding.tier.replace("-", " ")]
    failed_tasks = [
        f"{md(str(name))}: {md(first_line(str(verdict.get('message', ''))))}"
        for name, verdict in dict(measured.get("comparators") or {}).items()
        if isinstance(verdict, Mapping) and verdict.get("passed") is False and name != "tensor"
    ]
    if "unexplained" in measured:
        differing = int(measured.get("ties", 0)) + int(measured["unexplained"])
        said.append(
            f"{differing} element{'s' if differing != 1 else ''} differ, "
            + (
                "each a tie float32's rounding can flip"
                if not measured["unexplained"]
                else f"{measured['unexplained']} where float64 decides as the original does"
            )
        )
    elif measured.get("rule") == "fp64":
        ratio = measured.get("error_ratio")
        times = "∞" if not isinstance(ratio, (int, float)) or ratio == float("inf") else rounded(float(ratio))
        said.append(
            f"{times}× the original's own error against float64 "
            f"({rounded(measured.get('fp64_error'))} vs {rounded(measured.get('original_fp64_error'))})"
        )
    elif isinstance(measured.get("error_scale"), (int, float)):
        said.append(f"off by {rounded(float(measured['error_scale']))} of the output's magnitude")
        if isinstance(measured.get("noise_ratio"), (int, float)):
            said.append(f"{rounded(float(measured['noise_ratio']))}× its noise floor")
    if isinstance(measured.get("mismatch_fraction"), (int, float)) and "unexplained" not in measured:
        said.append(f"{100 * float(measured['mismatch_fraction']):.{SIGNIFICANT_DIGITS}g}% of elements")
    return ", ".join(said + failed_tasks)


def what_happened(finding: Finding, record: Mapping[str, Any] | None) -> str:
    """The first sentence of a bug report, Markdown."""
    passes = span(", ".join(finding.culprit.passes)) if finding.culprit.passes else "The optimizer"
    sentence = _rewrite(passes, record) if record else None
    rewritten = sentence is not None
    if sentence is None:
        message = finding.message.strip()
        said = (KIND_TEXT.get(finding.kind) or md(finding.kind)).rstrip(".")
        said = f"under {passes}, {said[:1].lower()}{said[1:]}" if finding.culprit.passes else said
        sentence = said[:1].upper() + said[1:] + (f": {md(rounded(message))}" if message else ".")
    # the checker's refusal, where the sentence does not say it: an interface change (or a
    # mismatch) whose result it refuses too (often the change is by design and the refusal the bug),
    # and an invalid model told by its rewrite
    checker = str(finding.measured.get("checker") or "")
    if finding.kind == INVALID_MODEL and rewritten:  # the rewrite alone does not say what is wrong
        checker = checker or finding.message
    elif finding.kind == INVALID_MODEL:
        checker = ""  # the kind's sentence says the checker refuses it, with its message
    if checker:
        ended = sentence if sentence.endswith(".") else f"{sentence}."
        also = "" if finding.kind == INVALID_MODEL else " also"
        return f"{ended} The optimized model{also} fails ONNX's checker: {md(rounded(first_line(checker)))}."
    return sentence


def _rewrite(passes: str, record: Mapping[str, Any]) -> str | None:
    try:
        before = _Graph(onnx.parser.parse_model(record["model"]).graph, record.get("inputs", {}))
        after = (
            _Graph(onnx.parser.parse_model(record["optimized"]).graph, record.get("inputs", {}))
            if record.get("optimized")
            else None
        )
    except Exception:  # a record from an older ditox-ci, or text the parser no longer reads
        return None
    if after is None:
        return None
    output, effect = _effect(record.get("outcome") or [])
    names = [output] if output else [v.name for v in before.graph.output]
    was = became = ""
    for name in names:
        was, became = before.expression(name), after.expression(name)
        if was != became:
            break
    if was == became or max(len(was), len(became)) > EXPRESSION_LIMIT:
        nodes = f"{len(before.graph.node)} nodes into {len(after.graph.node)}"
        rewrite = f"{passes} changed the reduced model's {nodes}"
    else:
        rewrite = f"{passes} rewrote {span(was)} into {span(became)}"
    text = "; ".join([rewrite, *after.hints()])
    return f"{text}, so {effect}." if effect else f"{text}."
