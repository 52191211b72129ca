"""What a pull request changed, by pass, in a checkout of onnx/optimizer.

Each pass is defined in `onnxoptimizer/passes/` under the name its `getPassName()` returns
(`split.h` defines two, `split_init` and `split_predict`). A pass file may include the folder's
helpers (`pass_util.h`, whose code is in `pass_util.cc`). So a changed file there changes:
- the passes it defines;
- the passes of every file that includes it, directly or through other headers of the folder.

A changed file anywhere else changes what every pass shares: the pass manager, the Python binding,
the build, the onnx submodule. Files the build does not read (`NOT_BUILT`: docs, tests, workflows)
change nothing.

The sweep uses this twice in a PR check. The changed passes are exercised (`triage.exercise`). A
pass the PR leaves unchanged that left a model as the control did in the stored report is not
called again (`engine.reuse`, the carried steps). Everything is read from the working tree as the PR
has it (`triage.history`, no git needed).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ditox_ci.log import Log
from ditox_ci.triage.history import Compiled, HistoryError, NoCommit, NotGitRepository, changed_paths

# where the passes of onnx/optimizer live in its checkout
PASS_FOLDER = "onnxoptimizer/passes"
PASS_SOURCE = re.compile(r"^(?P<stem>\w+)\.(?:h|hpp|cc|cpp)$")
_PASS_NAME = re.compile(r'getPassName\s*\(\s*\)[^{;]*\{\s*return\s+"(\w+)"')
_INCLUDE = re.compile(r'#\s*include\s+"' + PASS_FOLDER + r'/([\w.]+)"')
# files the build of the optimizer does not read
NOT_BUILT = re.compile(
    r"^(?:\.github/|docs/|examples/|tests/|onnxoptimizer/test/|LICENSES/)"
    r"|\.md$"
    r"|^(?:LICENSE|REUSE\.toml|\.gitignore|\.clang-format)$"
)
# what the build compiles whether git tracks it or not: onnx/optimizer's CMakeLists.txt globs
# `onnxoptimizer/*.cc` and `*.h` (file(GLOB_RECURSE)), so an untracked source there is built in
COMPILED = Compiled("onnxoptimizer", (".cc", ".h"))
# a pass file larger than this is not read for its names and includes (onnx/optimizer's largest is
# some 20 kB); it then counts as changing what every pass shares
MAX_SOURCE_BYTES = 1 << 20


@dataclass(frozen=True)
class Impact:
    """What changed since commit `since`: every changed file; the passes whose own source (or a
    helper it includes) changed, in the optimizer's order; and the changed files every pass
    shares (none: the other passes are built from the same code as before)."""

    since: str
    files: tuple[str, ...]
    passes: tuple[str, ...]
    shared: tuple[str, ...]

    def changes(self, passes: Iterable[str]) -> bool:
        """Whether a pass list may act otherwise than on the build at `since`."""
        return bool(self.shared) or not set(self.passes).isdisjoint(passes)

    def to_json(self) -> dict[str, Any]:
        return {
            "since": self.since,
            "files": len(self.files),
            "passes": list(self.passes),
            "shared": list(self.shared),
        }


@dataclass(frozen=True)
class _Source:
    names: frozenset[str]
    includes: frozenset[str]


def _read_sources(root: Path) -> dict[str, _Source] | None:
    """Each file's names and the files it includes, in the checkout's pass folder; none where the
    folder is not the checkout's (reached through a symlink); None when a file cannot be read as
    source (too large, not a regular file)."""
    sources: dict[str, _Source] = {}
    folder = root / PASS_FOLDER
    if os.path.realpath(folder) != os.path.join(os.path.realpath(root), PASS_FOLDER) or not folder.is_dir():
        return sources
    for entry in os.scandir(folder):
        found = PASS_SOURCE.match(entry.name)
        if found is None:
            continue
        info = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SOURCE_BYTES:
            return None
        text = Path(entry.path).read_text(errors="replace")
        # a file that names no pass (a helper, or a pass written otherwise) is named by its stem
        names = frozenset(_PASS_NAME.findall(text)) or frozenset({found["stem"]})
        sources[entry.name] = _Source(names, frozenset(_INCLUDE.findall(text)))
    return sources


def passes_changed(changed: Collection[str], sources: Mapping[str, _Source]) -> set[str]:
    """The passes `changed` (file names in the pass folder) change: those the files define, those of
    the files that include them, directly or not; a helper's `.cc` changes what includes its `.h`."""
    touched = set(changed)
    touched |= {f"{found['stem']}.h" for name in changed if (found := PASS_SOURCE.match(name))}
    while more := {name for name, source in sources.items() if touched & source.includes} - touched:
        touched |= more
    names: set[str] = set()
    for name in touched:
        source = sources.get(name)
        found = PASS_SOURCE.match(name)
        if source is not None:
            names |= source.names
        elif name in changed and found is not None:  # a deleted file: named by its stem
            names.add(found["stem"])
    return names


def impact_of(checkout: Path, since: str | None, passes: Collection[str], log: Log) -> Impact | None:
    """What changed between commit `since` and the checkout at `checkout`, for the optimizer's
    `passes`.

    Quietly None where that cannot be known: no commit given, not a git checkout. A checkout that
    lacks the commit (a shallow clone) is said once, since fetching more history is the fix."""
    if not since:
        return None
    try:
        root, files = changed_paths(checkout, since, COMPILED)
    except NotGitRepository:
        return None
    except HistoryError as error:
        fix = "; a shallow checkout needs the base commit (actions/checkout with fetch-depth: 0)"
        fix = fix if isinstance(error, NoCommit) else ""
        log.info(f"passes changed since {since} not looked up ({error}){fix}")
        return None
    sources = _read_sources(root)
    prefix = PASS_FOLDER + "/"
    in_folder = {name.removeprefix(prefix): name for name in files if name.startswith(prefix)}
    pass_files = {short for short in in_folder if "/" not in short and PASS_SOURCE.match(short)}
    own = {in_folder[short] for short in pass_files} if sources is not None else set()
    shared = sorted(name for name in files if not NOT_BUILT.search(name) and name not in own)
    changed = passes_changed(pass_files, sources or {})
    ordered = tuple(name for name in passes if name in changed)
    return Impact(since, tuple(sorted(files)), ordered, tuple(shared))
