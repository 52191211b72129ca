"""A small graph builder that generators use to draw random models with recorded input ranges.

Every random choice goes through the builder's seeded `numpy.random.Generator`, and node and value
names come from a counter, so one seed always gives the same model bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

# the opset a node of another domain gets when a generator names none (`GraphBuilder.domains`):
# ONNX Runtime's contrib ops and the ai.onnx.ml version whose LabelEncoder ORT fuses
DOMAIN_VERSIONS = {"com.microsoft": 1, "ai.onnx.ml": 4}

# Unary ops used as surrounding context: defined everywhere, finite on finite input, and none of
# them is a pattern any pass rewrites on its own (Relu/Ceil/Floor/Log/Exp/Sqrt/Identity are).
_CONTEXT_OPS = ("Tanh", "Sigmoid", "Neg", "Abs", "Sin")


@dataclass(frozen=True)
class InputSpec:
    """How to draw one graph input: shape, dtype and the closed range its values come from."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    low: float
    high: float


class GraphBuilder:
    """Accumulates nodes, initializers, inputs and outputs of one generated model."""

    def __init__(self, rng: np.random.Generator, opset: int):
        self.rng = rng
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[InputSpec] = []
        self.input_shapes: dict[str, list[int | str]] = {}
        self.outputs: list[str] = []
        self.annotations: list[onnx.ValueInfoProto] = []
        self.name_nodes = True
        # opsets of the domains other than ONNX's that the nodes use
        self.domains: dict[str, int] = {}
        self.functions: list[onnx.FunctionProto] = []
        # False: the model declares no intermediate shapes (a pass that infers them has work)
        self.keep_value_info = True
        # edits of the finished model that a graph cannot say (an unused opset import …)
        self.finish: list[Callable[[onnx.ModelProto], None]] = []
        self._counter = 0

    def fresh(self, stem: str) -> str:
        self._counter += 1
        return f"{stem}{self._counter}"

    # --- random draws -------------------------------------------------------------------------
    def dims(self, rank: int, low: int = 1, high: int = 5) -> list[int]:
        return [int(d) for d in self.rng.integers(low, high + 1, size=rank)]

    def choice(self, options: Sequence[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def float_dtype(self, allow_double: bool = True) -> type:
        return np.float64 if allow_double and self.chance(0.25) else np.float32

    def values(self, shape: Sequence[int], dtype: Any = np.float32, low: float = -1.0,
               high: float = 1.0) -> np.ndarray:
        if np.dtype(dtype) == np.bool_:
            return self.rng.random(tuple(shape)) < 0.5
        if np.issubdtype(np.dtype(dtype), np.integer):
            return self.rng.integers(int(low), int(high) + 1, size=tuple(shape)).astype(dtype)
        return self.rng.uniform(low, high, size=tuple(shape)).astype(dtype)

    # --- graph pieces -------------------------------------------------------------------------
    def input(self, shape: Sequence[int], dtype: Any = np.float32, low: float = -1.0,
              high: float = 1.0, symbolic: dict[int, str] | None = None,
              name: str | None = None) -> str:
        """A graph input; `symbolic` marks axes whose declared size is a name (a dynamic dim)."""
        name = name or self.fresh("x")
        self.inputs.append(InputSpec(name, tuple(shape), np.dtype(dtype).name, low, high))
        declared: list[int | str] = list(shape)
        for axis, label in (symbolic or {}).items():
            declared[axis] = label
        self.input_shapes[name] = declared
        return name

    def const(self, array: np.ndarray | Sequence[Any], stem: str = "w") -> str:
        name = self.fresh(stem)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def constant_node(self, array: np.ndarray) -> str:
        return self.op("Constant", [], value=numpy_helper.from_array(np.asarray(array)))

    def op(self, op_type: str, inputs: Sequence[str], outputs: int = 1, out: str | None = None,
           **attrs: Any) -> Any:
        """Append a node; returns its output name, or the list of names when `outputs` > 1.

        `out` names the (single) output instead of a counter name.
        """
        names = [out] if out else [self.fresh("v") for _ in range(outputs)]
        domain = attrs.get("domain")
        if domain and domain not in self.domains:
            self.domains[domain] = DOMAIN_VERSIONS.get(domain, 1)
        node_name = self.fresh(op_type.lower()) if self.name_nodes else ""
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=node_name, **attrs))
        return names[0] if outputs == 1 else names

    def around(self, value: str, most: int = 2) -> str:
        """Random unary context (0..`most` ops) so patterns never sit right at a graph boundary."""
        for _ in range(int(self.rng.integers(0, most + 1))):
            value = self.op(self.choice(_CONTEXT_OPS), [value])
        return value

    def wrap(self, value: str) -> str:
        """At least one context op: passes cannot rewrite a value that is a graph input/output."""
        return self.around(self.op(self.choice(_CONTEXT_OPS), [value]), most=1)

    def output(self, value: str) -> None:
        self.outputs.append(value)

    def annotate(self, value: str, dtype: Any, shape: Sequence[int]) -> None:
        """Declare a shape that ONNX shape inference cannot derive (e.g. through a Cast of shape
        data), so downstream values and outputs get one."""
        self.annotations.append(helper.make_tensor_value_info(value, tensor_type(dtype), shape))

    # --- results ------------------------------------------------------------------------------
    def model(self, graph_name: str = "fuzz") -> onnx.ModelProto:
        inputs = [
            helper.make_tensor_value_info(
                spec.name, helper.np_dtype_to_tensor_dtype(np.dtype(spec.dtype)),
                self.input_shapes[spec.name],
            )
            for spec in self.inputs
        ]
        untyped = [onnx.ValueInfoProto(name=name) for name in self.outputs]
        graph = helper.make_graph(self.nodes, graph_name, inputs, untyped, self.initializers,
                                  value_info=self.annotations)
        opsets = [helper.make_opsetid("", self.opset)]
        opsets += [helper.make_opsetid(domain, version) for domain, version in self.domains.items()]
        model = helper.make_model(graph, opset_imports=opsets, functions=self.functions)
        # Exporters record intermediate shapes and several passes only fire when they are known
        # (onnxoptimizer does not infer them), so the model keeps the inferred value_info.
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        # a graph input may be an output as it is (a pass that must add an Identity for it)
        outputs = {info.name: info for info in inferred.graph.input}
        outputs.update({info.name: info for info in inferred.graph.value_info})
        del inferred.graph.output[:]
        inferred.graph.output.extend(outputs[name] for name in self.outputs)
        # A type without a shape fails the full checker; such a value just stays unannotated.
        keep = [info for info in inferred.graph.value_info
                if self.keep_value_info and info.name not in self.outputs
                and info.type.tensor_type.HasField("shape")]
        del inferred.graph.value_info[:]
        inferred.graph.value_info.extend(keep)
        for edit in self.finish:
            edit(inferred)
        return inferred

    def feeds(self, count: int) -> list[dict[str, np.ndarray]]:
        return [
            {spec.name: self.values(spec.shape, spec.dtype, spec.low, spec.high)
             for spec in self.inputs}
            for _ in range(count)
        ]

    def value_ranges(self) -> dict[str, dict[str, Any]]:
        return {
            spec.name: {"dtype": spec.dtype, "shape": list(spec.shape), "low": spec.low,
                        "high": spec.high}
            for spec in self.inputs
        }


def tensor_type(dtype: Any) -> int:
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))

