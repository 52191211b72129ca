"""Every packaged model through ONNX Runtime (optimizations off), original against itself.

Needs the models extra (`pip install .[models]`); run with `pytest -m packaged_models`.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from ditox_ci.compare import COMPARATORS
from ditox_ci.compare import tasks as _tasks  # noqa: F401  (registers the task comparators)
from ditox_ci.corpus import task_inputs as _task_inputs  # noqa: F401  (registers generators)
from ditox_ci.corpus.inputs import INPUT_GENERATORS
from ditox_ci.corpus.packaged import MANIFEST, load_manifest, model_ref
from ditox_ci.engine import runner

pytestmark = pytest.mark.packaged_models

MODELS = load_manifest(MANIFEST)


@pytest.mark.parametrize("entry", MODELS, ids=[m.name for m in MODELS])
def test_packaged_model_runs_and_its_comparator_passes_against_itself(
    entry, tmp_path: Path
) -> None:
    ref = model_ref(entry)
    assert "unavailable" not in ref.meta, ref.meta.get("unavailable")
    data = Path(ref.path).read_bytes()
    model = onnx.load_from_string(data)
    feeds = INPUT_GENERATORS[ref.meta["inputs"]](model, ref, 2, 1234)
    original = runner.load_session(data)
    again = runner.load_session(data)
    names = [output.name for output in original.get_outputs()]
    expected, actual = runner.run_all(original, feeds), runner.run_all(again, feeds)
    result = COMPARATORS[ref.comparator](ref.meta["comparator_options"])(expected, actual, names)
    assert result.passed, result.message
    assert result.comparator == ref.comparator and result.metrics
