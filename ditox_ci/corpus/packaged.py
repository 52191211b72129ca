"""The `packaged[:glob]` source: trained ONNX models that ship inside PyPI packages.

`ditox_ci/data/packaged-models.yml` pins each model to a distribution version and the sha256 of
its file. Files are found through the distribution's installed metadata and never imported, so the
packages can be installed without their (heavy) dependencies. A model whose package is missing,
at another version, or whose file does not match its sha256 is still listed, with
`meta["unavailable"]` saying why and how to fix it, so `corpus list` shows what the extra would add
and a sweep reports it as skipped instead of failing.

Run as `python -m ditox_ci.corpus.packaged` to print the pinned requirements, one per line.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ditox_ci.corpus import SOURCE_NAMES, CorpusContext, ModelRef, register_source
from ditox_ci.corpus.loading import model_sha256
from ditox_ci.errors import ConfigError

MANIFEST = Path(__file__).resolve().parent.parent / "data" / "packaged-models.yml"
# without their dependencies (`pip install .[models]` would pull PyTorch and OpenCV for silero-vad
# and rapidocr): only the model files are read
INSTALL_HINT = "python -m ditox_ci.corpus.packaged | pip install --no-deps -r /dev/stdin (or: make models)"
_FIELDS = {
    "name",
    "package",
    "path",
    "sha256",
    "size",
    "task",
    "inputs",
    "input_spec",
    "comparator",
    "comparator_options",
}
_REQUIRED = {"name", "package", "path", "sha256", "task", "comparator"}


@dataclass(frozen=True)
class PackagedModel:
    """One manifest entry."""

    name: str
    distribution: str
    version: str
    path: str
    sha256: str
    task: str
    comparator: str
    size: int = 0
    inputs: str | None = None
    input_spec: dict[str, Any] = field(default_factory=dict)
    comparator_options: dict[str, Any] = field(default_factory=dict)

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


def _entry(raw: Any, where: str) -> PackagedModel:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: each model must be a mapping")
    unknown = sorted(set(raw) - _FIELDS)
    missing = sorted(_REQUIRED - set(raw))
    if unknown or missing:
        raise ConfigError(
            f"{where} ({raw.get('name', '?')}): unknown keys {unknown}, missing keys {missing}"
        )
    distribution, _, version = str(raw["package"]).partition("==")
    if not version:
        raise ConfigError(f"{where} ({raw['name']}): package must be pinned as name==version")
    return PackagedModel(
        name=str(raw["name"]),
        distribution=distribution.strip(),
        version=version.strip(),
        path=str(raw["path"]),
        sha256=str(raw["sha256"]).lower(),
        task=str(raw["task"]),
        comparator=str(raw["comparator"]),
        size=int(raw.get("size", 0)),
        inputs=raw.get("inputs"),
        input_spec=dict(raw.get("input_spec") or {}),
        comparator_options=dict(raw.get("comparator_options") or {}),
    )


def load_manifest(path: Path = MANIFEST) -> list[PackagedModel]:
    """The manifest's models, validated; a malformed manifest is a ConfigError."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"packaged model manifest {path} is unreadable: {exc}") from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise ConfigError(f"packaged model manifest {path} must have a 'models' list")
    entries = [_entry(raw, f"{path} model #{i}") for i, raw in enumerate(models)]
    names = [entry.name for entry in entries]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(f"packaged model manifest {path}: duplicate names {duplicates}")
    return entries


def requirements(models: list[PackagedModel] | None = None) -> list[str]:
    """Pinned requirements of every package the manifest reads, sorted and unique."""
    return sorted({model.requirement for model in models or load_manifest()})


def locate(model: PackagedModel) -> tuple[Path | None, str]:
    """The installed model file, or None and why it cannot be used (with the fix)."""
    try:
        distribution = importlib.metadata.distribution(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        return None, f"package {model.distribution} is not installed; {INSTALL_HINT}"
    if distribution.version != model.version:
        return None, (
            f"{model.distribution} {distribution.version} is installed but the manifest pins "
            f"{model.version}; pip install --no-deps {model.requirement}"
        )
    path = Path(str(distribution.locate_file(model.path)))
    if not path.is_file():
        return None, f"{model.requirement} is installed but has no {model.path}; reinstall it"
    actual = model_sha256(path)
    if actual != model.sha256:
        return None, (
            f"{path} has sha256 {actual[:16]}…, the manifest expects {model.sha256[:16]}…; "
            f"reinstall with pip install --force-reinstall --no-deps {model.requirement}"
        )
    return path, ""


def model_ref(model: PackagedModel) -> ModelRef:
    path, reason = locate(model)
    meta: dict[str, Any] = {
        "package": model.requirement,
        "task": model.task,
        "sha256": model.sha256,
        "size": model.size,
        "input_spec": model.input_spec,
        "comparator_options": model.comparator_options,
    }
    if model.inputs:
        meta["inputs"] = model.inputs
    if reason:
        meta["unavailable"] = reason
    return ModelRef(
        id=f"packaged:{model.name}",
        source="packaged",
        path=str(path) if path else "",
        family=model.task,
        comparator=model.comparator,
        meta=meta,
    )


@register_source("packaged")
def packaged_models(
    pattern: str | None, ctx: CorpusContext, manifest: Path = MANIFEST
) -> list[ModelRef]:
    """Every manifest model whose name matches `pattern` (a glob; all when None)."""
    models = load_manifest(manifest)
    selected = [m for m in models if pattern is None or fnmatch.fnmatchcase(m.name, pattern)]
    return [model_ref(model) for model in selected]


SOURCE_NAMES["packaged"] = lambda ctx: [model.name for model in load_manifest(MANIFEST)]


if __name__ == "__main__":
    print("\n".join(requirements()))
