"""Model sources: filesystem paths and the corpora that ship inside the installed onnx wheel
(`onnx-data` here, `onnx-node` in node_cases.py).

Named sources materialize their models once into the cache folder, in the ONNX backend-test
layout (`model.onnx` + `test_data_set_<k>/input_<i>.pb`), so every later run, worker and shard
reads plain files. Materialization builds in a temporary folder and renames it into place with an
index as its completion marker: a crash leaves no half-written corpus, and a second call does not
regenerate anything. A folder is reused only while its files are those it was made with
(`intact`: a record of every file's sha256, checked by its size, inode and change time, and hashed
again where those moved): a model swapped in a shared cache is made again, not swept as onnx's.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ditox_ci.corpus import SOURCE_NAMES, UNPACKERS, CorpusContext, ModelRef, ModelSize, register_source
from ditox_ci.log import printable

INDEX_FILE = "index.json"
# what a materialized folder held when it was made: every file's sha256, and the size, inode and
# change time it had then (a change time cannot be set back by whoever writes the file)
FILES_RECORD = ".ditox-files.json"
ONNX_DATA_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data"
# `real` only holds data.json download stubs; they point at the `light` models, which we use.
ONNX_DATA_FAMILIES = ("simple", "pytorch-converted", "pytorch-operator")
LIGHT_FAMILY = "light"
# raised when randomize_fake_weights changes, so a cache never serves the older weights
LIGHT_LAYOUT = 1


def recorded_inputs_dir(folder: Path) -> str | None:
    """`folder` when it holds ONNX backend-test data sets (`test_data_set_*/input_*.pb`)."""
    if any(folder.glob("test_data_set_*/input_*.pb")):
        return str(folder)
    return None


FAMILY_KEY = "ditox.family"
FAMILY_PEEK_BYTES = 4 << 20


def declared_family(path: Path) -> str:
    """The `ditox.family` metadata of a small model (generated corpora declare it); else ""."""
    try:
        if path.stat().st_size > FAMILY_PEEK_BYTES:
            return ""
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # an unreadable model is reported by the sweep, not here
        return ""
    return next((p.value for p in model.metadata_props if p.key == FAMILY_KEY), "")


def _case_ref(source: str, name: str, folder: Path, family: str) -> ModelRef:
    """A backend-test case of a built-in source: `folder/model.onnx`, its recorded inputs beside it."""
    return ModelRef(
        id=f"{source}:{name}",
        source=source,
        path=str(folder / "model.onnx"),
        inputs_dir=recorded_inputs_dir(folder),
        family=family,
    )


def _path_ref(path: Path, model_id: str, spec: str) -> ModelRef:
    return ModelRef(
        id=model_id,
        source=spec,
        path=str(path),
        inputs_dir=recorded_inputs_dir(path.parent),
        family=declared_family(path),
    )


def models_from_path(spec: str) -> list[ModelRef]:
    """A `.onnx` file (id = its name) or every `*.onnx` below a folder (id = relative path).

    A file name is anyone's to choose: in the id, bytes that are not UTF-8 and line breaks are
    escaped (`printable`), so the id can go into JSON, Markdown and the log as it is.
    A folder that cannot be read is a model the sweep skips with the reason (id: its path and a
    `/`), not a hole nobody sees. Linked folders are not entered; linked files count.
    """
    root = Path(spec).expanduser()
    if root.is_file():
        return [_path_ref(root, printable(root.name), spec)]
    paths: list[Path] = []
    unreadable: list[OSError] = []
    for folder, _, files in os.walk(root, onerror=unreadable.append):
        paths += [Path(folder) / name for name in files if name.endswith(".onnx")]
    found = [path for path in paths if path.is_file()]
    refs = [_path_ref(path, printable(path.relative_to(root).as_posix()), spec) for path in found]
    for error in unreadable:
        where = Path(str(error.filename)).relative_to(root).as_posix()
        reason = f"cannot read the folder {spec if where == '.' else where}: {error.strerror or error}"
        refs.append(ModelRef(id=printable(where) + "/", source=spec, path="", meta={"unavailable": reason}))
    return sorted(refs, key=lambda ref: ref.id)


Builder = Callable[[Path], list[dict[str, Any]]]


def _stat_key(path: Path) -> list[int]:
    found = path.stat()
    return [found.st_size, found.st_ino, found.st_ctime_ns]


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files_below(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != FILES_RECORD)


def record_files(folder: Path) -> None:
    """Write `folder`'s record of its files (FILES_RECORD)."""
    record = {
        path.relative_to(folder).as_posix(): {"sha256": _sha256_file(path), "stat": _stat_key(path)}
        for path in _files_below(folder)
    }
    (folder / FILES_RECORD).write_text(json.dumps(record))


