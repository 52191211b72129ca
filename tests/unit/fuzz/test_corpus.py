"""The fuzz stream: models made on demand until a deadline, written where a path source would find
them, deleted when not worth keeping, and the seeds run summed up as ranges."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ditox_ci.corpus.sources import models_from_path
from ditox_ci.fuzz.base import GENERATORS, MAX_DRAWS, Generator
from ditox_ci.fuzz.corpus import StreamedCorpus, generate_stream, seed_ranges


def test_the_stream_stops_at_its_deadline_when_asked_late():
    stream = generate_stream(0, ["eliminate_identity", "fuse_qkv"], deadline=time.monotonic() + 0.5)
    first = next(stream)
    time.sleep(0.6)
    assert first.id == "eliminate_identity-0" and list(stream) == []


def test_seed_ranges_group_the_passes_that_ran_the_same_seeds():
    made = [("a", 5), ("b", 5), ("c", 5), ("a", 6), ("b", 6)]
    assert seed_ranges(made) == [
        {"seeds": [5, 6], "passes": ["a", "b"]},
        {"seeds": [5, 5], "passes": ["c"]},
    ]


def test_streamed_models_are_what_a_path_source_reads_and_can_be_discarded(tmp_path: Path):
    corpus = StreamedCorpus(tmp_path, 3, ["eliminate_identity", "fuse_qkv"], limit=4,
                            deadline=time.monotonic() + 60)
    refs = list(corpus)
    by_path = {ref.id: ref for ref in models_from_path(str(tmp_path))}
    for ref in refs:
        listed = by_path[ref.id]
        assert (listed.path, listed.inputs_dir, listed.family) == (ref.path, ref.inputs_dir, ref.family)
    corpus.discard(refs[0])
    assert not Path(refs[0].path).exists() and Path(refs[1].path).exists()
    stats = corpus.stats()
    assert stats["models"] == 4 and stats["models_kept"] == 3
    assert stats["seed_ranges"] == [{"seeds": [3, 4], "passes": ["eliminate_identity", "fuse_qkv"]}]


def _shapes_that_do_not_broadcast(builder, near_miss):
    # [2, 3] + [4, 5]: a model strict shape inference refuses on every draw (it ended the run)
    builder.output(builder.op("Add", [builder.input([2, 3]), builder.input([4, 5])]))


def _a_bug_of_the_generator(builder, near_miss):
    raise ValueError("a generator's own bug")


def test_a_seed_its_generator_makes_no_model_for_is_noted_and_the_stream_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    never_valid = Generator("never_valid", "test", _shapes_that_do_not_broadcast)
    monkeypatch.setitem(GENERATORS, "never_valid", never_valid)
    monkeypatch.setitem(GENERATORS, "buggy", Generator("buggy", "test", _a_bug_of_the_generator))
    corpus = StreamedCorpus(tmp_path, 0, ["never_valid", "eliminate_identity", "buggy"], limit=6,
                            deadline=time.monotonic() + 60)
    refs = list(corpus)
    assert [ref.id for ref in refs] == ["eliminate_identity-0/model.onnx", "eliminate_identity-1/model.onnx"]
    stats = corpus.stats()
    assert stats["not_generated"] == 4
    never, buggy = stats["not_generated_first"][:2]
    assert (never["pass"], never["seed"]) == ("never_valid", 0)
    assert f"no finite model in {MAX_DRAWS} draws" in never["reason"] and "shape inference" in never["reason"]
    assert not never["bug"]
    assert buggy == {"pass": "buggy", "seed": 0, "reason": "ValueError: a generator's own bug", "bug": True}
