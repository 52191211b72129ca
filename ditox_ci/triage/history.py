"""The files a pull request changed in a git checkout, read with dulwich: the Action's image has no
git (Debian's would bring perl: some 90 MB installed, against dulwich's 9), and a PR check runs there.

What `git diff --name-only COMMIT -- FOLDER` lists, for the files directly in one folder: each file
the commit's tree or the index holds there whose bytes on disk differ from the commit's (or that
one side lacks), so uncommitted edits count. A file is compared as stored: no clean filter
(`.gitattributes` text or LFS conversions) is applied, which a folder of C++ sources has none of.
The checkout is the PR's: a symlink is compared by its target, as git stores it, never followed
(one to /dev/zero would never end), and a folder reached through a symlink holds nothing.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from dulwich.errors import NotGitRepository
from dulwich.objects import Blob, Commit, Tree
from dulwich.objectspec import parse_commit
from dulwich.repo import Repo

# COMMIT~N, COMMIT^ and COMMIT^N, which dulwich's own parser does not take
_ANCESTRY = re.compile(r"(~\d*|\^\d*)$")


class HistoryError(Exception):
    """The checkout cannot say what changed."""


class NoCommit(HistoryError):
    """The checkout lacks the commit (a shallow clone) or an object of its tree."""


def changed_files(checkout: Path, since: str, folder: str) -> set[str]:
    """The names of the files directly in `folder` (relative to the checkout's root) that differ
    between commit `since` (a sha, short sha, ref or tag, with ~N or ^N) and the working tree.

    Raises NotGitRepository outside a checkout, NoCommit where the history is not there and
    HistoryError where the checkout cannot be read."""
    prefix = folder.encode() + b"/"
    try:
        with Repo.discover(str(checkout)) as repo:
            before = _entries(repo, _commit(repo, since).tree, folder)
            tracked = {
                path[len(prefix) :].decode(errors="replace")
                for path in repo.open_index().paths()
                if path.startswith(prefix) and b"/" not in path[len(prefix) :]
            }
            root = Path(repo.path) / folder
            inside = os.path.realpath(root) == os.path.join(os.path.realpath(repo.path), folder)
            now = {name: _blob_id(root / name) if inside else None for name in before.keys() | tracked}
            return {name for name, blob in now.items() if blob != before.get(name)}
    except NotGitRepository:
        raise
    except (KeyError, ValueError) as missing:
        raise NoCommit(f"the checkout has no {_named(missing)}") from None
    except Exception as error:  # a damaged checkout: dulwich raises zlib, struct, buffer errors and its own
        raise HistoryError(f"the checkout could not be read: {type(error).__name__}: {error}") from None


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


def _entries(repo: Repo, tree_id: bytes, folder: str) -> dict[str, bytes]:
    """{name: blob id} of the files directly in `folder` of the tree; {} where it has no such folder."""
    tree = repo[tree_id]
    for part in folder.encode().split(b"/"):
        if not isinstance(tree, Tree) or part not in tree:
            return {}
        tree = repo[tree[part][1]]
    if not isinstance(tree, Tree):
        return {}
    # by the entry's mode, not its object: a partial clone (`filter: blob:none`) has no blobs
    files = (entry for entry in tree.items() if stat.S_ISREG(entry.mode) or stat.S_ISLNK(entry.mode))
    return {entry.path.decode(errors="replace"): entry.sha for entry in files}


def _blob_id(path: Path) -> bytes | None:
    """The id git gives the file or symlink at `path`; None for nothing there, or anything else."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return Blob.from_string(os.fsencode(os.readlink(path))).id
    return Blob.from_string(path.read_bytes()).id if stat.S_ISREG(mode) else None


__all__ = ["HistoryError", "NoCommit", "NotGitRepository", "changed_files"]
