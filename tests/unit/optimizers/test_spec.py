"""One reading of an optimizer spec for the CLI, the Action and `reduce`: its kind, or an error
that names what is wrong (a missing file says it is missing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ditox_ci.errors import OptimizerLoadError
from ditox_ci.optimizers.spec import parse_spec

WHEEL = "onnxoptimizer-0.4.2-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / WHEEL).write_bytes(b"")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "my-opt.py").write_text("def optimize(m, p, f): return m\n")
    (tmp_path / "checkout").mkdir()
    (tmp_path / "checkout" / "setup.py").write_text("")
    (tmp_path / "plain").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ("onnxoptimizer", "builtin"),
        ("onnxsim", "builtin"),
        ("my_pkg.sub:optimize", "import"),
        ("tools/my-opt.py:optimize", "import"),
        (f"dist/{WHEEL}", "wheel"),
        ("checkout", "source"),
        ("./checkout", "source"),
        ("onnxoptimizer==0.3.13", "requirement"),
        ("onnxoptimizer>=0.4", "requirement"),
        ("git+https://example.invalid/onnx/optimizer@main", "requirement"),
        ("opt @ https://example.invalid/opt-1.0-py3-none-any.whl", "requirement"),
    ],
)
def test_each_form_has_one_kind(workspace: Path, spec: str, kind: str) -> None:
    parsed = parse_spec(spec)
    assert parsed.kind == kind
    assert parsed.installed == (kind in ("wheel", "source", "requirement"))


@pytest.mark.parametrize(
    ("spec", "release"),
    [
        ("onnxoptimizer", True),
        ("onnxoptimizer==0.3.13", True),
        ("onnxoptimizer>=0.4", True),
        (f"dist/{WHEEL}", False),  # main's wheel says 0.4.2 too: not the release of that number
        ("checkout", False),
        ("git+https://example.invalid/onnx/optimizer@main", False),
        ("opt @ https://example.invalid/opt-1.0-py3-none-any.whl", False),
        ("my_pkg.sub:optimize", False),
    ],
)
def test_a_release_is_what_an_index_serves_by_name_and_version(
    workspace: Path, spec: str, release: bool
) -> None:
    assert parse_spec(spec).a_release is release


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("dist/missing-0.1-py3-none-any.whl", "no such wheel file"),
        ("dist/pr.whl", "no such wheel file"),
        ("tools/gone.py:optimize", "no such file tools/gone.py"),
        ("plain", "not a source checkout"),
        ("./nothing-here", "no such file or folder"),
        ("not a spec!", "not an optimizer spec"),
        ("", "empty"),
        # a bare name pip would take from PyPI: a typo would install whatever is published under it
        ("onnxsimm", r"not a built-in optimizer \(did you mean onnxsim\?\); .*\(onnxsimm==X\.Y\)"),
        ("my_pkg.opt", "not a built-in optimizer; .* or give an import path pkg.module:function"),
    ],
)
def test_what_is_wrong_is_said(workspace: Path, spec: str, says: str) -> None:
    with pytest.raises(OptimizerLoadError, match=says) as error:
        parse_spec(spec, "--base-optimizer")
    assert str(error.value).startswith("--base-optimizer")
    assert error.value.exit_code == 5


def test_a_renamed_wheel_is_refused_before_pip_sees_it(workspace: Path) -> None:
    (workspace / "dist" / "pr.whl").write_bytes(b"")
    with pytest.raises(OptimizerLoadError, match="not a wheel file name"):
        parse_spec("dist/pr.whl")


def test_what_is_loaded_is_what_was_checked(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`~/opt.py:optimize` from a config or an input passed the check, then was loaded as
    `<cwd>/~/opt.py`; a padded built-in name was checked stripped and installed padded."""
    monkeypatch.setenv("HOME", str(workspace))
    (workspace / "opt.py").write_text("def optimize(model, passes, fixed_point):\n    return model\n")
    assert parse_spec("~/opt.py:optimize\n").text == f"{workspace}/opt.py:optimize"
    assert parse_spec(" onnxsim\n").text == "onnxsim"
    # a checkout named like a built-in stays a path: as `onnxoptimizer` it was the installed release
    (workspace / "onnxoptimizer").mkdir()
    (workspace / "onnxoptimizer" / "pyproject.toml").write_text("[project]\nname = 'onnxoptimizer'\n")
    for path in ("./onnxoptimizer", "./onnxoptimizer/", "./checkout"):
        again = parse_spec(parse_spec(path).text)
        assert (again.kind, again.text) == ("source", path)
