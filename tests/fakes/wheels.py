"""Real wheels of planted optimizer builds, written by hand so tests need no build backend or index.

A wheel is a zip with the package files and a `.dist-info` folder (METADATA, WHEEL, RECORD); pip
installs it like any other.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import subprocess
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

PACKAGE = "planted_opt"

# a planted build's pass lists: the real onnxoptimizer's (its module imports onnxoptimizer)
PASS_LISTS = '''
def get_available_passes():
    return onnxoptimizer.get_available_passes()


def get_fuse_and_elimination_passes():
    return onnxoptimizer.get_fuse_and_elimination_passes()
'''

_SOURCE = '''"""Planted optimizer build {version}: the real onnxoptimizer, except that {bugs} raise."""

import onnxoptimizer

__version__ = "{version}"
BUGS = {bugs!r}
''' + PASS_LISTS + '''

def optimize(model, passes, fixed_point=False):
    broken = sorted(set(BUGS) & set(passes))
    if broken:
        raise RuntimeError(f"planted bug in {{broken[0]}} (build {version})")
    return onnxoptimizer.optimize(model, list(passes), fixed_point)
'''


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write_wheel(folder: Path, name: str, version: str, files: Mapping[str, str | bytes]) -> Path:
    """A wheel of `files` (path in the wheel → text or bytes) tagged py3-none-any, written into
    `folder`."""
    dist = f"{name.replace('-', '_')}-{version}"
    contents = {path: data if isinstance(data, bytes) else data.encode() for path, data in files.items()}
    contents[f"{dist}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    )
    contents[f"{dist}.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: ditox-ci-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [_record_line(path, data) for path, data in contents.items()]
    contents[f"{dist}.dist-info/RECORD"] = (
        "\n".join([*record, f"{dist}.dist-info/RECORD,,"]) + "\n"
    ).encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
    return wheel


def planted_build(folder: Path, version: str, bugs: Iterable[str]) -> Path:
    """A wheel of `planted_opt` whose optimize raises when any pass in `bugs` is asked for."""
    source = _SOURCE.format(version=version, bugs=tuple(sorted(bugs)))
    return write_wheel(folder, "planted-opt", version, {f"{PACKAGE}/__init__.py": source})


def repack_installed(
    folder: Path, distribution: str, package: str, version: str, appended: Mapping[str, str] | None = None
) -> Path:
    """A wheel of the installed `package` (its compiled extension included) whose `version.py` says
    `version`: a report naming that version proves this copy ran, not another one on the path.
    `appended` adds code at the end of files of the package (path in the wheel → text)."""
    installed = importlib.metadata.distribution(distribution)
    files: dict[str, str | bytes] = {}
    for entry in installed.files or ():
        path = str(entry)
        if path.startswith(f"{package}/") and "__pycache__" not in path:
            files[path] = Path(str(entry.locate())).read_bytes()
    files[f"{package}/version.py"] = f"version = {version!r}\n"
    for path, code in (appended or {}).items():
        files[path] = Path(str(installed.locate_file(path))).read_text() + code
    return write_wheel(folder, distribution, version, files)


def _wrapping_native(transform: str) -> str:
    """Code appended to onnxoptimizer/__init__.py that wraps its native module: every result of
    `optimize` and `optimize_fixedpoint` goes through `_transform(data, result, passes)`, which
    `transform` defines (its imports at the top level, named `_…`)."""
    return f"""
{transform}

_native = onnx_opt_cpp2py_export


class _Wrapped:
    def __getattr__(self, name):
        return getattr(_native, name)

    def optimize(self, data, passes):
        return _transform(data, _native.optimize(data, passes), passes)

    def optimize_fixedpoint(self, data, passes):
        return _transform(data, _native.optimize_fixedpoint(data, passes), passes)


