"""Task-aware comparators: what a user of a trained model would notice, not max-abs differences.

Each factory reads its thresholds from an options mapping (unknown keys are a ConfigError) and
returns a compare function over all samples, with the original model's outputs as the reference:

- `classification`: top-1 agreement, top-K set agreement (near-ties at the K-th score forgiven),
  Kendall's tau over the union of both top-K score lists.
- `detection`: boxes decoded by a registered layout (`yolov8`, `db-map`, `boxes`); precision,
  recall and F1 at several IoU thresholds, mean IoU of matches, and mAP with the original's boxes
  as ground truth.
- `embedding`: cosine similarity per row after pooling.
- `binary`: label flip rate of a probability or two-class output.
- `ctc-text`: greedy CTC decoding per row; exact-match rate and BLEU.
- `text-generation`: a greedy decoding loop that re-runs both models through a CompareContext,
  then exact-match rate and BLEU of the generated token sequences.

Non-finite numbers in the optimized outputs where the original had finite ones always fail: a
metric computed over NaN would otherwise come out as NaN and compare False against every threshold,
silently passing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import ndimage, stats

from ditox_ci.compare import CompareFunc, Comparison, Outputs, register
from ditox_ci.errors import ConfigError

Feed = Mapping[str, np.ndarray]
RunFunc = Callable[[Feed], list[np.ndarray]]


@dataclass(frozen=True)
class CompareContext:
    """What a comparator that must re-run the models gets besides their outputs.

    `run_original` / `run_optimized` run one feed through each model (the engine wraps its two
    ONNX Runtime sessions); `feeds` are the samples whose outputs the comparator received.
    """

    run_original: RunFunc
    run_optimized: RunFunc
    feeds: Sequence[Feed]


def needs_context(compare: CompareFunc) -> bool:
    """Whether the engine must call `compare(..., context=CompareContext(...))`."""
    return bool(getattr(compare, "needs_context", False))


def _options(name: str, given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        known = ", ".join(sorted(defaults))
        raise ConfigError(
            f"comparator '{name}': unknown option(s) {', '.join(unknown)} (known: {known})"
        )
    return {**defaults, **given}


def _position(names: Sequence[str], which: int | str) -> tuple[int, str]:
    """The position of the output named or numbered by `which`, and its display name."""
    if isinstance(which, str) and not which.lstrip("-").isdigit():
        if which not in names:
            raise ConfigError(
                f"comparator output '{which}' is not an output of the model "
                f"(outputs: {', '.join(names)}); fix the comparator's 'output' option"
            )
        position = list(names).index(which)
    else:
        position = int(which)
    label = names[position] if -len(names) <= position < len(names) else f"#{position}"
    return position, label


def _select(outputs: Outputs, names: Sequence[str], which: int | str) -> tuple[np.ndarray, str]:
    position, label = _position(names, which)
    return np.asarray(outputs[position]), label


def _rows(array: np.ndarray) -> np.ndarray:
    """Scores as (rows, classes) float64; a 0-d or 1-d array is one row."""
    values = np.asarray(array, dtype=np.float64)
    if values.ndim == 0:
        return values.reshape(1, 1)
    return values.reshape(-1, values.shape[-1])


def _stack(
    expected: Sequence[Outputs],
    actual: Sequence[Outputs],
    names: Sequence[str],
    which: int | str,
    rows: Callable[[np.ndarray], np.ndarray] = _rows,
) -> tuple[np.ndarray, np.ndarray, str]:
    """One output of every sample, as rows pooled across samples (original, optimized)."""
    want_rows, got_rows, label = [], [], ""
    for want, got in zip(expected, actual, strict=True):
        a, label = _select(want, names, which)
        b, _ = _select(got, names, which)
        if a.shape != b.shape:
            return a, b, label
        want_rows.append(rows(a))
        got_rows.append(rows(b))
    if not want_rows:
        return np.zeros((0, 1)), np.zeros((0, 1)), label
    return np.concatenate(want_rows), np.concatenate(got_rows), label


def _shape_failure(name: str, label: str, a: np.ndarray, b: np.ndarray) -> Comparison | None:
    if a.shape == b.shape:
        return None
    return Comparison(
        passed=False,
        comparator=name,
        message=f"output '{label}' changed shape from {list(a.shape)} to {list(b.shape)}",
        output=label,
        metrics={"expected_shape": list(a.shape), "actual_shape": list(b.shape)},
    )


def _nonfinite_failure(name: str, label: str, a: np.ndarray, b: np.ndarray) -> Comparison | None:
    new_nonfinite = int(np.count_nonzero(~np.isfinite(b) & np.isfinite(a)))
    if not new_nonfinite:
        return None
    return Comparison(
        passed=False,
        comparator=name,
        message=f"output '{label}' has {new_nonfinite} NaN/Inf values where the original is finite",
        output=label,
        metrics={"new_nonfinite": new_nonfinite},
    )


def _verdict(
    name: str, label: str, metrics: dict[str, Any], checks: Sequence[tuple[str, float, float, str]]
) -> Comparison:
    """`checks` are (metric, value, threshold, "min"|"max"); every failing one is named."""
    failures = []
    for metric, value, threshold, direction in checks:
        bad = value < threshold if direction == "min" else value > threshold
        if bad:
            relation = "<" if direction == "min" else ">"
            failures.append(f"{metric}={value:.4g} {relation} {threshold:g}")
    message = f"output '{label}': " + ", ".join(failures) if failures else ""
    return Comparison(
        passed=not failures, comparator=name, message=message, output=label, metrics=metrics
    )


# --- classification ---------------------------------------------------------------------------


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; ties broken by index for determinism."""
    order = np.lexsort((np.arange(scores.size), -scores))
    return order[:k]


