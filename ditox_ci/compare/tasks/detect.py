"""The `detection` comparator: boxes decoded by a registered layout (`yolov8`, `db-map`, `boxes`);
precision, recall and F1 at several IoU thresholds, mean IoU of matches, and mAP with the
original's boxes as ground truth."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ditox_ci.compare import Comparison, Outputs
from ditox_ci.compare.tasks.common import (
    Judge,
    Options,
    Paired,
    paired_comparator,
    select_output,
    threshold_verdict,
)


@dataclass(frozen=True)
class Detections:
    """One image's boxes as (x1, y1, x2, y2) rows, with a score and a class per box."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray


DecodeFunc = Callable[[Outputs, Sequence[str], Mapping[str, Any]], list[Detections]]
DETECTION_LAYOUTS: dict[str, DecodeFunc] = {}


def register_layout(name: str) -> Callable[[DecodeFunc], DecodeFunc]:
    def decorate(func: DecodeFunc) -> DecodeFunc:
        DETECTION_LAYOUTS[name] = func
        return func

    return decorate


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of (x1, y1, x2, y2) boxes: shape (len(a), len(b))."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Greedy non-maximum suppression; indices kept, best first."""
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    while order.size:
        best = int(order[0])
        keep.append(best)
        overlaps = iou_matrix(boxes[best : best + 1], boxes[order[1:]])[0]
        order = order[1:][overlaps <= iou_threshold]
    return np.asarray(keep, dtype=np.int64)


def _empty_detections() -> Detections:
    return Detections(np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=np.int64))


@register_layout("yolov8")
def decode_yolov8(
    outputs: Outputs, names: Sequence[str], options: Mapping[str, Any]
) -> list[Detections]:
    """(batch, 4 + classes, anchors) with (cx, cy, w, h) then per-class scores; NMS per class."""
    raw, _ = select_output(outputs, names, options["output"])
    images = []
    for prediction in np.asarray(raw, dtype=np.float64):
        centers, class_scores = prediction[:4].T, prediction[4:].T
        scores, classes = class_scores.max(axis=1), class_scores.argmax(axis=1)
        kept = scores >= options["score_threshold"]
        cx, cy, w, h = centers[kept].T
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
        images.append(_per_class_nms(boxes, scores[kept], classes[kept], options))
    return images


def _per_class_nms(
    boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, options: Mapping[str, Any]
) -> Detections:
    keep: list[np.ndarray] = []
    for cls in np.unique(classes):
        members = np.flatnonzero(classes == cls)
        keep.append(members[nms(boxes[members], scores[members], options["nms_iou"])])
    if not keep:
        return _empty_detections()
    chosen = np.concatenate(keep)
    chosen = chosen[np.argsort(-scores[chosen], kind="stable")][: int(options["max_detections"])]
    return Detections(boxes[chosen], scores[chosen], classes[chosen].astype(np.int64))


@register_layout("db-map")
def decode_db_map(
    outputs: Outputs, names: Sequence[str], options: Mapping[str, Any]
) -> list[Detections]:
    """A (batch, 1, H, W) text probability map (DBNet, PP-OCR det): one box per connected region
    above `score_threshold`, scored by its mean probability."""
    # imported here, as scipy.stats in classify.py: 0.3 s in every process, for text-detection models only
    from scipy import ndimage

    raw, _ = select_output(outputs, names, options["output"])
    maps = np.asarray(raw, dtype=np.float64)
    images = []
    for probability in maps.reshape(-1, *maps.shape[-2:]):
        labels, _ = ndimage.label(probability > options["score_threshold"])
        boxes, scores = [], []
        for index, region in enumerate(ndimage.find_objects(labels), start=1):
            if region is None:
                continue
            rows, cols = region
            boxes.append([cols.start, rows.start, cols.stop, rows.stop])
            scores.append(float(probability[region][labels[region] == index].mean()))
        if not boxes:
            images.append(_empty_detections())
            continue
        images.append(
            Detections(
                np.asarray(boxes, dtype=np.float64),
                np.asarray(scores),
                np.zeros(len(boxes), dtype=np.int64),
            )
        )
    return images


@register_layout("boxes")
def decode_boxes(
    outputs: Outputs, names: Sequence[str], options: Mapping[str, Any]
) -> list[Detections]:
    """Already-decoded (batch, N, 6) rows of x1, y1, x2, y2, score, class (post-NMS models)."""
    raw, _ = select_output(outputs, names, options["output"])
    rows = np.asarray(raw, dtype=np.float64)
    images = []
    for image in rows.reshape(-1, *rows.shape[-2:]):
        kept = image[image[:, 4] >= options["score_threshold"]]
        images.append(Detections(kept[:, :4], kept[:, 4], kept[:, 5].astype(np.int64)))
    return images


