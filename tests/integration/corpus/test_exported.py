"""The `exported` source: the shipped models are the manifest's, hold what it says made them, and run."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

from ditox_ci.corpus import DEFAULT_SOURCES, CorpusContext, resolve_sources
from ditox_ci.corpus.exported import FOLDER, MANIFEST, exported_models, load_manifest
from ditox_ci.corpus.inputs import make_feeds
from ditox_ci.corpus.loading import load_model
from ditox_ci.engine import runner

VERSIONS, MODELS = load_manifest(MANIFEST)
FAMILIES = {
    "exported/transformer",
    "exported/quantized",
    "exported/fp16",
    "exported/float",
    "exported/classic-ml",
}


def _ops(name: str) -> Counter[str]:
    model = onnx.load(str(FOLDER / name / "model.onnx"))
    return Counter(f"{node.domain or 'ai.onnx'}:{node.op_type}" for node in model.graph.node)


def test_the_manifest_lists_every_shipped_model_once_with_what_made_it():
    assert sorted(path.name for path in FOLDER.iterdir() if path.is_dir()) == sorted(m.name for m in MODELS)
    assert len({m.name for m in MODELS}) == len(MODELS)
    assert {m.family for m in MODELS} == FAMILIES
    assert {"torch", "transformers", "onnxruntime", "skl2onnx"} <= set(VERSIONS)
    for model in MODELS:
        assert (FOLDER / model.name / "model.onnx").stat().st_size == model.size
        assert any(tool in model.made_by for tool in ("torch", "onnxruntime", "onnx ", "skl2onnx")), model


@pytest.mark.parametrize("entry", MODELS, ids=[m.name for m in MODELS])
def test_each_model_is_valid_and_runs_on_its_recorded_inputs(entry, tmp_path: Path) -> None:
    (ref,) = exported_models(entry.name, CorpusContext(cache_dir=tmp_path))
    assert "unavailable" not in ref.meta, ref.meta["unavailable"]
    assert ref.family == entry.family and ref.inputs_dir
    model = load_model(ref)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import and entry.opset == next(
        o.version for o in model.opset_import if o.domain in ("", "ai.onnx")
    )
    feeds = make_feeds(model, ref, samples=1, seed=0)
    initializers = {tensor.name for tensor in model.graph.initializer}
    assert set(feeds[0]) == {value.name for value in model.graph.input if value.name not in initializers}
    outputs = runner.run(runner.load_session(Path(ref.path).read_bytes()), feeds[0])
    assert len(outputs) == len(model.graph.output)
    for output in outputs:
        values = [v for item in output for v in item.values()] if isinstance(output, list) else [output]
        assert values and all(
            np.isfinite(np.asarray(v, np.float64)).all() for v in values if np.asarray(v).dtype.kind == "f"
        )


def test_the_models_are_the_kinds_the_corpus_promises():
    """Each kind docs/corpus.md lists is there, seen in the graphs, not only in the manifest's words."""
    dynamo = [m for m in MODELS if m.name.endswith("-dynamo")]
    assert {m.opset for m in dynamo} == {18} and len(dynamo) >= 4
    llama = _ops("llama-decoder-torchscript")
    assert llama["ai.onnx:Softmax"] and llama["ai.onnx:Sin"] and llama["ai.onnx:Cos"]  # attention, rotary
    assert llama["ai.onnx:Sqrt"] and llama["ai.onnx:Sigmoid"]  # RMSNorm, SwiGLU's SiLU
    cache = onnx.load(str(FOLDER / "llama-decoder-kv-cache-dynamo" / "model.onnx"))
    assert [i.name for i in cache.graph.input][-2:] == ["past_key", "past_value"]
    assert [o.name for o in cache.graph.output] == ["logits", "present_key", "present_value"]
    assert _ops("cnn-resnet-block-int8-qdq")["ai.onnx:QuantizeLinear"]
    assert _ops("cnn-resnet-block-int8-qoperator")["ai.onnx:QLinearConv"]
    assert _ops("bert-encoder-int8-dynamic")["ai.onnx:DynamicQuantizeLinear"]
    assert _ops("llama-decoder-int4")["com.microsoft:MatMulNBits"]
    assert _ops("bert-encoder-ort-fused")["com.microsoft:SkipLayerNormalization"]
    half = onnx.load(str(FOLDER / "bert-encoder-fp16" / "model.onnx"))
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in half.graph.initializer)
    assert _ops("bert-encoder-fp16")["ai.onnx:Cast"]
    assert _ops("sklearn-scaler-logistic-zipmap")["ai.onnx.ml:ZipMap"]
    assert _ops("sklearn-columns-onehot-logistic")["ai.onnx.ml:OneHotEncoder"]


def test_a_changed_file_is_listed_unavailable_and_the_default_corpus_has_the_source(tmp_path: Path):
    ctx = CorpusContext(cache_dir=tmp_path / "cache")
    assert "exported" in DEFAULT_SOURCES
    ids = {ref.id for ref in resolve_sources([], ctx, unpacked=False)}
    assert {f"exported:{m.name}" for m in MODELS} <= ids
    copy = tmp_path / "exported"
    shutil.copytree(FOLDER, copy)
    target = copy / "gpt2-decoder-dynamo" / "model.onnx"
    target.write_bytes(target.read_bytes()[:-1] + b"\0")
    refs = {ref.id: ref for ref in exported_models(None, ctx, folder=copy)}
    reason = refs["exported:gpt2-decoder-dynamo"].meta["unavailable"]
    assert reason.startswith(f"{target} is not the file the manifest records") and "reinstall" in reason
    assert sum("unavailable" in ref.meta for ref in refs.values()) == 1
