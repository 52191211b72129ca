"""A named source with nothing to offer here fails the sweep instead of passing for swept (the
image without the packaged models swept nothing of `packaged` and went green)."""

from __future__ import annotations

import pytest

from ditox_ci.corpus import ModelRef
from ditox_ci.errors import InputError
from ditox_ci.sweep.plan import require_every_named_source


def _ref(name: str, source: str, unavailable: str = "") -> ModelRef:
    meta = {"unavailable": unavailable} if unavailable else {}
    path = "" if unavailable else f"/m/{name}.onnx"
    return ModelRef(id=f"{source}:{name}", source=source, path=path, meta=meta)


def test_a_named_source_whose_every_model_is_unavailable_is_an_input_error() -> None:
    refs = [
        _ref("relu", "onnx-node"),
        _ref("silero", "packaged", "silero-vad==6.2.3 is not installed; run `make models`"),
        _ref("magika", "packaged", "magika==1.0.3 is not installed; run `make models`"),
    ]
    with pytest.raises(InputError, match=r"'packaged:\*' has nothing to sweep here: silero-vad"):
        require_every_named_source(refs, ["onnx-node", "packaged:*"])


def test_a_source_with_one_model_to_sweep_or_a_folder_passes() -> None:
    refs = [_ref("silero", "packaged", "not installed"), _ref("magika", "packaged"), _ref("a", "models")]
    require_every_named_source(refs, ["packaged", "models"])
