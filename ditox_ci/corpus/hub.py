"""The `hub:<name>[@opset]` source: models from an ONNX Model Hub, verified by sha256 and cached.

The hub is read in the official format (onnx.hub, `ONNX_HUB_MANIFEST.json`: a list of
`{"model", "model_path", "opset_version", "metadata": {"model_sha", "model_bytes", "tags",
"io_ports"}}`). `$DITOX_HUB_URL` points at a mirror: an http(s) URL or a local folder holding the
manifest with the models at their `model_path` below it. Without it the official ONNX Model Zoo is
used (manifest from the repository, model files from its LFS store).

Names match case-insensitively, as in onnx.hub; without `@opset` the highest opset is chosen.
Every file is checked against the manifest's sha256 before it is cached or used: a mismatch is an
InputError, because a model that is not the one named would make every finding on it meaningless.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ditox_ci.corpus import CorpusContext, ModelRef, register_source
from ditox_ci.errors import InputError, UsageError
from ditox_ci.safeload import parse_json

MANIFEST_NAME = "ONNX_HUB_MANIFEST.json"
OFFICIAL_MANIFEST_BASE = "https://raw.githubusercontent.com/onnx/models/main/"
OFFICIAL_MODEL_BASE = "https://media.githubusercontent.com/media/onnx/models/main/"
TIMEOUT_S = 60
# Hub tags that name a task whose comparator fits any model carrying it.
TAG_COMPARATORS = {"classification": "classification"}


@dataclass(frozen=True)
class HubModel:
    name: str
    opset: int
    path: str
    sha256: str  # lower-case hex, checked as the manifest is read
    size: int = 0
    tags: tuple[str, ...] = ()
    io_ports: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HubLocation:
    """Where the manifest and the model files are read from (URL with trailing slash, or folder)."""

    manifest_base: str
    model_base: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HubLocation:
        configured = env.get("DITOX_HUB_URL", "")
        if not configured:
            return cls(OFFICIAL_MANIFEST_BASE, OFFICIAL_MODEL_BASE)
        base = configured if _is_url(configured) else str(Path(configured).expanduser())
        if _is_url(base) and not base.endswith("/"):
            base += "/"
        return cls(base, base)


_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def _is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def _fetch(base: str, relative: str, what: str) -> bytes:
    """The bytes of `relative` below `base`; a missing file or refused request is an InputError."""
    if not _is_url(base):
        path = Path(base) / relative
        try:
            return path.read_bytes()
        except OSError as exc:
            raise InputError(
                f"{what} not found at {path} ({exc.strerror}); fix $DITOX_HUB_URL or the hub folder"
            ) from None
    # imported here: every sweep and its workers import this module, few fetch from a hub URL
    import requests

    url = base + relative
    try:
        response = requests.get(url, timeout=TIMEOUT_S)
    except requests.RequestException as exc:
        raise InputError(
            f"{what}: cannot reach {url} ({type(exc).__name__}); check $DITOX_HUB_URL"
        ) from None
    if response.status_code != 200:
        raise InputError(
            f"{what}: {url} answered HTTP {response.status_code}; check $DITOX_HUB_URL and the name"
        )
    return response.content


def parse_manifest(data: bytes, origin: str) -> list[HubModel]:
    # the manifest comes from outside (a hub URL): read like any untrusted JSON, depth and numbers bounded
    entries = parse_json(data.decode("utf-8", "backslashreplace"), f"hub manifest {origin}", InputError)
    try:
        return [
            HubModel(
                name=str(entry["model"]),
                opset=int(entry["opset_version"]),
                path=str(entry["model_path"]),
                sha256=_checked_sha256(entry),
                size=int(entry["metadata"].get("model_bytes", 0)),
                tags=tuple(entry["metadata"].get("tags", ())),
                io_ports=dict(entry["metadata"].get("io_ports", {})),
            )
            for entry in entries
        ]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InputError(
            f"hub manifest {origin} is not in the ONNX hub format ({type(exc).__name__}: {exc}); "
            "point $DITOX_HUB_URL at a folder or URL holding ONNX_HUB_MANIFEST.json"
        ) from None


def _checked_sha256(entry: dict[str, Any]) -> str:
    """The entry's `metadata.model_sha`: a file is checked against it and named by it, so an entry
    without one, or with anything but 64 hex digits (a '/' would lead the cached name out of its
    folder), is refused."""
    sha = entry["metadata"].get("model_sha")
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
        raise InputError(
            f"hub model {entry['model']}@{entry['opset_version']}: the manifest gives no sha256 "
            f"(metadata.model_sha, got {sha!r:.80}) to check the file against; fix the mirror's manifest"
        )
    return sha.lower()


def read_manifest(location: HubLocation) -> list[HubModel]:
    origin = location.manifest_base.rstrip("/") + "/" + MANIFEST_NAME
    return parse_manifest(_fetch(location.manifest_base, MANIFEST_NAME, "hub manifest"), origin)


def select(models: list[HubModel], name: str, opset: int | None) -> HubModel:
    """onnx.hub's choice: case-insensitive name, the given opset or else the highest one."""
    matching = [m for m in models if m.name.lower() == name.lower()]
    if not matching:
        raise InputError(f"hub has no model named {name!r}; list the manifest for valid names")
    if opset is None:
        return max(matching, key=lambda m: m.opset)
    for model in matching:
        if model.opset == opset:
            return model
    valid = sorted(m.opset for m in matching)
    raise InputError(f"hub model {name!r} has no opset {opset}; valid opsets: {valid}")