def match(reference: Detections, candidate: Detections, threshold: float) -> list[float]:
    """Greedy same-class matching, candidates by descending score; IoU of each candidate's match
    (0.0 for an unmatched candidate), in the candidates' score order."""
    ious = iou_matrix(candidate.boxes, reference.boxes)
    taken = np.zeros(len(reference.boxes), dtype=bool)
    result: list[float] = []
    for index in np.argsort(-candidate.scores, kind="stable"):
        allowed = (reference.classes == candidate.classes[index]) & ~taken
        overlaps = np.where(allowed, ious[index], -1.0)
        best = int(np.argmax(overlaps)) if overlaps.size else -1
        if best >= 0 and overlaps[best] >= threshold:
            taken[best] = True
            result.append(float(overlaps[best]))
        else:
            result.append(0.0)
    return result


def average_precision(hits: Sequence[bool], scores: Sequence[float], positives: int) -> float:
    """COCO-style 101-point interpolated AP of ranked hits against `positives` true boxes."""
    if positives == 0:
        return 1.0 if not hits else 0.0
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    ranked = np.asarray(hits, dtype=np.float64)[order]
    true_positive = np.cumsum(ranked)
    precision = true_positive / np.arange(1, len(ranked) + 1)
    recall = true_positive / positives
    envelope = np.maximum.accumulate(precision[::-1])[::-1] if len(precision) else precision
    points = []
    for level in np.linspace(0, 1, 101):
        reached = np.flatnonzero(recall >= level)
        points.append(envelope[reached[0]] if reached.size else 0.0)
    return float(np.mean(points))


def detection_metrics(
    reference: Sequence[Detections], candidate: Sequence[Detections], thresholds: Sequence[float]
) -> dict[str, Any]:
    metrics: dict[str, Any] = {
        "images": len(reference),
        "reference_boxes": int(sum(len(d.scores) for d in reference)),
        "candidate_boxes": int(sum(len(d.scores) for d in candidate)),
    }
    aps = []
    for threshold in thresholds:
        true_positive = 0
        per_class: dict[int, tuple[list[bool], list[float], int]] = {}
        for ref, cand in zip(reference, candidate, strict=True):
            ious = match(ref, cand, threshold)
            order = np.argsort(-cand.scores, kind="stable")
            true_positive += sum(iou > 0 for iou in ious)
            for cls in set(ref.classes.tolist()) | set(cand.classes.tolist()):
                hits, scores, positives = per_class.setdefault(cls, ([], [], 0))
                for iou, index in zip(ious, order, strict=True):
                    if cand.classes[index] == cls:
                        hits.append(iou > 0)
                        scores.append(float(cand.scores[index]))
                per_class[cls] = (hits, scores, positives + int(np.sum(ref.classes == cls)))
        total_ref, total_cand = metrics["reference_boxes"], metrics["candidate_boxes"]
        # Both empty is full agreement; only one empty is none.
        precision = true_positive / total_cand if total_cand else float(total_ref == 0)
        recall = true_positive / total_ref if total_ref else float(total_cand == 0)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        ap = (
            float(np.mean([average_precision(*entry) for entry in per_class.values()]))
            if per_class
            else 1.0
        )
        aps.append(ap)
        key = f"{threshold:g}"
        metrics[f"precision@{key}"] = precision
        metrics[f"recall@{key}"] = recall
        metrics[f"f1@{key}"] = f1
        metrics[f"ap@{key}"] = ap
    matched = [
        iou
        for ref, cand in zip(reference, candidate, strict=True)
        for iou in match(ref, cand, min(thresholds, default=0.5))
        if iou > 0
    ]
    metrics["mean_iou"] = (
        float(np.mean(matched)) if matched else float(not metrics["reference_boxes"])
    )
    metrics["map"] = float(np.mean(aps)) if aps else 1.0
    return metrics


@paired_comparator(
    "detection",
    {
        "layout": "yolov8",
        "output": 0,
        "score_threshold": 0.25,
        "nms_iou": 0.45,
        "max_detections": 300,
        "iou_thresholds": (0.5, 0.75, 0.9),
        "pass_iou": 0.9,
        "min_f1": 1.0,
        "min_map": 0.9,
    },
    choices={"layout": DETECTION_LAYOUTS},
)
def detection(opts: Options) -> Judge:
    decode = DETECTION_LAYOUTS[opts["layout"]]
    thresholds = sorted({float(t) for t in opts["iou_thresholds"]} | {float(opts["pass_iou"])})

    def judge(paired: Paired) -> Comparison:
        names = paired.names
        reference = [found for want, _, _, _ in paired.samples for found in decode(want, names, opts)]
        candidate = [found for _, got, _, _ in paired.samples for found in decode(got, names, opts)]
        metrics = detection_metrics(reference, candidate, thresholds)
        metrics["layout"] = opts["layout"]
        pass_key = f"f1@{float(opts['pass_iou']):g}"
        return threshold_verdict(
            "detection",
            paired.label,
            metrics,
            [
                (pass_key, metrics[pass_key], opts["min_f1"], "min"),
                ("map", metrics["map"], opts["min_map"], "min"),
            ],
        )

    return judge