@functools.lru_cache(maxsize=64)
def _record(folder: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((folder / FILES_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def recorded_sha256(path: Path) -> str | None:
    """The sha256 that the record of the made folder holding `path` (FILES_RECORD: its folder or
    the one above) keeps for it, while the file is as recorded (`intact`'s check: size, inode and
    change time); None for a file no record holds, or one changed since. What a report's model
    entry names the file by, without reading it again."""
    for folder in (path.parent, path.parent.parent):
        record = _record(folder)
        if record is None:
            continue
        entry: Any = record.get(path.relative_to(folder).as_posix())
        try:
            return str(entry["sha256"]) if _stat_key(path) == entry["stat"] else None
        except (OSError, KeyError, TypeError):
            return None
    return None


def intact(folder: Path) -> bool:
    """Whether `folder` holds the files it was made with and no other: each one's size, inode and
    change time as recorded, else its sha256 (a cache restored from an archive has new inodes; its
    record is then brought up to date). False without a record (made by an older ditox-ci)."""
    try:
        record = json.loads((folder / FILES_RECORD).read_text())
        found = {path.relative_to(folder).as_posix(): path for path in _files_below(folder)}
        if set(found) != set(record):
            return False
        moved = False
        for name, path in found.items():
            if _stat_key(path) == record[name]["stat"]:
                continue
            if _sha256_file(path) != record[name]["sha256"]:
                return False
            record[name]["stat"], moved = _stat_key(path), True
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if moved:
        with contextlib.suppress(OSError):  # a read-only cache is checked by hash every time
            (folder / FILES_RECORD).write_text(json.dumps(record))
    return True


def materialize_once(target: Path, build: Builder) -> list[dict[str, Any]]:
    """The index of `target`, building it first with `build(tmp_dir)` unless already complete and
    intact.

    `build` writes the models into an empty folder and returns one index entry per model; the
    folder is renamed into place only after the index and the record of its files are written, so
    readers never see a partial corpus, and concurrent builders (shards, workers) keep whichever
    finished first. A folder whose files are not those it was made with is made again.
    """
    index = target / INDEX_FILE
    if index.is_file() and intact(target):
        return list(json.loads(index.read_text()))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        entries = build(staging)
        (staging / INDEX_FILE).write_text(json.dumps(entries, indent=1))
        record_files(staging)
        if target.exists() and not intact(target):
            shutil.rmtree(target)  # interrupted, from an older layout, or changed: not ours to trust
        try:
            os.rename(staging, target)
        except OSError:
            if not (index.is_file() and intact(target)):
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return list(json.loads(index.read_text()))


def _stable_rng(*parts: object) -> np.random.Generator:
    digest = hashlib.sha256("\0".join(str(part) for part in parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _random_weight(shape: Sequence[int], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Weights that keep activations finite: ~N(0, 1/fan_in) for matrices and kernels, and
    positive values near 1 for vectors (biases, scales, batch-norm statistics: a variance must
    stay positive)."""
    shape = tuple(int(dim) for dim in shape)
    if len(shape) >= 2:
        fan_in = max(int(np.prod(shape[1:])), shape[0], 1)
        values = rng.standard_normal(shape) / np.sqrt(fan_in)
    else:
        values = rng.uniform(0.5, 1.5, size=shape)
    return values.astype(dtype)


def randomize_fake_weights(model: onnx.ModelProto, seed_text: str) -> onnx.ModelProto:
    """A copy of a `light_*` model whose constant fake weights become seeded random weights.

    The light models replace each weight by `ConstantOfShape(0.02)` (or a constant initializer),
    which makes every channel identical and hides whole classes of optimizer bugs. Each such
    weight becomes an initializer of the same name, dtype and shape with random values.
    """
    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    rng = _stable_rng("light-weights", seed_text)
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    new_weights: list[onnx.TensorProto] = []
    kept_nodes = []
    for node in graph.node:
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        dtype = numpy_helper.to_array(value).dtype if value is not None else np.dtype(np.float32)
        shape_source = initializers.get(node.input[0]) if node.input else None
        if node.op_type == "ConstantOfShape" and shape_source is not None and dtype.kind == "f":
            shape = numpy_helper.to_array(shape_source)
            weight = _random_weight(shape.tolist(), dtype, rng)
            new_weights.append(numpy_helper.from_array(weight, node.output[0]))
        else:
            kept_nodes.append(node)
    del graph.node[:]
    graph.node.extend(kept_nodes)

    for tensor in graph.initializer:
        array = numpy_helper.to_array(tensor)
        if array.dtype.kind == "f":
            tensor.CopyFrom(
                numpy_helper.from_array(_random_weight(array.shape, array.dtype, rng), tensor.name)
            )

    used = {name for node in graph.node for name in node.input}
    used |= {output.name for output in graph.output}
    unused = {tensor.name for tensor in graph.initializer if tensor.name not in used}
    survivors = [tensor for tensor in graph.initializer if tensor.name not in unused]
    del graph.initializer[:]
    graph.initializer.extend([*survivors, *new_weights])
    inputs = [info for info in graph.input if info.name not in unused]
    # Before IR 4 every initializer must also be declared as a graph input.
    if result.ir_version < 4:
        inputs += [
            onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
            for tensor in new_weights
        ]
    del graph.input[:]
    graph.input.extend(inputs)
    return result


def _light_builder(source: Path) -> Callable[[Path], list[dict[str, Any]]]:
    def build(folder: Path) -> list[dict[str, Any]]:
        model = randomize_fake_weights(onnx.load(str(source)), source.stem)
        (folder / "model.onnx").write_bytes(model.SerializeToString())
        return [{"name": folder.name, "family": LIGHT_FAMILY}]

    return build


def light_size(source: Path) -> ModelSize:
    """About what `randomize_fake_weights` makes of a light model: its file plus the weights that
    replace its float ConstantOfShape nodes (the initializers it rewrites keep their size), read
    from the small light file without making the weights."""
    model = onnx.load(str(source))
    shapes = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    weights, kept = 0, 0
    for node in model.graph.node:
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        dtype = numpy_helper.to_array(value).dtype if value is not None else np.dtype(np.float32)
        shape = shapes.get(node.input[0]) if node.op_type == "ConstantOfShape" and node.input else None
        if shape is not None and dtype.kind == "f":
            weights += int(np.prod(shape)) * dtype.itemsize
        else:
            kept += 1
    return ModelSize(source.stat().st_size + weights, kept)


@dataclass(frozen=True)
class _DataModel:
    name: str  # `<family>/<name>`
    folder: Path
    # a light model: the wheel's file its folder is made from (None: the wheel's folder itself)
    light_source: Path | None = None


def _onnx_data_models(ctx: CorpusContext) -> list[_DataModel]:
    found = [
        _DataModel(f"{family}/{folder.name}", folder)
        for family in ONNX_DATA_FAMILIES
        for folder in sorted((ONNX_DATA_DIR / family).iterdir())
        if (folder / "model.onnx").is_file()
    ]
    for source in sorted((ONNX_DATA_DIR / LIGHT_FAMILY).glob("light_*.onnx")):
        name = source.stem.removeprefix("light_")
        # addressed by the file it is made from and how: another onnx's light file is another model
        digest = hashlib.sha256(source.read_bytes() + f"\0{LIGHT_LAYOUT}".encode()).hexdigest()[:16]
        folder = ctx.cache_dir / "onnx-data" / LIGHT_FAMILY / f"{name}-{digest}"
        found.append(_DataModel(f"{LIGHT_FAMILY}/{name}", folder, source))
    return found


def _onnx_data_names(ctx: CorpusContext) -> list[str]:
    return [model.name for model in _onnx_data_models(ctx)]


SOURCE_NAMES["onnx-data"] = _onnx_data_names


@register_source("onnx-data")
def onnx_data_source(pattern: str | None, ctx: CorpusContext) -> list[ModelRef]:
    """The onnx wheel's model tests: simple, pytorch-converted, pytorch-operator, light.

    A light model's file (hundreds of MB of random weights for the largest) is made only when a
    sweep of it unpacks it (`unpack_light_models`); its ref says its size until then.
    """
    refs = []
    for model in _onnx_data_models(ctx):
        if pattern and not fnmatch.fnmatchcase(model.name, pattern):
            continue
        ref = _case_ref("onnx-data", model.name, model.folder, model.name.split("/", 1)[0])
        if model.light_source is not None:
            ref = replace(ref, inputs_dir=None, size=light_size(model.light_source))
        refs.append(ref)
    return refs


def unpack_light_models(refs: Sequence[ModelRef], ctx: CorpusContext) -> None:
    """Make the light models among `refs` whose folders this machine's cache lacks."""
    wanted = {ref.id.removeprefix("onnx-data:") for ref in refs}
    for model in _onnx_data_models(ctx):
        if model.name in wanted and model.light_source is not None:
            materialize_once(model.folder, _light_builder(model.light_source))


UNPACKERS["onnx-data"] = unpack_light_models
