"""The run stage: ONNX Runtime on CPU with its own graph optimizations off, deterministically, or
ONNX's reference implementation for what ONNX Runtime cannot load or run.

Original and optimized models run with identical settings (and the same runner) so that only the
optimizer under test can make them differ. Tensors whose element type numpy lacks (bfloat16, the
float8 and float4 types, int4/uint4, int2/uint2) are ml_dtypes arrays on this side; ONNX Runtime
takes and gives them as OrtValues of an explicit ONNX element type, in ONNX's packed layout.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

ort.set_default_logger_severity(3)


class RuntimeLoadError(Exception):
    """ONNX Runtime refused to create a session for the model."""


class RuntimeRunError(Exception):
    """ONNX Runtime created a session but failed while running it."""


def session_options(threads: int = 1) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = threads
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    options.add_session_config_entry("session.disable_prepacking", "1")
    return options


RUNNERS = ("onnxruntime", "reference")
RUNNER_CHOICES = ("auto", *RUNNERS)


class ReferenceSession:
    """onnx.reference.ReferenceEvaluator behind the interface `run` expects of a session."""

    def __init__(self, model_bytes: bytes):
        from onnx.reference import ReferenceEvaluator  # slow to import, and only sometimes needed

        model = onnx.ModelProto()
        model.ParseFromString(model_bytes)
        self.evaluator = ReferenceEvaluator(model)
        self.input_names = set(self.evaluator.input_names)

    def run(self, feed: Mapping[str, Any]) -> list[Any]:
        outputs = self.evaluator.run(None, {k: v for k, v in feed.items() if k in self.input_names})
        return [value if isinstance(value, list) or value is None else np.asarray(value) for value in outputs]


def load_session(model_bytes: bytes, threads: int = 1, runner: str = "onnxruntime") -> Any:
    """A session of `runner` ("onnxruntime" or "reference") for the model."""
    try:
        if runner == "reference":
            return ReferenceSession(model_bytes)
        return ort.InferenceSession(
            model_bytes, session_options(threads), providers=["CPUExecutionProvider"]
        )
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}" if runner == "reference" else str(exc)
        raise RuntimeLoadError(message) from None


def load_noise_session(model_bytes: bytes, threads: int = 1) -> ort.InferenceSession:
    """ONNX Runtime with all of its own graph optimizations on: a rewrite of the model that keeps
    its meaning, so how far its outputs move from the plain run is the model's numerical noise."""
    options = session_options(threads)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise RuntimeLoadError(str(exc)) from None


def is_ml_dtype(dtype: np.dtype) -> bool:
    """An element type numpy does not have natively: ml_dtypes' bfloat16, float8, int4…"""
    return dtype.type.__module__.split(".")[0] == "ml_dtypes"


def _ort_value(value: np.ndarray) -> ort.OrtValue:
    """An ml_dtypes array as an OrtValue of its ONNX element type, in ONNX's (packed) byte layout."""
    element_type = helper.np_dtype_to_tensor_dtype(value.dtype)
    packed = numpy_helper.from_array(np.ascontiguousarray(value)).raw_data
    ort_value = ort.OrtValue.ortvalue_from_shape_and_type(list(value.shape), element_type)
    if ort_value.tensor_size_in_bytes() != len(packed):
        raise RuntimeRunError(f"cannot feed {value.dtype} {value.shape}: ONNX Runtime's layout differs")
    ctypes.memmove(ort_value.data_ptr(), packed, len(packed))
    return ort_value


def _from_ort_value(value: ort.OrtValue) -> Any:
    """An output as numpy, reading the element types numpy lacks from their bytes."""
    if not value.is_tensor():
        return value.numpy()
    element_type = value.element_type()
    if not is_ml_dtype(np.dtype(helper.tensor_dtype_to_np_dtype(element_type))):
        return value.numpy()
    tensor = onnx.TensorProto(data_type=element_type, dims=value.shape())
    tensor.raw_data = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
    return numpy_helper.to_array(tensor)


_ML_DTYPE_NAMES = ("bfloat16", "float8", "float4", "int4", "int2")


def _needs_ort_values(session: ort.InferenceSession, feed: Mapping[str, Any]) -> bool:
    if any(isinstance(v, np.ndarray) and is_ml_dtype(v.dtype) for v in feed.values()):
        return True
    # output types are "tensor(bfloat16)", "tensor(float8e4m3fn)", "tensor(int4)"…
    return any(any(name in arg.type for name in _ML_DTYPE_NAMES) for arg in session.get_outputs())


class _RunCount:
    """Every run this process made, whatever asked for it (the original, its re-draws and
    scale-backs, its noise floor, optimized models, comparators that re-run): a job's runs are the
    difference before and after it."""

    runs = 0


def runs_so_far() -> int:
    return _RunCount.runs


def run(session: Any, feed: Mapping[str, Any]) -> list[Any]:
    """Run one sample; returns the outputs in the model's declared order."""
    _RunCount.runs += 1
    if isinstance(session, ReferenceSession):
        try:
            return session.run(feed)
        except Exception as exc:
            raise RuntimeRunError(f"{type(exc).__name__}: {exc}") from None
    names = {arg.name for arg in session.get_inputs()}
    feed = {k: v for k, v in feed.items() if k in names}
    try:
        if _needs_ort_values(session, feed):
            values = {
                k: _ort_value(v) if is_ml_dtype(v.dtype) else ort.OrtValue.ortvalue_from_numpy(np.asarray(v))
                for k, v in feed.items()
            }
            output_names = [arg.name for arg in session.get_outputs()]
            outputs = [_from_ort_value(v) for v in session.run_with_ort_values(output_names, values)]
        else:
            outputs = session.run(None, feed)
    except RuntimeRunError:
        raise
    except Exception as exc:
        raise RuntimeRunError(str(exc)) from None
    # sequence outputs stay lists of arrays (their elements may differ in shape), and an optional
    # output without a value stays None, as the reference runner gives them
    return [value if isinstance(value, list) or value is None else np.asarray(value) for value in outputs]


def run_all(session: Any, feeds: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    return [run(session, feed) for feed in feeds]
