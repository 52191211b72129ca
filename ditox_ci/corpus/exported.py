"""The `exported[:glob]` source: today's models as today's tools write them, shipped in the package.

`ditox_ci/data/exported/` holds each model in ONNX's backend-test layout (`<name>/model.onnx` and
one recorded input set) and `manifest.yml`, which says for each what made it (torch's TorchScript
or dynamo exporter, ONNX Runtime's quantization tool or float16 converter, skl2onnx), its family
and its file's size and sha256. `scripts/exported-models/export.py` made them (`make
exported-models`, in an environment of its own: torch and the others are no dependency of ditox-ci).

A model whose file is not the one the manifest records (an edited installation) is listed with
`meta["unavailable"]`, so a sweep skips it with the reason instead of sweeping another model under
its name.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ditox_ci.corpus import SOURCE_NAMES, CorpusContext, ModelRef, register_source
from ditox_ci.corpus.loading import model_sha256
from ditox_ci.corpus.sources import recorded_inputs_dir
from ditox_ci.errors import ConfigError

FOLDER = Path(__file__).resolve().parent.parent / "data" / "exported"
MANIFEST = FOLDER / "manifest.yml"
_REQUIRED = ("name", "family", "made_by", "opset", "size", "sha256")


@dataclass(frozen=True)
class ExportedModel:
    """One manifest entry."""

    name: str
    family: str
    made_by: str
    opset: int
    size: int
    sha256: str


def load_manifest(path: Path = MANIFEST) -> tuple[dict[str, str], list[ExportedModel]]:
    """The versions the models were made with, and the models; a malformed manifest is a ConfigError."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"exported model manifest {path} is unreadable: {exc}") from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise ConfigError(f"exported model manifest {path} must have a 'models' list")
    entries = []
    for index, raw in enumerate(models):
        missing = [key for key in _REQUIRED if not isinstance(raw, dict) or key not in raw]
        if missing:
            raise ConfigError(f"exported model manifest {path} model #{index}: missing {missing}")
        entries.append(ExportedModel(**{key: raw[key] for key in _REQUIRED}))
    return dict(data.get("made_with") or {}), entries


def _ref(model: ExportedModel, folder: Path) -> ModelRef:
    path = folder / model.name / "model.onnx"
    meta: dict[str, Any] = {"made_by": model.made_by, "sha256": model.sha256, "size": model.size}
    try:
        actual = model_sha256(path)
    except OSError as exc:
        actual = f"unreadable ({exc.strerror or exc})"
    if actual != model.sha256:
        meta["unavailable"] = (
            f"{path} is not the file the manifest records (sha256 {actual[:16]}…, expected "
            f"{model.sha256[:16]}…); reinstall ditox-ci"
        )
    return ModelRef(
        id=f"exported:{model.name}",
        source="exported",
        path=str(path),
        inputs_dir=recorded_inputs_dir(path.parent),
        family=model.family,
        meta=meta,
    )


@register_source("exported")
def exported_models(pattern: str | None, ctx: CorpusContext, folder: Path = FOLDER) -> list[ModelRef]:
    """Every shipped exported model whose name matches `pattern` (a glob; all when None)."""
    _, models = load_manifest(folder / MANIFEST.name)
    return [_ref(m, folder) for m in models if pattern is None or fnmatch.fnmatchcase(m.name, pattern)]


SOURCE_NAMES["exported"] = lambda ctx: [model.name for model in load_manifest()[1]]