def _kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    if np.array_equal(a, b):
        return 1.0
    tau = stats.kendalltau(a, b).statistic
    # Constant score lists give NaN; one constant and one not means the ranking is gone.
    return 0.0 if math.isnan(tau) else float(tau)


@register("classification")
def classification(options: Mapping[str, Any]) -> CompareFunc:
    opts = _options(
        "classification",
        options,
        {
            "output": 0,
            "top_k": 5,
            "tie_atol": 1e-5,
            "min_top1_agreement": 1.0,
            "min_topk_agreement": 1.0,
            "min_kendall_tau": 0.8,
        },
    )
    k = int(opts["top_k"])

    def compare(
        expected: Sequence[Outputs], actual: Sequence[Outputs], names: Sequence[str]
    ) -> Comparison:
        want, got, label = _stack(expected, actual, names, opts["output"])
        failure = _shape_failure("classification", label, want, got) or _nonfinite_failure(
            "classification", label, want, got
        )
        if failure:
            return failure
        top1 = topk = 0
        taus: list[float] = []
        disagreements: list[int] = []
        for row, (a, b) in enumerate(zip(want, got, strict=True)):
            kk = min(k, a.size)
            top_a, top_b = _top_k(a, kk), _top_k(b, kk)
            top1 += int(top_a[0] == top_b[0])
            # A class that swapped in or out at the K-th place counts only if it was clearly
            # inside or outside in the original, so float noise around a tie is not a finding.
            boundary = a[top_a[-1]]
            swapped = set(top_a.tolist()) ^ set(top_b.tolist())
            same_set = all(abs(a[c] - boundary) <= opts["tie_atol"] for c in swapped)
            topk += int(same_set)
            if top_a[0] != top_b[0] or not same_set:
                disagreements.append(row)
            union = np.union1d(top_a, top_b)
            taus.append(_kendall_tau(a[union], b[union]))
        rows = len(want)
        metrics: dict[str, Any] = {
            "rows": rows,
            "top_k": k,
            "top1_agreement": top1 / rows if rows else 1.0,
            "topk_agreement": topk / rows if rows else 1.0,
            "kendall_tau_min": min(taus) if taus else 1.0,
            "kendall_tau_mean": float(np.mean(taus)) if taus else 1.0,
            "disagreeing_rows": disagreements[:20],
        }
        return _verdict(
            "classification",
            label,
            metrics,
            [
                ("top1_agreement", metrics["top1_agreement"], opts["min_top1_agreement"], "min"),
                ("topk_agreement", metrics["topk_agreement"], opts["min_topk_agreement"], "min"),
                ("kendall_tau_min", metrics["kendall_tau_min"], opts["min_kendall_tau"], "min"),
            ],
        )

    return compare


