"""The files a pull request changed in a git checkout, read with dulwich: the Action's image has no
git (Debian's would bring perl: some 90 MB installed, against dulwich's 9), and a PR check runs there.

What `git diff --name-only COMMIT` lists: each file the commit's tree or the index holds whose
bytes on disk differ from the commit's (or that one side lacks), so uncommitted edits count; and,
where the build compiles what it finds in a folder (`Compiled`), the files there git does not track. A file
is compared as stored: no clean filter (`.gitattributes` text or LFS conversions) is applied, which
onnx/optimizer's sources have none of; a submodule by the commit the index records. The checkout
is the PR's: a symlink is compared by its target, as git stores it, never followed (one to
/dev/zero would never end), and a folder reached through a symlink holds nothing.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from dulwich.errors import NotGitRepository
from dulwich.index import IndexEntry
from dulwich.objects import Blob, Commit, Tree
from dulwich.objectspec import parse_commit
from dulwich.repo import Repo

# COMMIT~N, COMMIT^ and COMMIT^N, which dulwich's own parser does not take
_ANCESTRY = re.compile(r"(~\d*|\^\d*)$")


class HistoryError(Exception):
    """The checkout cannot say what changed."""


class NoCommit(HistoryError):
    """The checkout lacks the commit (a shallow clone) or an object of its tree."""


def changed_paths(checkout: Path, since: str, compiled: Compiled | None = None) -> tuple[Path, set[str]]:
    """The checkout's root, and the paths (relative to it, in every folder) whose bytes differ between
    commit `since` and the working tree, as `git diff --name-only COMMIT` lists them; a submodule is
    compared by the commit the index records for it, not by what is checked out there. With
    `compiled`, the files git does not track that the build compiles all the same count too.

    Raises NotGitRepository outside a checkout, NoCommit where the history is not there and
    HistoryError where the checkout cannot be read."""
    try:
        with Repo.discover(str(checkout)) as repo:
            before = _tree_paths(repo, _commit(repo, since).tree, "")
            root = Path(repo.path)
            real_root = os.path.realpath(root)
            now: dict[str, bytes | None] = {}
            index = repo.open_index()
            written = os.stat(index.path).st_mtime_ns
            for raw, entry in index.items():
                name = raw.decode(errors="replace")
                if not isinstance(entry, IndexEntry):  # a merge conflict: changed, whatever it holds
                    now[name] = None
                elif entry.mode == _GITLINK:
                    now[name] = entry.sha
                else:
                    now[name] = _current_id(root, real_root, name, entry, written)
            changed = {name for name in before.keys() | now.keys() if now.get(name) != before.get(name)}
            if compiled is not None:
                changed |= compiled.untracked(root, now.keys())
            return root, changed
    except NotGitRepository:
        raise
    except (KeyError, ValueError) as missing:
        raise NoCommit(f"the checkout has no {_named(missing)}") from None
    except Exception as error:  # a damaged checkout: dulwich raises zlib, struct, buffer errors and its own
        raise HistoryError(f"the checkout could not be read: {type(error).__name__}: {error}") from None


@dataclass(frozen=True)
class Compiled:
    """The files a build compiles by where they are, not by a list: below `folder`, with one of
    `suffixes`, tracked or not (CMake's `file(GLOB_RECURSE)`)."""

    folder: str
    suffixes: tuple[str, ...]

    def untracked(self, root: Path, tracked: Collection[str]) -> set[str]:
        """Such files below the checkout at `root` that git does not track, ignored ones too (the
        glob compiles them). A folder reached through a symlink is not entered."""
        top = root / self.folder
        if os.path.realpath(top) != os.path.join(os.path.realpath(root), self.folder):
            return set()
        found = set()
        for folder, _, names in os.walk(top):
            relative = Path(folder).relative_to(root).as_posix()
            found |= {f"{relative}/{name}" for name in names if name.endswith(self.suffixes)}
        return found - set(tracked)


# the mode git gives a submodule's entry: the commit it is at
_GITLINK = 0o160000


def _tree_paths(repo: Repo, tree_id: bytes, prefix: str) -> dict[str, bytes]:
    """{path: object id} of every file, symlink and submodule under the tree, in every folder."""
    found: dict[str, bytes] = {}
    tree = repo[tree_id]
    assert isinstance(tree, Tree)
    for entry in tree.items():
        path = prefix + entry.path.decode(errors="replace")
        if stat.S_ISDIR(entry.mode):
            found.update(_tree_paths(repo, entry.sha, path + "/"))
        else:  # a file, a symlink or a submodule (its commit): by the entry, no blob is read
            found[path] = entry.sha
    return found


def _named(missing: Exception) -> str:
    """What a KeyError names: dulwich's (a ref or sha, bytes) quoted, our own (a parent) as it is."""
    what = missing.args[0] if missing.args else "such commit"
    return repr(what.decode(errors="replace")) if isinstance(what, bytes) else str(what)


def _commit(repo: Repo, spec: str) -> Commit:
    steps: list[str] = []
    while found := _ANCESTRY.search(spec):
        steps.insert(0, found.group(1))
        spec = spec[: found.start()]
    commit = parse_commit(repo, spec)
    for step in steps:
        count = int(step[1:] or 1)
        if step[0] == "~":
            for _ in range(count):
                commit = _parent(repo, commit, 1)
        else:
            commit = _parent(repo, commit, count)
    return commit


def _parent(repo: Repo, commit: Commit, number: int) -> Commit:
    """Parent `number` of the commit (1: the first), the commit itself for 0 (`^0`, as git reads it)."""
    if number == 0:
        return commit
    if not 1 <= number <= len(commit.parents):
        raise KeyError(f"parent {number} of commit {commit.id.decode()[:12]}")
    parent = repo[commit.parents[number - 1]]
    assert isinstance(parent, Commit)
    return parent


def _current_id(root: Path, real_root: str, name: str, entry: IndexEntry, written: int) -> bytes | None:
    """The id of what the working tree holds at `name`: the index's for a file its stat says is the
    one the index hashed (git's own shortcut: same size and modification time, older than the index
    file), else hashed now; None for nothing there, or a file reached through a symlinked folder,
    which is not the checkout's."""
    parent = os.path.dirname(name)
    if os.path.realpath(root / parent) != os.path.normpath(os.path.join(real_root, parent)):
        return None
    path = root / name
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    seconds, nanoseconds = entry.mtime if isinstance(entry.mtime, tuple) else (int(entry.mtime), 0)
    stamp = seconds * 10**9 + nanoseconds
    same = stat.S_ISREG(info.st_mode) and info.st_size == entry.size and info.st_mtime_ns == stamp
    return entry.sha if same and stamp < written else _blob_id(path)


def _blob_id(path: Path) -> bytes | None:
    """The id git gives the file or symlink at `path`; None for nothing there, or anything else."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return Blob.from_string(os.fsencode(os.readlink(path))).id
    return Blob.from_string(path.read_bytes()).id if stat.S_ISREG(mode) else None


__all__ = [
    "Compiled",
    "HistoryError",
    "NoCommit",
    "NotGitRepository",
    "changed_paths",
]
