"""Greedy generation through real ONNX Runtime sessions: a tiny decoder whose next token is a
permutation of the last one, and a 'miscompiled' copy where one transition is changed."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.tasks import CompareContext, needs_context
from ditox_ci.engine import runner

VOCAB = 8


def _decoder(successor: list[int]) -> bytes:
    """input_ids (1, S) → logits (1, S, VOCAB) with argmax at successor[token]."""
    embedding = np.eye(VOCAB, dtype=np.float32)
    projection = np.zeros((VOCAB, VOCAB), dtype=np.float32)
    projection[np.arange(VOCAB), successor] = 1.0
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["embedding", "input_ids"], ["hidden"]),
            helper.make_node("MatMul", ["hidden", "projection"], ["logits"]),
        ],
        "decoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "sequence"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "sequence", VOCAB])],
        [
            numpy_helper.from_array(embedding, "embedding"),
            numpy_helper.from_array(projection, "projection"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _context(original: list[int], optimized: list[int], feeds) -> CompareContext:
    first = runner.load_session(_decoder(original))
    second = runner.load_session(_decoder(optimized))
    return CompareContext(
        run_original=lambda feed: runner.run(first, feed),
        run_optimized=lambda feed: runner.run(second, feed),
        feeds=feeds,
    )


def test_generation_through_onnxruntime_detects_one_changed_transition() -> None:
    successor = [1, 2, 3, 4, 5, 6, 7, 0]
    broken = [1, 2, 3, 4, 5, 6, 2, 0]  # after token 6 the 'optimized' model says 2, not 7
    feeds = [{"input_ids": np.array([[0, 1]], np.int64)}, {"input_ids": np.array([[7]], np.int64)}]
    compare = COMPARATORS["text-generation"]({"max_new_tokens": 6})
    assert needs_context(compare)
    same = compare([], [], ["logits"], context=_context(successor, successor, feeds))
    assert same.passed and same.metrics["bleu_min"] == 1.0
    result = compare([], [], ["logits"], context=_context(successor, broken, feeds))
    assert not result.passed
    assert result.metrics["changed_sequences"] == [0]
    assert result.metrics["example"] == {
        "expected": [2, 3, 4, 5, 6, 7],
        "actual": [2, 3, 4, 5, 6, 2],
    }
    assert 0.0 < result.metrics["bleu_min"] < 1.0