def parse_spec(arg: str | None) -> tuple[str, int | None]:
    if not arg:
        raise UsageError("the hub source needs a model name: hub:<name>[@opset], e.g. hub:mnist@8")
    name, _, opset = arg.partition("@")
    if opset and not opset.isdigit():
        raise UsageError(f"hub:{arg}: the opset after '@' must be a number, e.g. hub:mnist@8")
    return name, int(opset) if opset else None


def _checked_model_path(model: HubModel) -> PurePosixPath:
    """The manifest's `model_path`, refused when it is absolute or climbs out (`..`): it names a
    file below the mirror and below the cache, and a hostile manifest must not write elsewhere."""
    path = PurePosixPath(model.path)
    # a backslash or a drive letter would be a separator or a root on Windows
    outside = path.is_absolute() or ".." in path.parts or "\\" in model.path or ":" in model.path
    if outside or not path.name:
        raise InputError(
            f"hub model {model.name}@{model.opset}: model_path {model.path!r} is not a relative path "
            "inside the hub; refusing it (fix the mirror's manifest)"
        )
    return path


def fetch_model(model: HubModel, location: HubLocation, cache_dir: Path) -> Path:
    """The model file in the cache, downloaded and verified if not already there."""
    relative = _checked_model_path(model)
    hub_root = (cache_dir / "hub").resolve()
    folder = cache_dir / "hub" / relative.parent
    stem = relative.name
    if not folder.resolve().is_relative_to(hub_root):  # a symlink in the cache pointing out
        raise InputError(
            f"hub model {model.name}@{model.opset}: cache folder {folder} leads outside {hub_root}; "
            "remove the symlink from the cache"
        )
    cached = folder / f"{model.sha256}_{stem}"
    if cached.is_file() and _sha256(cached.read_bytes()) == model.sha256:
        return cached
    data = _fetch(location.model_base, model.path, f"hub model {model.name}@{model.opset}")
    actual = _sha256(data)
    if actual != model.sha256:
        raise InputError(
            f"hub model {model.name}@{model.opset} has sha256 {actual}, the manifest says "
            f"{model.sha256}; the mirror serves a different file: fix the mirror or its manifest"
        )
    folder.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed, so a concurrent shard never reads a partial file.
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".partial")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.replace(temporary, cached)
    return cached


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@register_source("hub")
def hub_model(
    arg: str | None, ctx: CorpusContext, env: Mapping[str, str] | None = None
) -> list[ModelRef]:
    """`hub:<name>[@opset]` → the one model, cached under `ctx.cache_dir/hub`."""
    name, opset = parse_spec(arg)
    location = HubLocation.from_env(os.environ if env is None else env)
    model = select(read_manifest(location), name, opset)
    path = fetch_model(model, location, ctx.cache_dir)
    comparator = next((TAG_COMPARATORS[t] for t in model.tags if t in TAG_COMPARATORS), None)
    return [
        ModelRef(
            id=f"hub:{model.name}@{model.opset}",
            source="hub",
            path=str(path),
            family="hub",
            comparator=comparator,
            meta={
                "sha256": model.sha256,
                "tags": list(model.tags),
                "io_ports": model.io_ports,
                "model_path": model.path,
            },
        )
    ]
