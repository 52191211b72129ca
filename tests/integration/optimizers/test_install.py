"""`--optimizer` takes the forms the Action takes: a wheel is installed by the CLI into a folder of
its own and swept as the optimizer it provides (and described as that copy in the report), from a
relative path, as the README's Action snippet writes it; a missing one is said to be missing."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from wheels import repack_installed

from ditox_ci.log import Log
from ditox_ci.optimizers.install import adapter_lock, cache_key, optimizer_build
from tests.helpers import run_cli


def _relu(folder: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    folder.mkdir()
    onnx.save(model, folder / "relu.onnx")
    return folder


def test_a_wheel_is_installed_and_swept_as_the_optimizer_it_provides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    wheel = repack_installed(tmp_path / "dist", "onnxoptimizer", "onnxoptimizer", "0.4.2+pr7")
    _relu(tmp_path / "models")
    spec = str(wheel.relative_to(tmp_path))
    args = ("sweep", "--optimizer", spec, "--models", "models", "--configs", "default", "--quiet")
    cache = {"DITOX_CACHE": str(tmp_path / "cache")}
    env = {**os.environ, **cache}
    first = run_cli(*args, "--out", "one", env=env)
    assert first.returncode == 0, first.stderr
    report = json.loads((tmp_path / "one" / "report.json").read_text())
    # this copy ran, not the environment's onnxoptimizer 0.4.2
    assert report["optimizer"]["name"] == "onnxoptimizer" and report["optimizer"]["version"] == "0.4.2+pr7"
    # and the build the report describes is that copy: its files are the installed copy's RECORD
    # (as text: pip writes it with CRLF), not the environment's
    (record,) = (tmp_path / "cache" / "builds").glob("*/onnxoptimizer-0.4.2+pr7.dist-info/RECORD")
    environments = importlib.metadata.distribution("onnxoptimizer").read_text("RECORD")
    build = report["optimizer"]["build"]
    assert build["files_sha256"] == hashlib.sha256(record.read_text(encoding="utf-8").encode()).hexdigest()
    assert environments is not None
    assert build["files_sha256"] != hashlib.sha256(environments.encode()).hexdigest()
    assert build["git_describe"] == ""  # an installed copy is not this checkout
    again = run_cli(*args[:-1], "--out", "two", env=env)  # a wheel is installed once per cache
    assert again.returncode == 0 and "cached in" in again.stderr, again.stderr
    gone = "dist/gone-1.0-py3-none-any.whl"
    missing = run_cli("sweep", "--optimizer", gone, "--models", "models", "--quiet", env=env)
    assert missing.returncode == 5
    assert missing.stderr.strip() == (
        f"ditox-ci: error: --optimizer {gone}: no such wheel file (in {tmp_path})"
    )


def test_a_cached_build_that_is_not_what_was_installed_is_installed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared cache folder is anyone's to write: a changed file of a cached build (or a build
    planted under its key) was loaded as if ditox-ci had installed it. A cached build is used
    only when its files are those recorded at its install; else it is installed again."""
    monkeypatch.chdir(tmp_path)
    wheel = repack_installed(tmp_path / "dist", "onnxoptimizer", "onnxoptimizer", "0.4.2+pr7")
    _relu(tmp_path / "models")
    args = ("sweep", "--optimizer", str(wheel), "--models", "models", "--configs", "default", "--quiet")
    env = {**os.environ, "DITOX_CACHE": str(tmp_path / "cache")}
    assert run_cli(*args, "--out", "one", env=env).returncode == 0
    (build,) = (tmp_path / "cache" / "builds").glob("*/onnxoptimizer")
    planted = "raise SystemExit('planted')\n"
    (build / "planted.py").write_text(planted)
    version = next(build.parent.glob("*.dist-info/METADATA"))
    version.write_text(version.read_text().replace("0.4.2+pr7", "0.4.1"))
    again = run_cli(*args, "--out", "two", env=env)
    assert again.returncode == 0, again.stderr
    assert "is not used, 2 file(s) differ from its record" in again.stderr and "cached in" not in again.stderr
    report = json.loads((tmp_path / "two" / "report.json").read_text())
    assert report["optimizer"]["version"] == "0.4.2+pr7"
    assert not (build / "planted.py").exists()  # the folder is the fresh install
    third = run_cli(*args[:-1], "--out", "three", env=env)  # not --quiet: the info line
    assert third.returncode == 0 and "cached in" in third.stderr, third.stderr


def test_a_cache_folder_that_cannot_be_replaced_leaves_the_fresh_install_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Something at the build's place that will not go (here a file where its folder goes): the
    fresh install was deleted and the old one loaded. The fresh install is used for this run."""
    monkeypatch.chdir(tmp_path)
    wheel = repack_installed(tmp_path / "dist", "onnxoptimizer", "onnxoptimizer", "0.4.2+pr8")
    _relu(tmp_path / "models")
    builds = tmp_path / "cache" / "builds"
    builds.mkdir(parents=True)
    (builds / str(cache_key(str(wheel)))).write_text("not a build")
    args = ("sweep", "--optimizer", str(wheel), "--models", "models", "--configs", "default", "--quiet")
    done = run_cli(*args, "--out", "one", env={**os.environ, "DITOX_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "one" / "report.json").read_text())
    assert report["optimizer"]["version"] == "0.4.2+pr8"


@pytest.mark.parametrize("name", ["onnxoptimizer", "onnxruntime-extended", "onnxsim"])
def test_a_builtin_base_is_the_release_ditox_ci_pins_never_one_resolved_now(name: str, tmp_path: Path):
    """`base_optimizer: onnxsim` installed the newest release on PyPI, unpinned and unhashed
    (the threat model says PyPI inputs are pinned by version and hash). A built-in base is its
    adapter's lock (every file's sha256), or the image's own copy where the image has it."""
    log = Log({}, quiet=True)
    with optimizer_build(name, tmp_path / "cache", log, "--base-optimizer", "onnxoptimizer") as base:
        lock = adapter_lock(name)
        if lock is None:
            assert base.path is None and base.optimizer == name
            assert base.info.version == importlib.metadata.version(name.removesuffix("-extended"))
        else:
            pinned = re.search(rf"^{name}==(\S+)", lock.read_text(), re.M)
            assert pinned is not None and base.info.version == pinned.group(1)
            assert base.path is not None and Path(base.path, name).is_dir()
