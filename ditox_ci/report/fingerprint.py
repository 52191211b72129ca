"""Stable, semantic fingerprints: the same bug gets the same id across runs, machines and shards."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable

import onnx.defs


@functools.cache
def _op_types() -> frozenset[str]:
    return frozenset(schema.name for schema in onnx.defs.get_all_schemas_with_history())


def _quoted(match: re.Match[str]) -> str:
    """A quoted name is taken out, a quoted op type kept: `KeyError: 'CastLike'` and `KeyError:
    'Reshape'` (an optimizer without a handler for each) are two causes, and were one fingerprint."""
    return match.group(0) if match.group(0)[1:-1] in _op_types() else "<name>"


_NORMALIZERS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.\-]+){2,}"), "<path>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), _quoted),
    # unquoted tensor, initializer and node names: exporters number them (onnx::Conv_12,
    # conv1.weight_3, Mul_0, /encoder/layer.0/Add) and an optimizer error names the one it met,
    # which differs by model while the cause does not; op versions like Mul(14) keep their op
    (re.compile(r"(?:[\w.]*::)+[\w.:]+|\b[A-Za-z_][\w]*[_.][\w.]*\d[\w.]*"), "<name>"),
    (re.compile(r"\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b"), "<n>"),
    (re.compile(r"\s+"), " "),
)


def normalize_message(message: str) -> str:
    """Strip what varies between runs of the same bug: addresses, paths, quoted names (not quoted op
    types), numbers."""
    text = message.strip().splitlines()[0] if message.strip() else ""
    for pattern, replacement in _NORMALIZERS:
        text = pattern.sub(replacement, text)
    return text.strip()


def fingerprint(kind: str, passes: Iterable[str], message: str, op_signature: Iterable[str]) -> str:
    """kind + culprit passes (in order) + normalized message + the sorted op types involved."""
    payload = json.dumps(
        [kind, list(passes), normalize_message(message), sorted(set(op_signature))],
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]

