"""The onnx-node index: listed without unpacking, current with the installed onnx."""

from __future__ import annotations

import json
from pathlib import Path

from ditox_ci.corpus import CorpusContext, resolve_sources
from ditox_ci.corpus.node_cases import SHIPPED_INDEX, cases_key, node_root


def test_the_shipped_index_is_the_one_for_the_installed_onnx() -> None:
    """Else every machine unpacks all 1,884 cases before its first sweep: after a bump of onnx,
    remake it as node_cases.py says."""
    shipped = json.loads(SHIPPED_INDEX.read_text())
    assert shipped["key"] == cases_key()
    assert len(shipped["cases"]) > 1800 and all(case["module"] for case in shipped["cases"])


def test_a_glob_is_resolved_from_the_index_without_unpacking_anything(tmp_path: Path) -> None:
    ctx = CorpusContext(tmp_path)
    refs = resolve_sources(["onnx-node:test_conv*"], ctx, unpacked=False)
    assert refs and all(ref.id.startswith("onnx-node:test_conv") for ref in refs)
    assert all(ref.size is not None and ref.size.bytes > 0 and ref.size.nodes > 0 for ref in refs)
    assert all(Path(ref.path).parent.parent == node_root(ctx) for ref in refs)
    assert not tmp_path.joinpath("onnx-node").exists()
