"""Which optimizer an installed build is."""

from __future__ import annotations

from pathlib import Path

import pytest

from ditox_ci.errors import OptimizerLoadError
from ditox_ci.optimizers.install import provided_optimizer


def _installed(folder: Path, *imports: str) -> Path:
    for name in imports:
        (folder / name).mkdir(parents=True)
        (folder / f"{name}-1.0.dist-info").mkdir()
    return folder


def test_a_package_that_is_two_optimizers_is_the_build_under_tests_level_else_the_plainest(
    tmp_path: Path,
) -> None:
    """ONNX Runtime's wheel is `onnxruntime` and `onnxruntime-extended`: a base build follows the
    head's level; on its own it is the basic level (it was always the extended one)."""
    folder = _installed(tmp_path, "onnxruntime")
    assert provided_optimizer(folder, "ort.whl", "--optimizer", None) == "onnxruntime"
    assert provided_optimizer(folder, "ort.whl", "--base-optimizer", "onnxruntime") == "onnxruntime"
    extended = provided_optimizer(folder, "ort.whl", "--base-optimizer", "onnxruntime-extended")
    assert extended == "onnxruntime-extended"
    assert provided_optimizer(_installed(tmp_path / "o", "onnxoptimizer"), "o.whl", "--optimizer", None) == (
        "onnxoptimizer"
    )


def test_a_build_of_two_known_optimizers_or_none_is_refused_without_a_fallback(tmp_path: Path) -> None:
    with pytest.raises(OptimizerLoadError, match="more than one"):
        provided_optimizer(_installed(tmp_path / "two", "onnxsim", "onnxslim"), "x", "--optimizer", None)
    with pytest.raises(OptimizerLoadError, match="none of them"):
        provided_optimizer(_installed(tmp_path / "none", "mine"), "x", "--optimizer", None)
    assert provided_optimizer(tmp_path / "none", "x", "--base-optimizer", "mine:optimize") == "mine:optimize"
