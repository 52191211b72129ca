"""The hub source against a local HTTP server serving an ONNX hub manifest and tiny models."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ditox_ci.corpus import SOURCES, CorpusContext
from ditox_ci.corpus.hub import MANIFEST_NAME, hub_model
from ditox_ci.engine import runner
from ditox_ci.errors import InputError, UsageError


def _tiny_model(opset: int, scale: float) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    weight = helper.make_tensor("w", TensorProto.FLOAT, [1], [scale])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["y"])], "tiny", [x], [y], [weight]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def _entry(name: str, opset: int, path: str, data: bytes, tags: list[str]) -> dict:
    return {
        "model": name,
        "model_path": path,
        "onnx_version": "1.14",
        "opset_version": opset,
        "metadata": {
            "model_sha": hashlib.sha256(data).hexdigest(),
            "model_bytes": len(data),
            "tags": tags,
            "io_ports": {"inputs": [{"name": "x", "shape": [1, 4], "type": "tensor(float)"}]},
        },
    }


@pytest.fixture()
def hub_dir(tmp_path: Path) -> Path:
    """A hub folder: 'TinyNet' at opsets 12 and 13, 'Tampered' whose file is not its manifest's,
    and 'Missing' whose file is absent."""
    root = tmp_path / "hub"
    entries = []
    for opset, scale in ((12, 2.0), (13, 3.0)):
        data = _tiny_model(opset, scale)
        path = f"vision/classification/tinynet/model/tinynet-{opset}.onnx"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        entries.append(_entry("TinyNet", opset, path, data, ["vision", "classification"]))
    real = _tiny_model(13, 5.0)
    tampered_path = "vision/tampered/tampered-13.onnx"
    (root / tampered_path).parent.mkdir(parents=True)
    (root / tampered_path).write_bytes(_tiny_model(13, 6.0))
    entries.append(_entry("Tampered", 13, tampered_path, real, ["vision"]))
    entries.append(_entry("Missing", 13, "vision/missing/missing-13.onnx", real, []))
    (root / MANIFEST_NAME).write_text(json.dumps(entries))
    return root


@pytest.fixture()
def server(hub_dir: Path) -> Iterator[str]:
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(hub_dir))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _run(path: str) -> np.ndarray:
    session = runner.load_session(Path(path).read_bytes())
    return runner.run(session, {"x": np.ones((1, 4), np.float32)})[0]


def test_good_model_is_downloaded_verified_and_cached(
    server: str, hub_dir: Path, tmp_path: Path
) -> None:
    ctx = CorpusContext(tmp_path / "cache")
    env = {"DITOX_HUB_URL": server}
    (ref,) = hub_model("tinynet", ctx, env)
    assert ref.id == "hub:TinyNet@13" and ref.source == "hub"
    assert ref.comparator == "classification"
    assert Path(ref.path).is_relative_to(tmp_path / "cache" / "hub")
    assert ref.meta["sha256"] == hashlib.sha256(Path(ref.path).read_bytes()).hexdigest()
    assert _run(ref.path).tolist() == [[3.0] * 4]
    # the cache answers without the server's file
    (hub_dir / "vision/classification/tinynet/model/tinynet-13.onnx").unlink()
    (again,) = hub_model("TinyNet@13", ctx, env)
    assert again.path == ref.path


def test_opset_is_selectable_and_unknown_opset_lists_valid_ones(
    server: str, tmp_path: Path
) -> None:
    env = {"DITOX_HUB_URL": server + "/"}
    (ref,) = hub_model("TinyNet@12", CorpusContext(tmp_path), env)
    assert ref.id == "hub:TinyNet@12"
    assert onnx.load(ref.path).opset_import[0].version == 12
    with pytest.raises(InputError, match=r"valid opsets: \[12, 13\]"):
        hub_model("TinyNet@11", CorpusContext(tmp_path), env)


def test_bad_checksum_is_refused_and_not_cached(server: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="sha256"):
        hub_model("Tampered", CorpusContext(tmp_path / "cache"), {"DITOX_HUB_URL": server})
    assert not list((tmp_path / "cache").rglob("*.onnx"))


def test_missing_model_file_and_unknown_name_are_input_errors(server: str, tmp_path: Path) -> None:
    env = {"DITOX_HUB_URL": server}
    with pytest.raises(InputError, match="HTTP 404"):
        hub_model("Missing", CorpusContext(tmp_path), env)
    with pytest.raises(InputError, match="no model named 'resnet50'"):
        hub_model("resnet50", CorpusContext(tmp_path), env)


def test_local_folder_hub_and_missing_manifest(hub_dir: Path, tmp_path: Path) -> None:
    (ref,) = hub_model("TinyNet@12", CorpusContext(tmp_path), {"DITOX_HUB_URL": str(hub_dir)})
    assert _run(ref.path).tolist() == [[2.0] * 4]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="hub manifest not found"):
        hub_model("TinyNet", CorpusContext(tmp_path), {"DITOX_HUB_URL": str(empty)})


def test_malformed_manifest_and_bad_specs(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_NAME).write_text(json.dumps([{"model": "x"}]))
    with pytest.raises(InputError, match="ONNX hub format"):
        hub_model("x", CorpusContext(tmp_path), {"DITOX_HUB_URL": str(tmp_path)})
    with pytest.raises(UsageError, match="needs a model name"):
        hub_model(None, CorpusContext(tmp_path), {})
    with pytest.raises(UsageError, match="must be a number"):
        hub_model("TinyNet@latest", CorpusContext(tmp_path), {})
    assert SOURCES["hub"] is hub_model


def test_a_fresh_cli_process_resolves_hub_specs(hub_dir: Path, tmp_path: Path) -> None:
    """A fresh `ditox-ci` process resolves `hub:` specs: importing the corpus registers it."""
    env = {**os.environ, "DITOX_HUB_URL": str(hub_dir), "DITOX_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "ditox_ci", "corpus", "list", "--models", "hub:TinyNet@12", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["id"] == "hub:TinyNet@12" and row["source"] == "hub"


@pytest.mark.parametrize("model_path", ["../outside.onnx", "models/../../outside.onnx", "/ABS/outside.onnx"])
def test_a_hostile_manifest_path_is_refused_and_nothing_is_written_outside_the_cache(
    tmp_path: Path, model_path: str
) -> None:
    """The file the path names exists (so a reader that followed it would succeed) and its sha256
    matches: only the path check stands between the manifest and a write outside the cache."""
    hub, cache = tmp_path / "hub", tmp_path / "cache"
    data = _tiny_model(13, 2.0)
    model_path = model_path.replace("/ABS", str(tmp_path))
    target = Path(model_path) if model_path.startswith("/") else hub / model_path
    target.parent.mkdir(parents=True, exist_ok=True)
    hub.mkdir(exist_ok=True)
    target.write_bytes(data)
    (hub / MANIFEST_NAME).write_text(json.dumps([_entry("Evil", 13, model_path, data, [])]))
    before = sorted(path for path in tmp_path.rglob("*") if not path.is_relative_to(cache))
    with pytest.raises(InputError, match="not a relative path inside the hub"):
        hub_model("Evil", CorpusContext(cache), {"DITOX_HUB_URL": str(hub)})
    assert sorted(path for path in tmp_path.rglob("*") if not path.is_relative_to(cache)) == before
    assert not list(cache.rglob("*.onnx"))


def test_a_cache_folder_that_is_a_symlink_out_of_the_cache_is_refused(hub_dir: Path, tmp_path: Path) -> None:
    cache, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (cache / "hub" / "vision" / "classification").mkdir(parents=True)
    (cache / "hub" / "vision" / "classification" / "tinynet").symlink_to(elsewhere)
    with pytest.raises(InputError, match="leads outside"):
        hub_model("TinyNet", CorpusContext(cache), {"DITOX_HUB_URL": str(hub_dir)})
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize(
    "sha", [None, "", "../../../../elsewhere/x", "a" * 63], ids=["absent", "empty", "path", "short"]
)
def test_a_manifest_entry_without_a_sha256_to_check_against_is_refused(
    tmp_path: Path, sha: str | None
) -> None:
    """A file is named by its sha256 and checked against it: without one it was used unchecked, and
    a sha256 holding a path led the cached name out of its folder."""
    hub, cache = tmp_path / "hub", tmp_path / "cache"
    data = _tiny_model(13, 2.0)
    path = "vision/plain/plain-13.onnx"
    (hub / path).parent.mkdir(parents=True)
    (hub / path).write_bytes(data)
    entry = _entry("Plain", 13, path, data, [])
    entry["metadata"]["model_sha"] = sha
    (hub / MANIFEST_NAME).write_text(json.dumps([entry]))
    with pytest.raises(InputError, match=r"hub model Plain@13: the manifest gives no sha256"):
        hub_model("Plain", CorpusContext(cache), {"DITOX_HUB_URL": str(hub)})
    assert not [p for p in tmp_path.rglob("*.onnx") if not p.is_relative_to(hub)]
