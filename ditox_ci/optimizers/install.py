"""Optimizer builds that ditox-ci installs itself: `--optimizer SPEC` and `--base-optimizer SPEC`
when SPEC is a wheel, a source checkout or a pip requirement (`ditox_ci.optimizers.spec` decides).

Such a build goes with `pip install --no-deps --target` into a folder of its own that the workers
put first on `sys.path`. It is not a whole virtual environment on purpose: both builds must be judged
by the same onnx and ONNX Runtime, or a runtime difference would pass for a PR's regression. Which
optimizer the build provides is read from what it installed (an `onnxoptimizer` package is swept as
onnxoptimizer, an `onnxsim` one as onnxsim, …).

A wheel (by content) and an exact `name==version` pin are installed once per cache; anything else
(an unpinned name, a checkout that may have changed) is installed afresh for each run. A cached
build is used only when its files are those recorded when it was installed (`_COMPLETE`: every
file's sha256): a folder planted in a shared cache, swapped files, or an install killed halfway
is installed afresh, with a warning. In the
Action this runs in the sweep stage: as the workspace's owner, with no credential in its
environment, so a checkout's `setup.py` can read no token and leaves nothing owned by root.
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
from ditox_ci.optimizers import ADAPTERS, load_optimizer
from ditox_ci.optimizers.spec import parse_spec
from ditox_ci.report.header import OptimizerInfo

_PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==[A-Za-z0-9.+!_-]+$")
# a finished install's record: its spec and every file's sha256 (bytecode caches aside)
_COMPLETE = ".ditox-complete"
_BYTECODE = "__pycache__"


@dataclass(frozen=True)
class Installation:
    """An optimizer build: the optimizer spec its workers load, the folder they put first on
    sys.path (None: as installed here), and what the build says of itself (version, passes)."""

    spec: str
    optimizer: str
    path: str | None
    info: OptimizerInfo

    @property
    def label(self) -> str:
        return f"{self.spec} ({self.info.version})"


# A built-in adapter's packages beyond the image's own, hashed (the image has ONNX Runtime's already)
ADAPTER_LOCKS = Path(__file__).resolve().parent.parent / "data" / "adapters"


def adapter_lock(spec: str) -> Path | None:
    """The lock of built-in optimizer `spec`'s release (what the Action installs as root for
    `optimizer: <spec>`, and what `--base-optimizer <spec>` installs); None when the image has it."""
    lock = ADAPTER_LOCKS / f"{spec}.lock"
    return lock if spec in ADAPTERS and lock.is_file() else None


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


def _files(folder: Path) -> dict[str, str]:
    """Every file below `folder` by relative path, with its sha256; bytecode caches and the
    record itself left out (Python writes the caches when it imports the build)."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and _BYTECODE not in path.parts and path.name != _COMPLETE
    }


def _record(folder: Path, spec: str) -> None:
    (folder / _COMPLETE).write_text(json.dumps({"spec": spec, "files": _files(folder)}), encoding="utf-8")