# --- detection --------------------------------------------------------------------------------


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
    raw, _ = _select(outputs, names, options["output"])
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
    raw, _ = _select(outputs, names, options["output"])
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
    raw, _ = _select(outputs, names, options["output"])
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


@register("detection")
def detection(options: Mapping[str, Any]) -> CompareFunc:
    opts = _options(
        "detection",
        options,
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
    )
    if opts["layout"] not in DETECTION_LAYOUTS:
        known = ", ".join(sorted(DETECTION_LAYOUTS))
        raise ConfigError(f"detection layout '{opts['layout']}' is unknown; use one of {known}")
    decode = DETECTION_LAYOUTS[opts["layout"]]
    thresholds = sorted({float(t) for t in opts["iou_thresholds"]} | {float(opts["pass_iou"])})

    def compare(
        expected: Sequence[Outputs], actual: Sequence[Outputs], names: Sequence[str]
    ) -> Comparison:
        reference: list[Detections] = []
        candidate: list[Detections] = []
        label = ""
        for want, got in zip(expected, actual, strict=True):
            a, label = _select(want, names, opts["output"])
            b, _ = _select(got, names, opts["output"])
            failure = _shape_failure("detection", label, a, b) or _nonfinite_failure(
                "detection", label, a.astype(np.float64), b.astype(np.float64)
            )
            if failure:
                return failure
            reference.extend(decode(want, names, opts))
            candidate.extend(decode(got, names, opts))
        metrics = detection_metrics(reference, candidate, thresholds)
        metrics["layout"] = opts["layout"]
        pass_key = f"f1@{float(opts['pass_iou']):g}"
        return _verdict(
            "detection",
            label,
            metrics,
            [
                (pass_key, metrics[pass_key], opts["min_f1"], "min"),
                ("map", metrics["map"], opts["min_map"], "min"),
            ],
        )

    return compare


# --- embedding --------------------------------------------------------------------------------

POOLINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    # (batch, tokens, dim) → (batch, dim); any other rank is taken row-wise over the last axis.
    "mean": lambda x: x.mean(axis=-2) if x.ndim >= 3 else x.reshape(-1, x.shape[-1]),
    "cls": lambda x: x[..., 0, :] if x.ndim >= 3 else x.reshape(-1, x.shape[-1]),
    "none": lambda x: x.reshape(-1, x.shape[-1]),
}


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity; two zero rows are identical (1.0), one zero row is not (0.0)."""
    norm_a, norm_b = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    both_zero = (norm_a == 0) & (norm_b == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.sum(a * b, axis=-1) / (norm_a * norm_b)
    return np.where(both_zero, 1.0, np.nan_to_num(values, nan=0.0))


@register("embedding")
def embedding(options: Mapping[str, Any]) -> CompareFunc:
    opts = _options("embedding", options, {"output": 0, "pooling": "mean", "min_cosine": 0.999})
    if opts["pooling"] not in POOLINGS:
        known = ", ".join(sorted(POOLINGS))
        raise ConfigError(f"embedding pooling '{opts['pooling']}' is unknown; use one of {known}")
    pool = POOLINGS[opts["pooling"]]

    def compare(
        expected: Sequence[Outputs], actual: Sequence[Outputs], names: Sequence[str]
    ) -> Comparison:
        similarities: list[np.ndarray] = []
        label = ""
        for want, got in zip(expected, actual, strict=True):
            a, label = _select(want, names, opts["output"])
            b, _ = _select(got, names, opts["output"])
            a, b = a.astype(np.float64), b.astype(np.float64)
            failure = _shape_failure("embedding", label, a, b) or _nonfinite_failure(
                "embedding", label, a, b
            )
            if failure:
                return failure
            similarities.append(np.atleast_1d(cosine(pool(a), pool(b))))
        values = np.concatenate(similarities) if similarities else np.ones(1)
        metrics = {
            "rows": int(values.size),
            "cosine_min": float(values.min()),
            "cosine_mean": float(values.mean()),
            "pooling": opts["pooling"],
        }
        return _verdict(
            "embedding",
            label,
            metrics,
            [("cosine_min", metrics["cosine_min"], opts["min_cosine"], "min")],
        )

    return compare


# --- binary / sentiment -----------------------------------------------------------------------


def _probability_rows(array: np.ndarray) -> np.ndarray:
    return np.asarray(array, dtype=np.float64).reshape(-1, 1)


BINARY_MODES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    # auto: one probability per row when the last axis is 1 (or there is none), else class scores
    "auto": lambda a: _probability_rows(a) if a.ndim <= 1 or a.shape[-1] == 1 else _rows(a),
    "probability": _probability_rows,
    "argmax": _rows,
}


def binary_labels(scores: np.ndarray, threshold: float) -> np.ndarray:
    """One label per row: a single probability → above threshold; class scores → argmax."""
    if scores.shape[-1] == 1:
        return (scores[:, 0] > threshold).astype(np.int64)
    return np.argmax(scores, axis=-1)


@register("binary")
def binary(options: Mapping[str, Any]) -> CompareFunc:
    opts = _options(
        "binary",
        options,
        {"output": 0, "mode": "auto", "threshold": 0.5, "max_flip_rate": 0.0},
    )
    if opts["mode"] not in BINARY_MODES:
        known = ", ".join(sorted(BINARY_MODES))
        raise ConfigError(f"binary mode '{opts['mode']}' is unknown; use one of {known}")
    as_rows = BINARY_MODES[opts["mode"]]

    def compare(
        expected: Sequence[Outputs], actual: Sequence[Outputs], names: Sequence[str]
    ) -> Comparison:
        want, got, label = _stack(expected, actual, names, opts["output"], as_rows)
        failure = _shape_failure("binary", label, want, got) or _nonfinite_failure(
            "binary", label, want, got
        )
        if failure:
            return failure
        labels_a = binary_labels(want, opts["threshold"])
        labels_b = binary_labels(got, opts["threshold"])
        flipped = np.flatnonzero(labels_a != labels_b)
        count = len(labels_a)
        metrics = {
            "rows": count,
            "flips": int(flipped.size),
            "flip_rate": flipped.size / count if count else 0.0,
            "max_score_delta": float(np.max(np.abs(want - got))) if want.size else 0.0,
            "flipped_rows": flipped[:20].tolist(),
        }
        return _verdict(
            "binary",
            label,
            metrics,
            [("flip_rate", metrics["flip_rate"], opts["max_flip_rate"], "max")],
        )

    return compare


# --- text -------------------------------------------------------------------------------------


def bleu(reference: Sequence[int], candidate: Sequence[int], max_n: int = 4) -> float:
    """Sentence BLEU with add-one smoothing of the n-gram precisions (Lin & Och 2004), so short
    sequences with one changed token score below 1 instead of collapsing to 0."""
    if list(reference) == list(candidate):
        return 1.0
    if not candidate or not reference:
        return 0.0
    log_precision = 0.0
    orders = min(max_n, len(reference), len(candidate))
    for n in range(1, orders + 1):
        ref_grams = Counter(tuple(reference[i : i + n]) for i in range(len(reference) - n + 1))
        cand_grams = Counter(tuple(candidate[i : i + n]) for i in range(len(candidate) - n + 1))
        overlap = sum(min(count, ref_grams[g]) for g, count in cand_grams.items())
        total = sum(cand_grams.values())
        smoothing = 0 if n == 1 else 1
        log_precision += math.log(max(overlap + smoothing, 1e-9) / (total + smoothing)) / orders
    brevity = min(0.0, 1 - len(reference) / len(candidate))
    return float(math.exp(log_precision + brevity))


def ctc_greedy(logits: np.ndarray, blank: int) -> list[list[int]]:
    """Best path per row of (batch, time, classes): repeats collapsed, blanks dropped."""
    paths = np.argmax(np.asarray(logits).reshape(-1, *np.shape(logits)[-2:]), axis=-1)
    decoded = []
    for path in paths:
        collapsed = [int(t) for i, t in enumerate(path) if i == 0 or t != path[i - 1]]
        decoded.append([t for t in collapsed if t != blank])
    return decoded


def _text_verdict(
    name: str, label: str, pairs: Sequence[tuple[list[int], list[int]]], opts: Mapping[str, Any]
) -> Comparison:
    scores = [bleu(a, b) for a, b in pairs]
    exact = [a == b for a, b in pairs]
    changed = [i for i, same in enumerate(exact) if not same]
    metrics: dict[str, Any] = {
        "sequences": len(pairs),
        "exact_match_rate": float(np.mean(exact)) if exact else 1.0,
        "bleu_min": min(scores) if scores else 1.0,
        "bleu_mean": float(np.mean(scores)) if scores else 1.0,
        "changed_sequences": changed[:20],
    }
    if changed:
        first = pairs[changed[0]]
        metrics["example"] = {"expected": first[0][:64], "actual": first[1][:64]}
    return _verdict(
        name,
        label,
        metrics,
        [
            ("exact_match_rate", metrics["exact_match_rate"], opts["min_exact_match"], "min"),
            ("bleu_min", metrics["bleu_min"], opts["min_bleu"], "min"),
        ],
    )


@register("ctc-text")
def ctc_text(options: Mapping[str, Any]) -> CompareFunc:
    opts = _options(
        "ctc-text", options, {"output": 0, "blank": 0, "min_exact_match": 1.0, "min_bleu": 1.0}
    )

    def compare(
        expected: Sequence[Outputs], actual: Sequence[Outputs], names: Sequence[str]
    ) -> Comparison:
        pairs: list[tuple[list[int], list[int]]] = []
        label = ""
        for want, got in zip(expected, actual, strict=True):
            a, label = _select(want, names, opts["output"])
            b, _ = _select(got, names, opts["output"])
            failure = _shape_failure("ctc-text", label, a, b) or _nonfinite_failure(
                "ctc-text", label, a.astype(np.float64), b.astype(np.float64)
            )
            if failure:
                return failure
            pairs.extend(
                zip(ctc_greedy(a, opts["blank"]), ctc_greedy(b, opts["blank"]), strict=True)
            )
        return _text_verdict("ctc-text", label, pairs, opts)

    return compare


def greedy_generate(
    run: RunFunc, feed: Feed, input_name: str, logits_output: int, steps: int, eos: int
) -> list[int]:
    """Append the argmax of the last position's logits `steps` times (or until `eos`); returns
    only the generated tokens. Other inputs of the feed (masks, type ids) grow alongside."""
    current = {name: np.asarray(value) for name, value in feed.items()}
    prompt = current[input_name]
    generated: list[int] = []
    for _ in range(steps):
        logits = np.asarray(run(current)[logits_output])
        token = int(np.argmax(logits.reshape(-1, logits.shape[-1])[-1]))
        generated.append(token)
        if token == eos:
            break
        for name, value in current.items():
            if value.shape == current[input_name].shape and name != input_name:
                current[name] = np.concatenate([value, value[..., -1:]], axis=-1)
        current[input_name] = np.concatenate(
            [current[input_name], np.full((*prompt.shape[:-1], 1), token, prompt.dtype)], axis=-1
        )
    return generated


@register("text-generation")
def text_generation(options: Mapping[str, Any]) -> CompareFunc:
    opts = _options(
        "text-generation",
        options,
        {
            "input": "input_ids",
            "output": 0,
            "max_new_tokens": 16,
            "eos": -1,
            "min_exact_match": 1.0,
            "min_bleu": 1.0,
        },
    )

    def compare(
        expected: Sequence[Outputs],
        actual: Sequence[Outputs],
        names: Sequence[str],
        context: CompareContext | None = None,
    ) -> Comparison:
        if context is None:
            raise TypeError("text-generation re-runs the models: call it with a CompareContext")
        position, label = _position(names, opts["output"])
        pairs = []
        for feed in context.feeds:
            if opts["input"] not in feed:
                raise ConfigError(
                    f"text-generation input '{opts['input']}' is not fed to the model "
                    f"(inputs: {', '.join(feed)}); fix the comparator's 'input' option"
                )
            steps, eos = int(opts["max_new_tokens"]), int(opts["eos"])
            pairs.append(
                (
                    greedy_generate(
                        context.run_original, feed, opts["input"], position, steps, eos
                    ),
                    greedy_generate(
                        context.run_optimized, feed, opts["input"], position, steps, eos
                    ),
                )
            )
        return _text_verdict("text-generation", label, pairs, opts)

    compare.needs_context = True  # type: ignore[attr-defined]
    return compare
