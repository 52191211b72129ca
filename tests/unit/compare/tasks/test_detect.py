"""Detection comparator: layouts, IoU matching, precision/recall/F1 and mAP on known boxes."""

from __future__ import annotations

import numpy as np
import pytest

from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.tasks import (
    Detections,
    average_precision,
    decode_yolov8,
    detection_metrics,
    iou_matrix,
)

BOXES = np.array(
    [[10.0, 10.0, 50.0, 50.0], [100.0, 100.0, 140.0, 180.0], [200.0, 20.0, 260.0, 60.0]]
)


def _yolo(
    boxes: np.ndarray, classes: list[int], scores: list[float], anchors: int = 12
) -> np.ndarray:
    """A (1, 4 + 3, anchors) YOLOv8 head with the given boxes in the first anchors."""
    head = np.zeros((1, 7, anchors), dtype=np.float32)
    for i, (box, cls, score) in enumerate(zip(boxes, classes, scores, strict=True)):
        x1, y1, x2, y2 = box
        head[0, :4, i] = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]
        head[0, 4 + cls, i] = score
    return head


def _compare(want: np.ndarray, got: np.ndarray, **options):
    return COMPARATORS["detection"](options)([[want]], [[got]], ["output0"])


def test_iou_of_known_boxes() -> None:
    a = np.array([[0.0, 0.0, 10.0, 10.0]])
    b = np.array([[5.0, 0.0, 15.0, 10.0], [20.0, 20.0, 30.0, 30.0]])
    assert iou_matrix(a, b) == pytest.approx(np.array([[50 / 150, 0.0]]))


def test_yolov8_decoding_recovers_boxes_and_suppresses_duplicates() -> None:
    boxes = np.vstack([BOXES, BOXES[:1] + 1.0])
    head = _yolo(boxes, [0, 1, 2, 0], [0.9, 0.8, 0.7, 0.6])
    options = {"output": 0, "score_threshold": 0.25, "nms_iou": 0.45, "max_detections": 300}
    (image,) = decode_yolov8([head], ["output0"], options)
    assert len(image.boxes) == 3
    assert image.boxes[0] == pytest.approx(BOXES[0])
    assert sorted(image.classes.tolist()) == [0, 1, 2]


def test_identical_detections_pass_with_perfect_scores() -> None:
    head = _yolo(BOXES, [0, 1, 2], [0.9, 0.8, 0.7])
    result = _compare(head, head.copy())
    assert result.passed
    assert result.metrics["f1@0.9"] == 1.0
    assert result.metrics["map"] == 1.0
    assert result.metrics["mean_iou"] == pytest.approx(1.0)


def test_shifted_box_drops_f1_at_strict_iou_only() -> None:
    want = _yolo(BOXES, [0, 1, 2], [0.9, 0.8, 0.7])
    shifted = BOXES.copy()
    shifted[1] += [8.0, 0.0, 8.0, 0.0]  # IoU (32*80)/(48*80) = 2/3
    got = _yolo(shifted, [0, 1, 2], [0.9, 0.8, 0.7])
    result = _compare(want, got)
    assert not result.passed
    assert result.metrics["f1@0.5"] == 1.0
    assert result.metrics["f1@0.75"] == pytest.approx(2 / 3)
    assert result.metrics["precision@0.9"] == pytest.approx(2 / 3)
    assert result.metrics["recall@0.9"] == pytest.approx(2 / 3)
    assert "f1@0.9" in result.message


def test_missing_and_relabelled_boxes_lower_recall_and_precision() -> None:
    want = _yolo(BOXES, [0, 1, 2], [0.9, 0.8, 0.7])
    got = _yolo(BOXES[:2], [0, 2], [0.9, 0.8])
    result = _compare(want, got)
    assert result.metrics["recall@0.5"] == pytest.approx(1 / 3)
    assert result.metrics["precision@0.5"] == pytest.approx(1 / 2)
    assert not result.passed


def test_no_boxes_on_either_side_is_agreement_but_one_side_empty_is_not() -> None:
    empty = _yolo(BOXES[:0], [], [])
    assert _compare(empty, empty.copy()).passed
    some = _yolo(BOXES, [0, 1, 2], [0.9, 0.8, 0.7])
    result = _compare(some, empty)
    assert not result.passed
    assert result.metrics["recall@0.5"] == 0.0 and result.metrics["map"] == 0.0


def test_average_precision_of_ranked_hits() -> None:
    assert average_precision([True, True], [0.9, 0.8], 2) == pytest.approx(1.0)
    # one hit ranked below a false positive: precision 0.5 at full recall
    assert average_precision([False, True], [0.9, 0.8], 1) == pytest.approx(0.5)
    assert average_precision([], [], 0) == 1.0


def test_db_map_layout_boxes_each_text_region() -> None:
    prob = np.zeros((1, 1, 32, 64), dtype=np.float32)
    prob[0, 0, 4:10, 5:30] = 0.9
    prob[0, 0, 20:28, 40:60] = 0.8
    moved = np.zeros_like(prob)
    moved[0, 0, 4:10, 5:30] = 0.9
    moved[0, 0, 20:28, 30:50] = 0.8
    same = _compare(prob, prob.copy(), layout="db-map", score_threshold=0.3)
    assert same.passed and same.metrics["reference_boxes"] == 2
    result = _compare(prob, moved, layout="db-map", score_threshold=0.3)
    assert not result.passed
    assert result.metrics["recall@0.5"] == pytest.approx(0.5)


def test_boxes_layout_and_metrics_function_directly() -> None:
    rows = np.array([[[0, 0, 10, 10, 0.9, 1], [20, 20, 30, 30, 0.1, 1]]], dtype=np.float32)
    result = _compare(rows, rows.copy(), layout="boxes")
    assert result.passed and result.metrics["reference_boxes"] == 1
    ref = [Detections(BOXES, np.ones(3), np.zeros(3, dtype=np.int64))]
    metrics = detection_metrics(ref, ref, [0.5])
    assert metrics["f1@0.5"] == 1.0 and metrics["ap@0.5"] == pytest.approx(1.0)


def test_changed_output_shape_fails() -> None:
    want = _yolo(BOXES, [0, 1, 2], [0.9, 0.8, 0.7], anchors=12)
    got = _yolo(BOXES, [0, 1, 2], [0.9, 0.8, 0.7], anchors=10)
    result = _compare(want, got)
    assert not result.passed and result.metrics["actual_shape"] == [1, 7, 10]
