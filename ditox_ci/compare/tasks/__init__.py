"""Task-aware comparators: what a user of a trained model would notice, not max-abs differences.

Each factory reads its thresholds from an options mapping (unknown keys are a ConfigError) and
returns a compare function over all samples, with the original model's outputs as the reference:

- `classification` (`classify.py`): top-1 agreement, top-K set agreement (near-ties at the K-th
  score forgiven), Kendall's tau over the union of both top-K score lists.
- `detection` (`detect.py`): boxes decoded by a registered layout (`yolov8`, `db-map`, `boxes`);
  precision, recall and F1 at several IoU thresholds, mean IoU of matches, and mAP with the
  original's boxes as ground truth.
- `embedding` (`vectors.py`): cosine similarity per row after pooling.
- `binary` (`vectors.py`): label flip rate of a probability or two-class output.
- `ctc-text` (`text.py`): greedy CTC decoding per row; exact-match rate and BLEU.
- `text-generation` (`text.py`): a greedy decoding loop that re-runs both models through a
  CompareContext, then exact-match rate and BLEU of the generated token sequences.

What they share (`common.py`): the `comparator` decorator (registration, defaults, unknown options
and unknown choices), the CompareContext, picking one output, the shape and non-finite failures,
the threshold verdict. Non-finite numbers in the optimized outputs
where the original had finite ones always fail: a metric computed over NaN would otherwise come
out as NaN and compare False against every threshold, silently passing.

Importing this package registers every task comparator.
"""

from __future__ import annotations

from ditox_ci.compare.tasks.classify import classification
from ditox_ci.compare.tasks.common import CompareContext, Feed, RunFunc, needs_context
from ditox_ci.compare.tasks.detect import (
    DETECTION_LAYOUTS,
    Detections,
    average_precision,
    decode_boxes,
    decode_db_map,
    decode_yolov8,
    detection,
    detection_metrics,
    iou_matrix,
    match,
    nms,
    register_layout,
)
from ditox_ci.compare.tasks.text import bleu, ctc_greedy, ctc_text, greedy_generate, text_generation
from ditox_ci.compare.tasks.vectors import (
    BINARY_MODES,
    POOLINGS,
    binary,
    binary_labels,
    cosine,
    embedding,
)

__all__ = [
    "BINARY_MODES",
    "DETECTION_LAYOUTS",
    "POOLINGS",
    "CompareContext",
    "Detections",
    "Feed",
    "RunFunc",
    "average_precision",
    "binary",
    "binary_labels",
    "bleu",
    "classification",
    "cosine",
    "ctc_greedy",
    "ctc_text",
    "decode_boxes",
    "decode_db_map",
    "decode_yolov8",
    "detection",
    "detection_metrics",
    "embedding",
    "greedy_generate",
    "iou_matrix",
    "match",
    "needs_context",
    "nms",
    "register_layout",
    "text_generation",
]
