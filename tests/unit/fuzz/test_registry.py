"""Generator registry: one generator per optimizer pass, seeds that replay, corpus layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxoptimizer
import pytest
from onnx import numpy_helper

from ditox_ci.errors import UsageError
from ditox_ci.fuzz import FAMILIES, GENERATORS, generate, generate_within, write_corpus


def test_every_onnxoptimizer_pass_has_a_generator_written_for_it() -> None:
    """(The other built-in optimizers' passes: tests/integration/fuzz/test_generators.py.)"""
    written_for = {name for name, g in GENERATORS.items() if "onnxoptimizer" in g.optimizers}
    assert written_for == set(onnxoptimizer.get_available_passes())
    assert {g.family for g in GENERATORS.values()} == set(FAMILIES)
    assert [name for name, g in GENERATORS.items() if not g.fires] == ["nop"]


def test_same_seed_same_bytes_and_seeds_differ() -> None:
    for name in ("fuse_bn_into_conv", "eliminate_nop_reshape", "eliminate_if_with_const_cond"):
        first, again = generate(name, 41), generate(name, 41)
        assert first.model.SerializeToString() == again.model.SerializeToString()
        assert first.near_miss == again.near_miss
        for a, b in zip(first.feeds, again.feeds, strict=True):
            assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        other = generate(name, 42)
        assert other.model.SerializeToString() != first.model.SerializeToString()


def test_metadata_records_how_to_replay() -> None:
    item = generate("fuse_pad_into_conv", 5, near_miss=True)
    props = {p.key: p.value for p in item.model.metadata_props}
    assert props["ditox.generator"] == "fuse_pad_into_conv"
    assert props["ditox.seed"] == "5"
    assert props["ditox.near_miss"] == "1"
    assert props["ditox.family"] == "fusions"
    ranges = json.loads(props["ditox.value_ranges"])
    assert ranges == item.value_ranges
    for feed in item.feeds:
        for name, value in feed.items():
            assert ranges[name]["low"] <= value.min() and value.max() <= ranges[name]["high"]
    assert item.id == "fuse_pad_into_conv-5-near"


def test_unknown_pass_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no fuzz generator for pass 'fuse_everything'"):
        generate("fuse_everything", 0)


def test_round_robin_uses_seed_plus_round() -> None:
    items = generate_within(60.0, 7, ["fuse_qkv", "eliminate_identity"], limit=5)
    assert [(i.target_pass, i.seed) for i in items] == [
        ("fuse_qkv", 7), ("eliminate_identity", 7), ("fuse_qkv", 8),
        ("eliminate_identity", 8), ("fuse_qkv", 9),
    ]


def test_write_corpus_backend_test_layout(tmp_path: Path) -> None:
    items = [generate("rewrite_where", 3, near_miss=False), generate("rewrite_where", 4, True)]
    folders = write_corpus(tmp_path, items)
    assert [f.name for f in folders] == ["rewrite_where-3", "rewrite_where-4-near"]
    for folder, item in zip(folders, items, strict=True):
        model = onnx.load(str(folder / "model.onnx"))
        assert model.SerializeToString() == item.model.SerializeToString()
        for k, feed in enumerate(item.feeds):
            for i, graph_input in enumerate(model.graph.input):
                tensor = onnx.TensorProto()
                data = folder / f"test_data_set_{k}" / f"input_{i}.pb"
                tensor.ParseFromString(data.read_bytes())
                assert tensor.name == graph_input.name
                assert np.array_equal(numpy_helper.to_array(tensor), feed[graph_input.name])
