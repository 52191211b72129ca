"""A second optimizer build beside the one under test: `--base-optimizer SPEC`.

SPEC is either an import path (`pkg.module:function`, `file.py:function`), used as it is, or
anything pip installs: a wheel, a source checkout, a requirement such as `onnxoptimizer==0.4.1`.
An installable SPEC goes with `pip install --no-deps --target` into a folder of its own that the
workers put first on `sys.path`. It is not a whole virtual environment on purpose: the base build
must be judged by the same onnx and ONNX Runtime as the build under test, or a runtime difference
would pass for a PR's regression.

A wheel (by content) and an exact `name==version` pin are installed once per cache; anything else
(an unpinned name, a checkout that may have changed) is installed afresh for each run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ditox_ci.errors import OptimizerLoadError
from ditox_ci.log import Log
from ditox_ci.optimizers import OptimizerInfo, load_optimizer

_PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==[A-Za-z0-9.+!_-]+$")
_COMPLETE = ".ditox-complete"


@dataclass(frozen=True)
class Installation:
    """A base build: the optimizer spec its workers load, the folder they put first on sys.path,
    and what the build says of itself (version, passes, default list)."""

    spec: str
    optimizer: str
    path: str | None
    info: OptimizerInfo

    @property
    def label(self) -> str:
        return f"{self.spec} ({self.info.version})"


def is_import_path(spec: str) -> bool:
    """`pkg.module:function` or `file.py:function`: loaded as it is, nothing to install."""
    return ":" in spec and "://" not in spec and not Path(spec).exists()


def cache_key(spec: str) -> str | None:
    """A key that names exactly one build, or None when the same SPEC may mean another build later."""
    path = Path(spec)
    if path.is_file():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    elif _PINNED.match(spec.strip()):
        digest = hashlib.sha256(spec.strip().encode()).hexdigest()
    else:
        return None
    # a compiled wheel pip picks for one interpreter does not load in another
    return f"{sys.implementation.cache_tag}-{digest[:16]}"


def describe(spec: str, optimizer: str, path: str | None) -> OptimizerInfo:
    """Load the build in a child process (never in this one, which has the build under test
    imported) and read its version and pass lists; a build that does not load fails here, early."""
    done = subprocess.run(
        [sys.executable, "-m", "ditox_ci.optimizers.install", optimizer, path or ""],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        raise OptimizerLoadError(f"--base-optimizer {spec}: {lines[-1]}")
    return OptimizerInfo.from_json(json.loads(done.stdout))


def _pip_install(spec: str, target: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-input",
        "--disable-pip-version-check",
        "--quiet",
        "--target",
        str(target),
        spec,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")] or lines or ["no output"]
        raise OptimizerLoadError(
            f"--base-optimizer: pip could not install '{spec}': {errors[-1]}; "
            "give a wheel path, a source checkout or a requirement pip can resolve"
        )


@contextlib.contextmanager
def base_installation(spec: str, optimizer: str, cache_dir: Path, log: Log) -> Iterator[Installation]:
    """The base build, installed (or found in the cache) for the duration of the block.

    `optimizer` is the spec of the build under test; an installed base provides the same module,
    so the workers load `optimizer` with the base folder first on sys.path.
    """
    if is_import_path(spec):
        yield Installation(spec, spec, None, describe(spec, spec, None))
        return
    root = cache_dir.resolve() / "base-optimizer"
    root.mkdir(parents=True, exist_ok=True)
    key = cache_key(spec)
    target = root / key if key else None
    if target is not None and (target / _COMPLETE).is_file():
        log.info(f"base optimizer {spec}: cached in {target}")
        yield Installation(spec, optimizer, str(target), describe(spec, optimizer, str(target)))
        return
    if target is not None:
        shutil.rmtree(target, ignore_errors=True)  # an install that was killed halfway
    staging = Path(tempfile.mkdtemp(prefix=".install-", dir=root))
    try:
        log.info(f"base optimizer {spec}: pip install --no-deps --target {staging}")
        _pip_install(spec, staging)
        (staging / _COMPLETE).write_text(spec + "\n", encoding="utf-8")
        if target is not None:
            with contextlib.suppress(OSError):  # another run may have won the race: use its copy
                os.replace(staging, target)
        folder = str(target if target is not None else staging)
        yield Installation(spec, optimizer, folder, describe(spec, optimizer, folder))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _describe_main(argv: list[str]) -> int:
    """`python -m ditox_ci.optimizers.install OPTIMIZER [FOLDER]`: the build's info as JSON."""
    try:
        loaded = load_optimizer(argv[0], argv[1] if len(argv) > 1 and argv[1] else None)
    except OptimizerLoadError as exc:
        print(exc, file=sys.stderr)
        return OptimizerLoadError.exit_code
    print(json.dumps(loaded.info.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(_describe_main(sys.argv[1:]))
