"""Embedding (cosine) and binary (label flip rate) comparators on constructed outputs."""

from __future__ import annotations

import numpy as np
import pytest

from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.tasks import cosine
from ditox_ci.errors import ConfigError


def test_cosine_of_known_vectors_and_zero_rows() -> None:
    a = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    b = np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    assert cosine(a, b) == pytest.approx([2**-0.5, 1.0, 0.0])


def test_identical_embeddings_pass() -> None:
    hidden = np.random.default_rng(1).normal(size=(2, 7, 16)).astype(np.float32)
    result = COMPARATORS["embedding"]({})([[hidden]], [[hidden.copy()]], ["last_hidden_state"])
    assert result.passed and result.metrics["cosine_min"] == pytest.approx(1.0)
    assert result.metrics["rows"] == 2


def test_scaled_embeddings_keep_cosine_but_rotated_ones_fail() -> None:
    hidden = np.random.default_rng(2).normal(size=(3, 5, 8))
    compare = COMPARATORS["embedding"]({"pooling": "cls"})
    assert compare([[hidden]], [[hidden * 3.0]], ["h"]).passed
    rotated = hidden.copy()
    rotated[1, 0] = np.roll(hidden[1, 0], 1)
    result = compare([[hidden]], [[rotated]], ["h"])
    expected = cosine(hidden[1, 0], rotated[1, 0])
    assert not result.passed
    assert result.metrics["cosine_min"] == pytest.approx(float(expected))


def test_unknown_pooling_is_config_error() -> None:
    with pytest.raises(ConfigError, match="pooling"):
        COMPARATORS["embedding"]({"pooling": "max"})


def test_binary_probabilities_flip_across_threshold() -> None:
    want = np.array([[0.1], [0.6], [0.9], [0.49]])
    got = np.array([[0.12], [0.4], [0.91], [0.51]])
    result = COMPARATORS["binary"]({})([[want]], [[got]], ["output"])
    assert not result.passed
    assert result.metrics["flips"] == 2 and result.metrics["flip_rate"] == pytest.approx(0.5)
    assert result.metrics["flipped_rows"] == [1, 3]
    tolerant = COMPARATORS["binary"]({"max_flip_rate": 0.5})([[want]], [[got]], ["output"])
    assert tolerant.passed


def test_binary_two_class_softmax_uses_argmax_per_sample() -> None:
    samples_a = [[np.array([[0.7, 0.3]])], [np.array([[0.2, 0.8]])]]
    samples_b = [[np.array([[0.6, 0.4]])], [np.array([[0.2, 0.8]])]]
    compare = COMPARATORS["binary"]({})
    assert compare(samples_a, samples_b, ["prob"]).passed
    flipped = [[np.array([[0.4, 0.6]])], [np.array([[0.2, 0.8]])]]
    result = compare(samples_a, flipped, ["prob"])
    assert not result.passed and result.metrics["flips"] == 1 and result.metrics["rows"] == 2
    assert result.metrics["max_score_delta"] == pytest.approx(0.3)


def test_binary_one_dimensional_sequence_probabilities_count_each_frame() -> None:
    want = np.array([0.9, 0.1, 0.8, 0.2])
    got = np.array([0.9, 0.6, 0.8, 0.2])
    for mode in ("auto", "probability"):
        result = COMPARATORS["binary"]({"mode": mode})([[want]], [[got]], ["speech_probs"])
        assert result.metrics["rows"] == 4 and result.metrics["flipped_rows"] == [1]
    with pytest.raises(ConfigError, match="mode"):
        COMPARATORS["binary"]({"mode": "softmax"})