onnx_opt_cpp2py_export = C = _Wrapped()
"""


def _wrapped_onnxoptimizer(folder: Path, version: str, transform: str) -> Path:
    code = _wrapping_native(transform)
    return repack_installed(
        folder, "onnxoptimizer", "onnxoptimizer", version, {"onnxoptimizer/__init__.py": code}
    )


# eliminate_identity doubles the model's first initializer: a miscompilation the release installed
# here does not have
MISCOMPILED_PASS = "eliminate_identity"
_MISCOMPILATION = f"""
import onnx as _onnx
from onnx import numpy_helper as _numpy_helper


def _transform(data, result, passes):
    if {MISCOMPILED_PASS!r} not in passes:
        return result
    model = _onnx.ModelProto()
    model.ParseFromString(result)
    for weight in model.graph.initializer[:1]:
        weight.CopyFrom(_numpy_helper.from_array(_numpy_helper.to_array(weight) * 2, weight.name))
    return model.SerializeToString()
"""


def miscompiling_onnxoptimizer(folder: Path, version: str) -> Path:
    """A wheel of the installed onnxoptimizer, as `version`, whose MISCOMPILED_PASS miscompiles: a
    pull request's (or main's) build with a bug the release lacks."""
    return _wrapped_onnxoptimizer(folder, version, _MISCOMPILATION)


# CHANGED_PASS, where it fires (the result holds fewer of the nodes it removes than the model), also
# doubles the first output: a pull request that changes one pass, whose every other result is the
# release's, byte for byte. It is in the default list; OUTSIDE_DEFAULT is a pass that is not.
CHANGED_PASS = "fuse_bn_into_conv"
OUTSIDE_DEFAULT = "replace_einsum_with_matmul"
# the op each changeable pass removes where it fires
REMOVES = {CHANGED_PASS: "BatchNormalization", OUTSIDE_DEFAULT: "Einsum"}
_CHANGE = """
import numpy as _np
import onnx as _onnx
from onnx import helper as _helper
from onnx import numpy_helper as _numpy_helper


def _transform(data, result, passes):
    # the pass list first: counting in a large model's bytes costs a real build nothing it does
    if {changed!r} not in passes:
        return result
    if result.count({removed!r}) >= data.count({removed!r}):
        return result
    model = _onnx.ModelProto()
    model.ParseFromString(result)
    graph = model.graph
    name = graph.output[0].name
    for node in graph.node:
        node.output[:] = [name + "_fused" if out == name else out for out in node.output]
    graph.initializer.append(_numpy_helper.from_array(_np.array(2.0, dtype=_np.float32), "head_two"))
    graph.node.append(_helper.make_node("Mul", [name + "_fused", "head_two"], [name]))
    return model.SerializeToString()
"""


def changed_pass_onnxoptimizer(folder: Path, version: str, changed: str = CHANGED_PASS) -> Path:
    """A wheel of the installed onnxoptimizer, as `version`, whose pass `changed` (one of REMOVES)
    differs where it fires: a pull request's head that changes one pass."""
    transform = _CHANGE.format(changed=changed, removed=REMOVES[changed].encode())
    return _wrapped_onnxoptimizer(folder, version, transform)


def changed_pass_checkout(folder: Path, changed: str = CHANGED_PASS) -> tuple[Path, str]:
    """The sources of the pull request `changed_pass_onnxoptimizer` builds, laid out as onnx/optimizer
    lays them out: a git checkout (`folder`/optimizer) with a header per pass of the installed
    onnxoptimizer (named by its `getPassName`, as there) and the pass manager, committed as the PR's
    base, with the header of `changed` changed since; the checkout and the base commit."""
    import onnxoptimizer

    checkout = folder / "optimizer"
    passes = checkout / "onnxoptimizer" / "passes"
    passes.mkdir(parents=True)
    for name in onnxoptimizer.get_available_passes():
        body = f'  std::string getPassName() const override {{\n    return "{name}";\n  }}\n'
        (passes / f"{name}.h").write_text(f"struct Pass {{\n{body}}};\n")
    (checkout / "onnxoptimizer" / "pass_manager.cc").write_text("// what every pass runs in\n")

    def git(*args: str) -> str:
        command = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t", *args]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "base")
    with (passes / f"{changed}.h").open("a") as header:
        header.write("// changed by the pull request\n")
    return checkout, git("rev-parse", "HEAD")
