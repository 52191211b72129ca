"""A planted optimizer with a past, for `ditox-ci bisect`: releases in a folder of wheels, and a
generated git history whose commits build with pip like any checkout.

Every build is `planted_opt`, the real onnxoptimizer with bugs planted per build (`BUGS`, pass →
how): `double` doubles the optimized model's first initializer (an output mismatch), `raise` makes
the call fail, `flaky` doubles it on every other call counted in the file $PLANTED_FLAKY_COUNTER
(the bug shows in half the runs, whichever worker runs them; without that variable, every time).
A commit builds through an in-tree PEP 517 backend that needs nothing from an index; `broken`
commits have a pyproject pip refuses.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from wheels import PACKAGE, PASS_LISTS, write_wheel

_SOURCE = '''"""planted_opt {version}: the real onnxoptimizer, with these passes wrong: {bugs!r}."""

import os

import onnxoptimizer
from onnx import numpy_helper

__version__ = "{version}"
BUGS = {bugs!r}
''' + PASS_LISTS + '''

def _shows(how):
    if how != "flaky" or "PLANTED_FLAKY_COUNTER" not in os.environ:
        return True
    with open(os.environ["PLANTED_FLAKY_COUNTER"], "a+") as counter:
        counter.write(".")
        counter.seek(0)
        return len(counter.read()) % 2 == 1


def optimize(model, passes, fixed_point=False):
    optimized = onnxoptimizer.optimize(model, list(passes), fixed_point)
    for name, how in BUGS.items():
        if name in passes and _shows(how):
            if how == "raise":
                raise RuntimeError(f"planted crash in {{name}}")
            weight = optimized.graph.initializer[0]
            weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 2, weight.name))
    return optimized
'''

# builds a wheel of planted_opt/ with nothing but the standard library
_BACKEND = """import base64, hashlib, zipfile
from pathlib import Path

NAME, VERSION = "planted_opt", "{version}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    dist = f"{{NAME}}-{{VERSION}}"
    files = {{p.as_posix(): p.read_bytes() for p in sorted(Path(NAME).rglob("*.py"))}}
    metadata = f"Metadata-Version: 2.1\\nName: planted-opt\\nVersion: {{VERSION}}\\n"
    files[f"{{dist}}.dist-info/METADATA"] = metadata.encode()
    files[f"{{dist}}.dist-info/WHEEL"] = b"Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    lines = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{{path}},sha256={{digest}},{{len(data)}}")
    lines.append(f"{{dist}}.dist-info/RECORD,,")
    files[f"{{dist}}.dist-info/RECORD"] = ("\\n".join(lines) + "\\n").encode()
    name = f"{{dist}}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / name, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return name
"""

_PYPROJECT = '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
BROKEN_PYPROJECT = "[build-system\nthis is not toml\n"


def source(version: str, bugs: Mapping[str, str]) -> str:
    return _SOURCE.format(version=version, bugs=dict(sorted(bugs.items())))


def release(folder: Path, version: str, bugs: Mapping[str, str]) -> Path:
    """A wheel of planted_opt `version` with `bugs`, written into `folder`."""
    return write_wheel(folder, "planted-opt", version, {f"{PACKAGE}/__init__.py": source(version, bugs)})


def source_release(folder: Path, version: str) -> Path:
    """An sdist of planted_opt `version` and no wheel (as onnxoptimizer's oldest releases are
    for today's Pythons): the index lists it, and pip would have to build it to install it."""
    name = f"planted_opt-{version}"
    archive = folder / f"{name}.tar.gz"
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as sdist:
        for path, text in {
            f"{name}/PKG-INFO": f"Metadata-Version: 2.1\nName: planted-opt\nVersion: {version}\n",
            f"{name}/pyproject.toml": _PYPROJECT,
            f"{name}/backend.py": _BACKEND.format(version=version),
            f"{name}/{PACKAGE}/__init__.py": source(version, {}),
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            sdist.addfile(info, io.BytesIO(data))
    return archive


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "Planted",
        "GIT_AUTHOR_EMAIL": "planted@example.com",
        "GIT_COMMITTER_NAME": "Planted",
        "GIT_COMMITTER_EMAIL": "planted@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(repo),
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def history(repo: Path, commits: Sequence[tuple[str, Mapping[str, str] | None, str]]) -> list[str]:
    """A git repository of planted_opt at `repo`, one commit per (subject, bugs, what): `what` is
    `code` (the package with `bugs`), `docs` (a README change only) or `broken` (a pyproject pip
    refuses; the next `code` commit mends it). Returns the commits' shas, oldest first."""
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for index, (subject, bugs, what) in enumerate(commits):
        version = f"1.0.{index}"
        if what == "docs":
            (repo / "README.md").write_text(f"planted_opt, revised {index} times\n")
        else:
            (repo / PACKAGE).mkdir(exist_ok=True)
            (repo / PACKAGE / "__init__.py").write_text(source(version, bugs or {}))
            (repo / "backend.py").write_text(_BACKEND.format(version=version))
            (repo / "pyproject.toml").write_text(BROKEN_PYPROJECT if what == "broken" else _PYPROJECT)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", subject)
        shas.append(_git(repo, "rev-parse", "HEAD").strip())
    return shas
