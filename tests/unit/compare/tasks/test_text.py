"""Text comparators: BLEU, CTC greedy decoding and the greedy generation loop with known tokens."""

from __future__ import annotations

import numpy as np
import pytest

from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.tasks import CompareContext, bleu, ctc_greedy, greedy_generate, needs_context


def _one_hot(path: list[int], classes: int = 6) -> np.ndarray:
    logits = np.zeros((1, len(path), classes), dtype=np.float32)
    logits[0, np.arange(len(path)), path] = 1.0
    return logits


def test_bleu_known_values() -> None:
    assert bleu([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == 1.0
    assert bleu([1, 2, 3], []) == 0.0
    changed = bleu([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 9, 6, 7, 8])
    assert 0.0 < changed < 1.0
    # unigram 7/8, bigram (5+1)/(7+1), trigram (3+1)/(6+1), 4-gram (1+1)/(5+1)
    expected = np.exp(np.mean(np.log([7 / 8, 6 / 8, 4 / 7, 2 / 6])))
    assert changed == pytest.approx(expected)
    # a shorter candidate pays the brevity penalty
    assert bleu([1, 2, 3, 4], [1, 2, 3]) < 1.0


def test_ctc_greedy_collapses_repeats_and_drops_blanks() -> None:
    assert ctc_greedy(_one_hot([0, 3, 3, 0, 3, 5, 5, 0]), blank=0) == [[3, 3, 5]]


def test_ctc_text_identical_passes_changed_token_fails() -> None:
    compare = COMPARATORS["ctc-text"]({})
    want = _one_hot([0, 1, 1, 2, 0, 3, 4])
    assert compare([[want]], [[want.copy()]], ["softmax"]).passed
    got = _one_hot([0, 1, 1, 2, 0, 5, 4])
    result = compare([[want]], [[got]], ["softmax"])
    assert not result.passed
    assert result.metrics["exact_match_rate"] == 0.0
    assert result.metrics["example"] == {"expected": [1, 2, 3, 4], "actual": [1, 2, 5, 4]}
    assert 0.0 < result.metrics["bleu_min"] < 1.0


class _Bigram:
    """A deterministic 'language model': the next token is table[last token]."""

    def __init__(self, table: list[int], vocab: int = 8) -> None:
        self.table, self.vocab, self.calls = table, vocab, 0

    def __call__(self, feed):
        self.calls += 1
        ids = feed["input_ids"]
        assert feed["attention_mask"].shape == ids.shape
        logits = np.zeros((*ids.shape, self.vocab), dtype=np.float32)
        for position, token in enumerate(ids[0]):
            logits[0, position, self.table[token]] = 1.0
        return [logits]


def test_greedy_generate_follows_argmax_and_stops_at_eos() -> None:
    model = _Bigram([1, 2, 3, 4, 5, 6, 7, 0])
    feed = {"input_ids": np.array([[3]]), "attention_mask": np.ones((1, 1), np.int64)}
    assert greedy_generate(model, feed, "input_ids", 0, steps=10, eos=6) == [4, 5, 6]
    assert model.calls == 3


def test_text_generation_needs_context_and_flags_changed_tokens() -> None:
    compare = COMPARATORS["text-generation"]({"max_new_tokens": 3})
    assert needs_context(compare)
    assert not needs_context(COMPARATORS["ctc-text"]({}))
    feeds = [
        {"input_ids": np.array([[1, 2]]), "attention_mask": np.ones((1, 2), np.int64)},
        {"input_ids": np.array([[5]]), "attention_mask": np.ones((1, 1), np.int64)},
    ]
    original = _Bigram([1, 2, 3, 4, 5, 6, 7, 0])
    same = compare([[]], [[]], ["logits"], context=CompareContext(original, original, feeds))
    assert same.passed and same.metrics["sequences"] == 2
    changed = _Bigram([1, 2, 3, 4, 5, 6, 1, 0])  # token 6 now leads to 1 instead of 7
    result = compare([[]], [[]], ["logits"], context=CompareContext(original, changed, feeds))
    assert not result.passed
    assert result.metrics["changed_sequences"] == [1]
    assert result.metrics["example"] == {"expected": [6, 7, 0], "actual": [6, 1, 2]}
    assert result.metrics["exact_match_rate"] == 0.5


def test_text_generation_without_context_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="CompareContext"):
        COMPARATORS["text-generation"]({})([[]], [[]], ["logits"])