def _unchanged(folder: Path) -> str | None:
    """Why the cached build in `folder` is not the one installed there (None: it is): no record,
    or files added, gone or changed since. Its bytecode caches go first: a planted `.pyc` whose
    header matches its source would be loaded in the source's place."""
    try:
        recorded = json.loads((folder / _COMPLETE).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return "it has no record of its files (an install killed halfway, or from an older ditox-ci)"
    for cache in [p for p in folder.rglob(_BYTECODE) if p.is_dir()]:
        shutil.rmtree(cache, ignore_errors=True)
    found = _files(folder)
    differ = {name for name in found if recorded.get(name) != found[name]}
    changed = sorted(set(found) ^ set(recorded) | differ)
    return f"{len(changed)} file(s) differ from its record, e.g. {changed[0]}" if changed else None


def describe(spec: str, optimizer: str, path: str | None, flag: str = "--optimizer") -> OptimizerInfo:
    """Load the build in a child process (never in this one, which may have another build of the
    same module imported) and read its version and pass lists; a build that does not load fails
    here, early. `-B`: nothing is written into the build's folder."""
    done = subprocess.run(
        [sys.executable, "-B", "-m", "ditox_ci.optimizers.install", optimizer, path or ""],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        raise OptimizerLoadError(f"{flag} {spec}: {lines[-1]}")
    return OptimizerInfo.from_json(json.loads(done.stdout))


def _pip_install(spec: str, target: Path, flag: str, pip_args: tuple[str, ...] = ()) -> None:
    """pip installs `spec` into `target`: a requirement, wheel or checkout, or (a path ending in
    `.lock`) a built-in adapter's lock, every file's sha256 checked; `pip_args` go before it."""
    source = ["--require-hashes", "-r", spec] if spec.endswith(".lock") else [spec]
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
        *pip_args,
        *source,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")] or lines or ["no output"]
        raise OptimizerLoadError(
            f"{flag}: pip could not install '{spec}': {errors[-1]}; "
            "give a wheel path, a source checkout or a requirement pip can resolve"
        )


# the import name each built-in optimizer's distribution installs → the optimizers of that name,
# the plainest first (ONNX Runtime's package is both `onnxruntime` and `onnxruntime-extended`)
_PROVIDED: dict[str, tuple[str, ...]] = {"onnxoptimizer": ("onnxoptimizer",)} | {
    imports: tuple(name for name, adapter in ADAPTERS.items() if adapter.imports == imports)
    for imports in dict.fromkeys(adapter.imports for adapter in ADAPTERS.values())
}


def provided_optimizer(folder: Path, spec: str, flag: str, fallback: str | None) -> str:
    """The built-in optimizer a build installed into `folder` provides (`fallback`, the build
    under test's, when it installed none ditox-ci knows: a base build of a custom optimizer). A
    package that is more than one optimizer (ONNX Runtime at two levels) is the build under test's
    one of them, else the plainest."""
    provided = [_PROVIDED[p.name] for p in folder.iterdir() if p.name in _PROVIDED]
    if len(provided) == 1:
        return fallback if fallback in provided[0] else provided[0][0]
    if fallback is not None:
        return fallback
    names = sorted(p.name for p in folder.iterdir() if not p.name.endswith((".dist-info", ".egg-info")))
    raise OptimizerLoadError(
        f"{flag} {spec}: it installs {', '.join(names) or 'nothing'}, and ditox-ci knows "
        f"{'more than one' if provided else 'none'} of them as an optimizer; install it yourself and "
        "name its function: pkg.module:function"
    )


@contextlib.contextmanager
def optimizer_build(
    text: str,
    cache_dir: Path,
    log: Log,
    flag: str = "--optimizer",
    module: str | None = None,
    key: str | None = None,
    pip_args: tuple[str, ...] = (),
) -> Iterator[Installation]:
    """The build `text` names, installed (or found in the cache) for the duration of the block.

    A built-in name or an import path is loaded as it is. For `--base-optimizer`, a built-in name
    is that optimizer's release as ditox-ci pins it, never resolved at run time: its adapter's lock
    (every file's sha256), or the image's own copy (onnxoptimizer, ONNX Runtime: requirements.lock
    pins them with their hashes); `module` (the build under test's optimizer) is what a base build
    of a custom optimizer provides. `key` names exactly one build where the spec cannot (a
    checkout of a commit: `commit-<sha>`), so it is cached; `pip_args` are pip's own options (a
    release installed from wheels only, from a folder of them).
    """
    spec = parse_spec(text, flag)
    text = spec.text  # what was checked is what is loaded or installed
    if spec.kind == "import" or (spec.kind == "builtin" and module is None):
        info = describe(text, text, None, flag) if module is not None else load_optimizer(text).info
        yield Installation(text, text, None, info)
        return
    named = text
    if spec.kind == "builtin":
        lock = adapter_lock(text)
        if lock is None:  # the image's own release, which requirements.lock pins with its hashes
            yield Installation(text, text, None, describe(text, text, None, flag))
            return
        named = str(lock)

    def installed(folder: Path) -> Installation:
        optimizer = text if spec.kind == "builtin" else provided_optimizer(folder, text, flag, module)
        return Installation(text, optimizer, str(folder), describe(text, optimizer, str(folder), flag))

    root = cache_dir.resolve() / "builds"
    root.mkdir(parents=True, exist_ok=True)
    key = cache_key(named) if key is None else f"{sys.implementation.cache_tag}-{key}"
    target = root / key if key else None
    if target is not None and target.is_dir():
        why_not = _unchanged(target)
        if why_not is None:
            log.info(f"{flag} {text}: cached in {target}")
            yield installed(target)
            return
        log.warning(f"{flag} {text}: the cached build in {target} is not used, {why_not}; installing again")
        shutil.rmtree(target, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=".install-", dir=root))
    try:
        log.info(f"{flag} {text}: pip install --no-deps --target {staging} {named}")
        _pip_install(named, staging, flag, pip_args)
        _record(staging, text)
        used = staging
        if target is not None:
            try:
                os.replace(staging, target)
                used = target
            except OSError:  # another run won the race, or the old folder would not go: this install
                pass
        yield installed(used)
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
