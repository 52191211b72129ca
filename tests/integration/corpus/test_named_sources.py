"""The named sources over the installed onnx wheel, run through the real ONNX Runtime."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ditox_ci.__main__ import main_inner
from ditox_ci.corpus import CorpusContext, ModelRef, resolve_sources
from ditox_ci.corpus.inputs import has_recorded_inputs, make_feeds
from ditox_ci.corpus.loading import load_model
from ditox_ci.corpus.node_cases import node_root
from ditox_ci.corpus.sources import ONNX_DATA_DIR
from ditox_ci.engine import runner
from ditox_ci.errors import InputError


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusContext]:
    yield CorpusContext(cache_dir=tmp_path_factory.mktemp("corpus-cache"))


@pytest.fixture(scope="module")
def node_refs(ctx: CorpusContext) -> list[ModelRef]:
    return resolve_sources(["onnx-node"], ctx)


def _mtimes(root: Path) -> dict[str, int]:
    return {str(path): path.stat().st_mtime_ns for path in root.rglob("*")}


def test_onnx_node_materializes_every_case_once(ctx: CorpusContext, node_refs: list[ModelRef]):
    root = node_root(ctx)
    assert len(node_refs) > 1000
    assert len({ref.id for ref in node_refs}) == len(node_refs)
    assert all(ref.id.startswith("onnx-node:test_") for ref in node_refs)
    assert all(Path(ref.path).is_file() and ref.family for ref in node_refs)
    before = _mtimes(root)
    again = resolve_sources(["onnx-node"], ctx)
    assert again == node_refs
    assert _mtimes(root) == before
    assert not [p for p in root.parent.iterdir() if p.name.startswith(".")]


def test_onnx_node_glob_selects_matching_cases(ctx: CorpusContext, node_refs: list[ModelRef]):
    refs = resolve_sources(["onnx-node:test_conv*"], ctx)
    expected = [ref for ref in node_refs if ref.id.startswith("onnx-node:test_conv")]
    assert refs == expected and refs
    assert {ref.family for ref in refs} == {"node/nn"}  # Conv, ConvTranspose, ConvInteger: onnx/defs/nn
    with pytest.raises(InputError, match=r"'onnx-node:no_such_case\*' selects no model"):
        resolve_sources(["onnx-node:no_such_case*"], ctx)


def test_onnx_node_inputs_reproduce_recorded_outputs(ctx: CorpusContext) -> None:
    (ref,) = resolve_sources(["onnx-node:test_add_bcast"], ctx)
    assert ref.family == "node/math" and has_recorded_inputs(ref)
    model = load_model(ref)
    (feed,) = make_feeds(model, ref, samples=3, seed=0)
    session = runner.load_session(model.SerializeToString())
    (output,) = runner.run(session, feed)
    expected_pb = Path(ref.inputs_dir or "") / "test_data_set_0" / "output_0.pb"
    expected = numpy_helper.to_array(onnx.load_tensor(str(expected_pb)))
    np.testing.assert_allclose(output, expected, rtol=1e-6)


def test_onnx_node_sequence_inputs_are_written_as_sequences(ctx: CorpusContext) -> None:
    (ref,) = resolve_sources(["onnx-node:test_sequence_insert_at_back"], ctx)
    (feed,) = make_feeds(load_model(ref), ref, samples=1, seed=0)
    assert isinstance(feed["sequence"], list) and len(feed["sequence"]) > 1


def test_onnx_data_ids_and_families(ctx: CorpusContext) -> None:
    refs = resolve_sources(["onnx-data:[sp]*"], ctx)
    families = {ref.family for ref in refs}
    assert families == {"simple", "pytorch-converted", "pytorch-operator"}
    for ref in refs:
        family, name = ref.id.removeprefix("onnx-data:").split("/")
        assert Path(ref.path) == ONNX_DATA_DIR / family / name / "model.onnx"
    assert all(has_recorded_inputs(ref) for ref in refs)
    real_stubs = {p.name for p in (ONNX_DATA_DIR / "real").iterdir()}
    assert not [ref for ref in refs if ref.id.split("/")[-1] in real_stubs]


def test_light_model_gets_random_weights_and_runs_finite(ctx: CorpusContext) -> None:
    (ref,) = resolve_sources(["onnx-data:light/squeezenet"], ctx)
    assert ref.id == "onnx-data:light/squeezenet" and not has_recorded_inputs(ref)
    assert Path(ref.path).is_relative_to(ctx.cache_dir)
    model = load_model(ref)
    assert "ConstantOfShape" not in {node.op_type for node in model.graph.node}
    weights = [numpy_helper.to_array(t) for t in model.graph.initializer]
    kernels = [w for w in weights if w.ndim == 4]
    assert kernels and all(np.unique(w).size > 1 for w in kernels)
    (feed,) = make_feeds(model, ref, samples=1, seed=0)
    session = runner.load_session(model.SerializeToString())
    outputs = runner.run(session, feed)
    assert all(np.all(np.isfinite(out)) for out in outputs)
    assert np.ptp(outputs[0]) > 0
    mtime = Path(ref.path).stat().st_mtime_ns
    resolve_sources(["onnx-data:light/squeezenet"], ctx)
    assert Path(ref.path).stat().st_mtime_ns == mtime


def test_corpus_list_prints_rows_and_count(ctx: CorpusContext, capsys: pytest.CaptureFixture):
    argv = ["corpus", "list", "--models", "onnx-node:test_relu*", "--cache-dir", str(ctx.cache_dir)]
    assert main_inner(argv, {}) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = resolve_sources(["onnx-node:test_relu*"], ctx)
    assert lines[-1] == f"{len(expected)} models"
    assert [line.split()[:3] for line in lines[:-1]] == [
        [ref.id, "onnx-node", "recorded"] for ref in expected
    ]


def test_corpus_list_json_via_environment(ctx: CorpusContext, capsys: pytest.CaptureFixture):
    env = {"DITOX_CACHE": str(ctx.cache_dir)}
    assert main_inner(["corpus", "list", "--models", "onnx-data:simple/*", "--json"], env) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {row["inputs"] for row in rows} == {"recorded"}
    assert all(row["id"].startswith("onnx-data:simple/") for row in rows)
    assert set(rows[0]) == {"id", "source", "inputs", "path"}


def test_corpus_list_says_why_a_model_is_unavailable(monkeypatch: pytest.MonkeyPatch, capsys):
    """Its docs say so; the row showed an empty path and no reason."""
    why = "package nudenet is not installed; make models"
    absent = ModelRef("packaged:nudenet", "packaged", "", meta={"unavailable": why})
    monkeypatch.setattr("ditox_ci.cli.corpus.resolve_sources", lambda *args: [absent])
    assert main_inner(["corpus", "list", "--models", "packaged"], {}) == 0
    assert f"unavailable: {why}" in capsys.readouterr().out
    assert main_inner(["corpus", "list", "--models", "packaged", "--json"], {}) == 0
    assert json.loads(capsys.readouterr().out)[0]["unavailable"] == why
