"""Classification comparator on constructed score tables whose agreement is known."""

from __future__ import annotations

import numpy as np
import pytest

from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.tasks import classification
from ditox_ci.errors import ConfigError

NAMES = ["probs"]


def _scores(rows: int = 4, classes: int = 10, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).permutation(rows * classes).reshape(rows, classes) / 40.0


def _run(want: np.ndarray, got: np.ndarray, **options):
    compare = COMPARATORS["classification"](options)
    return compare([[want]], [[got]], NAMES)


def test_registered_under_its_name() -> None:
    assert COMPARATORS["classification"] is classification


def test_identical_scores_agree_fully() -> None:
    scores = _scores()
    result = _run(scores, scores.copy())
    assert result.passed
    assert result.metrics["top1_agreement"] == 1.0
    assert result.metrics["topk_agreement"] == 1.0
    assert result.metrics["kendall_tau_min"] == 1.0
    assert result.output == "probs"


def test_swapped_top1_fails_and_names_the_row() -> None:
    want = _scores()
    got = want.copy()
    best, second = np.argsort(-want[2])[:2]
    got[2, [best, second]] = got[2, [second, best]]
    result = _run(want, got)
    assert not result.passed
    assert result.metrics["top1_agreement"] == pytest.approx(0.75)
    assert result.metrics["disagreeing_rows"] == [2]
    assert "top1_agreement=0.75" in result.message


def test_reversed_top_k_order_gives_negative_tau_but_same_sets() -> None:
    want = _scores(rows=1)
    got = want.copy()
    top = np.argsort(-want[0])[:5]
    got[0, top] = want[0, top[::-1]]
    result = _run(want, got, min_top1_agreement=0.0)
    assert result.metrics["topk_agreement"] == 1.0
    assert result.metrics["kendall_tau_min"] == pytest.approx(-1.0)
    assert not result.passed
    assert "kendall_tau_min" in result.message


def test_class_leaving_the_top_k_fails_topk_agreement() -> None:
    want = _scores(rows=1)
    got = want.copy()
    fifth, sixth = np.argsort(-want[0])[4:6]
    got[0, fifth] = want[0, sixth] - 1.0
    result = _run(want, got, min_kendall_tau=-1.0)
    assert result.metrics["top1_agreement"] == 1.0
    assert result.metrics["topk_agreement"] == 0.0
    assert not result.passed


def test_near_tie_at_the_kth_place_is_forgiven() -> None:
    want = np.array([[0.9, 0.8, 0.7, 0.6, 0.5, 0.5 - 1e-7, 0.1]])
    got = want.copy()
    got[0, 4], got[0, 5] = want[0, 5], want[0, 4]
    result = _run(want, got, min_kendall_tau=0.0)
    assert result.metrics["topk_agreement"] == 1.0


def test_nan_in_optimized_scores_fails_instead_of_passing_silently() -> None:
    want = _scores()
    got = want.copy()
    got[1, 3] = np.nan
    result = _run(want, got)
    assert not result.passed
    assert result.metrics["new_nonfinite"] == 1


def test_output_picked_by_name_and_rows_pooled_across_samples() -> None:
    compare = COMPARATORS["classification"]({"output": "b"})
    scores = _scores(rows=2)
    other = np.zeros((1, 3))
    result = compare(
        [[other, scores], [other, scores]], [[other, scores], [other, scores]], ["a", "b"]
    )
    assert result.passed and result.metrics["rows"] == 4 and result.output == "b"


def test_unknown_option_and_unknown_output_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="min_top1"):
        COMPARATORS["classification"]({"min_top1": 1.0})
    compare = COMPARATORS["classification"]({"output": "missing"})
    with pytest.raises(ConfigError, match="missing"):
        compare([[np.zeros((1, 3))]], [[np.zeros((1, 3))]], ["probs"])
