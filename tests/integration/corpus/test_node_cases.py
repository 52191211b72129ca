"""onnx-node unpacks only what is asked for, one module of onnx's exporters at a time, and what it
writes is byte for byte what unpacking every case writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ditox_ci.corpus import CorpusContext, resolve_sources
from ditox_ci.corpus.node_cases import _unpack_all, node_root

# a float case, a string one (object arrays), sequences, an ONNX-ML one, a function's expansion
SAMPLE = (
    "test_abs",
    "test_string_concat",
    "test_sequence_insert_at_back",
    "test_ai_onnx_ml_binarizer",
    "test_layer_normalization_2d_axis0_expanded",
)


def _files(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*.pb")} | {
        "model.onnx": (folder / "model.onnx").read_bytes()
    }


def test_a_glob_unpacks_its_cases_alone_and_they_match_a_full_unpacking(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # a fresh process: only the modules of these cases are imported there
    specs = [f"onnx-node:{name}" for name in SAMPLE]
    code = "from pathlib import Path\nfrom ditox_ci.corpus import CorpusContext, resolve_sources\n"
    code += f"resolve_sources({specs!r}, CorpusContext(Path({str(cache)!r})))"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    root = node_root(CorpusContext(cache))
    assert sorted(path.name for path in root.iterdir()) == sorted(SAMPLE)

    everything = tmp_path / "all"
    everything.mkdir()
    _unpack_all(everything)
    for name in SAMPLE:
        assert _files(root / name) == _files(everything / name), name


def test_a_second_resolve_writes_nothing(tmp_path: Path) -> None:
    ctx = CorpusContext(tmp_path)
    (ref,) = resolve_sources(["onnx-node:test_relu"], ctx)
    written = {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")}
    assert resolve_sources(["onnx-node:test_relu"], ctx) == [ref]
    assert {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")} == written


def test_a_case_changed_in_a_shared_cache_is_made_again_not_swept_as_onnxs(tmp_path: Path) -> None:
    """A cache folder is anyone's to write on a shared runner: a swapped `model.onnx` (or an input
    added beside the recorded ones) was swept as onnx's own test case. Each case folder records its
    files when it is made, and one that differs is made again."""
    cache = CorpusContext(tmp_path / "cache")
    resolve_sources(["onnx-node:test_abs"], cache)
    folder = node_root(cache) / "test_abs"
    made = _files(folder)
    (folder / "model.onnx").write_bytes((node_root(cache) / "test_abs" / "model.onnx").read_bytes()[:-4])
    resolve_sources(["onnx-node:test_abs"], cache)
    assert _files(folder) == made
    (folder / "test_data_set_0" / "input_1.pb").write_bytes(b"planted")
    resolve_sources(["onnx-node:test_abs"], cache)
    assert _files(folder) == made
    # a folder that is as it was made is not made again
    before = (folder / "model.onnx").stat().st_ino
    resolve_sources(["onnx-node:test_abs"], cache)
    assert (folder / "model.onnx").stat().st_ino == before
