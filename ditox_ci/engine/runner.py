"""The run stage: ONNX Runtime on CPU with its own graph optimizations off, deterministically.

Original and optimized models run with identical settings so that only the optimizer under test
can make them differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort

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


def load_session(model_bytes: bytes, threads: int = 1) -> ort.InferenceSession:
    try:
        return ort.InferenceSession(
            model_bytes, session_options(threads), providers=["CPUExecutionProvider"]
        )
    except Exception as exc:
        raise RuntimeLoadError(str(exc)) from None


def run(session: ort.InferenceSession, feed: Mapping[str, Any]) -> list[Any]:
    """Run one sample; returns the outputs in the model's declared order."""
    names = {arg.name for arg in session.get_inputs()}
    try:
        outputs = session.run(None, {k: v for k, v in feed.items() if k in names})
    except Exception as exc:
        raise RuntimeRunError(str(exc)) from None
    # sequence outputs stay lists of arrays: their elements may differ in shape
    return [value if isinstance(value, list) else np.asarray(value) for value in outputs]


def run_all(session: ort.InferenceSession, feeds: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    return [run(session, feed) for feed in feeds]
