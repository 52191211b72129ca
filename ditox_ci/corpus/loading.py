"""Loading one corpus model from disk, refusing what would be unsafe or cannot be read.

A bad model skips that model only, so the failure is ModelLoadError (a plain Exception), never a
FatalError: one corrupt file in a corpus of thousands must not stop the sweep.

External data is read only from files inside the model's own folder: a location that is absolute
or climbs out of the folder (`../`, a symlink elsewhere) is refused before anything is opened,
because a corpus may come from an untrusted pull request.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from ditox_ci.corpus import ModelRef

_CHUNK = 1 << 20


class ModelLoadError(Exception):
    """The model file cannot be used: missing, corrupt, truncated, or unsafe external data."""


def model_sha256(path: str | Path) -> str:
    """Hex SHA-256 of the model file's bytes (external data files are not included)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def node_count(model: onnx.ModelProto) -> int:
    """Nodes in the main graph and every subgraph."""
    count = 0
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        count += len(graph.node)
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    graphs.append(attribute.g)
                graphs.extend(attribute.graphs)
    return count


def _node_tensors(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.TensorProto]:
    for node in nodes:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from _graph_tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from _graph_tensors(subgraph)


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    yield from _node_tensors(graph.node)


def _model_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        yield from _node_tensors(function.node)


def _external_file(tensor: onnx.TensorProto, folder: Path) -> tuple[Path, int, int | None]:
    """Where `tensor`'s bytes live, after checking the location stays inside `folder`."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    location = entries.get("location", "")
    if not location:
        raise ModelLoadError(f"tensor {tensor.name!r} is external but names no location")
    if os.path.isabs(location) or Path(location).is_absolute() or location.startswith(("\\", "/")):
        raise ModelLoadError(
            f"tensor {tensor.name!r}: external data location {location!r} is absolute; refused"
        )
    try:
        root = folder.resolve()
        target = (folder / location).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a link loop, a NUL byte in the name
        raise ModelLoadError(f"tensor {tensor.name!r}: external data location {location!r}: {exc}") from None
    if not target.is_relative_to(root):
        raise ModelLoadError(
            f"tensor {tensor.name!r}: external data location {location!r} escapes the model's "
            "folder; refused"
        )
    if not target.is_file():
        raise ModelLoadError(f"tensor {tensor.name!r}: external data file {location!r} is missing")
    try:
        offset = int(entries.get("offset", "0") or 0)
        length = int(entries["length"]) if entries.get("length") else None
    except ValueError:
        raise ModelLoadError(
            f"tensor {tensor.name!r}: external data offset or length is not an integer"
        ) from None
    if offset < 0 or (length is not None and length < 0):
        raise ModelLoadError(f"tensor {tensor.name!r}: negative external data offset or length")
    size = target.stat().st_size
    if offset > size or (length is not None and offset + length > size):
        raise ModelLoadError(
            f"tensor {tensor.name!r}: external data range lies past the end of {location!r} "
            "(truncated file?)"
        )
    return target, offset, length


def _load_external_data(model: onnx.ModelProto, folder: Path) -> bool:
    """Inline the model's external tensors; whether it had any."""
    external = [
        tensor
        for tensor in _model_tensors(model)
        if tensor.data_location == onnx.TensorProto.EXTERNAL
    ]
    # Every location is checked before any file is opened, so a refused model reads nothing.
    places = [_external_file(tensor, folder) for tensor in external]
    for tensor, (target, offset, length) in zip(external, places, strict=True):
        try:
            with open(target, "rb") as handle:
                handle.seek(offset)
                tensor.raw_data = handle.read() if length is None else handle.read(length)
        except OSError as exc:
            raise ModelLoadError(
                f"tensor {tensor.name!r}: cannot read external data {target.name}: {exc.strerror or exc}"
            ) from None
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]
    return bool(external)


def load_model(ref: ModelRef) -> onnx.ModelProto:
    """Parse `ref.path` with its external data inlined; ModelLoadError says why it can't be used."""
    return load_model_and_bytes(ref)[0]


def load_model_and_bytes(ref: ModelRef) -> tuple[onnx.ModelProto, bytes | None]:
    """`load_model`, and the file's bytes where they are the whole model (no external data): serialized
    again they would be the same model, and serializing a large one costs seconds (1.3 s for
    light/vgg19). None where external data was inlined."""
    path = Path(ref.path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelLoadError(f"cannot read {path}: {exc.strerror or exc}") from None
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(
            f"{path.name} is not a valid ONNX protobuf (corrupt or truncated): {exc}"
        ) from None
    # a graph without outputs is valid ONNX (upstream onnxoptimizer's tests build dozens) when the
    # model also declares its opsets, which a writer puts after the graph: a file cut short or
    # bytes that merely parse have none; the sweep skips it as having no outputs to compare
    complete = model.HasField("graph") and len(model.opset_import) > 0
    if not data or not model.HasField("graph") or not (model.graph.output or complete):
        raise ModelLoadError(f"{path.name} has no graph outputs (empty, truncated or not ONNX)")
    if not _load_external_data(model, path.parent):
        return model, data
    return model, None
