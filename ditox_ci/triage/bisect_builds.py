"""The builds `ditox-ci bisect` walks: an optimizer's releases, or the commits of a checkout.

- **Releases**: the versions a package index serves for the optimizer's distribution (pip's own
  index, or a folder of wheels: `--find-links`), oldest first, pre-releases aside; each installed
  from a wheel only (a release pip would have to build from source is skipped, said so) into the
  build cache, once per version (`optimizers.install`).
- **Commits**: the first-parent line of a checkout from its older end to its newer, each checked
  out into a worktree of its own (submodules too) and installed the way `--optimizer <checkout>`
  installs, cached by commit: one build per commit, however many bugs and runs ask for it. A
  commit that does not build is skipped, said so.

For a commit a bisection names, `plausibility` reads its diff against the culprit pass's source:
the files that mention the pass's name at that commit (syzbot flags a culprit that touches no code
the crash can run through).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion, Version

from ditox_ci.errors import InputError, OptimizerLoadError
from ditox_ci.log import Log
from ditox_ci.optimizers.install import Installation, optimizer_build
from ditox_ci.report.since import IMPLAUSIBLE, TOUCHES_SHARED_CODE, TOUCHES_THE_PASS, Point

# a release is installed from a wheel: bisecting over releases builds nothing
WHEELS_ONLY = ("--only-binary", ":all:")
_VERSIONS = re.compile(r"^Available versions:\s*(.+)$", re.M)
# what cannot change how an optimizer behaves: its docs, its CI, its tests
_NOT_CODE_DIRS = (".github", ".circleci", ".ci", "docs", "doc", "test", "tests", "examples")
_NOT_CODE_SUFFIXES = (".md", ".rst", ".txt", ".png", ".svg")
_NOT_CODE_NAMES = ("LICENSE", ".gitignore", "CODEOWNERS", ".clang-format", "MANIFEST.in")
_BUILD_FILES = ("CMakeLists.txt",)


def _pip_index_args(find_links: str | None) -> tuple[str, ...]:
    """pip's options for where releases come from: a folder of wheels only, or pip's own index."""
    return ("--no-index", "--find-links", find_links) if find_links else ()


def release_points(distribution: str, find_links: str | None) -> list[Point]:
    """The releases of `distribution` the index serves, oldest first (pip's `index versions`)."""
    command = [sys.executable, "-m", "pip", "index", "versions", distribution, "--disable-pip-version-check"]
    done = subprocess.run(
        [*command, *_pip_index_args(find_links)], capture_output=True, text=True, check=False
    )
    found = _VERSIONS.search(done.stdout)
    if done.returncode != 0 or not found:
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["no output"]
        where = f"the folder {find_links}" if find_links else "the package index"
        raise InputError(f"bisect: cannot list the releases of {distribution} in {where}: {lines[-1]}")
    versions: list[Version] = []
    for text in found.group(1).split(","):
        with contextlib.suppress(InvalidVersion):
            versions.append(Version(text.strip()))
    url = "" if find_links else f"https://pypi.org/project/{distribution}/"
    return [Point(str(v), str(v), f"{url}{v}/" if url else "") for v in sorted(set(versions))]


@contextlib.contextmanager
def release_build(
    distribution: str, point: Point, module: str, find_links: str | None, cache_dir: Path, log: Log
) -> Iterator[Installation]:
    """The release `point` names of `distribution`, installed from a wheel into the build cache."""
    spec = f"{distribution}=={point.ref}"
    pip_args = (*WHEELS_ONLY, *_pip_index_args(find_links))
    try:
        with optimizer_build(spec, cache_dir, log, "bisect", module=module, pip_args=pip_args) as build:
            yield build
    except OptimizerLoadError as exc:
        if "from versions: none" in str(exc) or "No matching distribution" in str(exc):
            raise OptimizerLoadError(f"{spec} has no wheel for this Python and platform") from None
        raise


def _git(checkout: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(checkout), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise InputError("bisect over commits needs git, which is not installed here") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        raise InputError(f"bisect: git {' '.join(args[:2])} in {checkout}: {lines[-1]}")
    return done.stdout


def _commit_url(checkout: Path, repository_url: str | None) -> str:
    """The web address commits link to: `repository_url`, else the checkout's GitHub origin."""
    if repository_url:
        return repository_url.rstrip("/")
    with contextlib.suppress(InputError):
        origin = _git(checkout, "remote", "get-url", "origin").strip()
        found = re.match(r"^(?:https://github\.com/|git@github\.com:)([\w.-]+/[\w.-]+?)(?:\.git)?$", origin)
        if found:
            return f"https://github.com/{found.group(1)}"
    return ""


def commit_points(
    checkout: Path, good: str, bad: str, repository_url: str | None = None
) -> tuple[list[Point], bool]:
    """The commits from the older of `good` and `bad` to the newer along the newer's first-parent
    line, oldest first, each labelled `abc1234 subject`; and whether the bug entered (`good` is
    the older) rather than left."""
    if not (checkout / ".git").exists():
        raise InputError(
            f"bisect: {checkout} is not a git checkout (no .git); give --checkout a clone with history"
        )
    shas = {}
    for name, ref in (("--good", good), ("--bad", bad)):
        try:
            shas[name] = _git(checkout, "rev-parse", "--verify", f"{ref}^{{commit}}").strip()
        except InputError:
            raise InputError(
                f"bisect: {name} {ref} is no commit of {checkout} (a shallow clone? fetch-depth: 0)"
            ) from None
    entered = _is_ancestor(checkout, shas["--good"], shas["--bad"])
    older, newer = (shas["--good"], shas["--bad"]) if entered else (shas["--bad"], shas["--good"])
    if not entered and not _is_ancestor(checkout, older, newer):
        raise InputError(
            f"bisect: {good} and {bad} are not on one line of history; one must be an ancestor of the other"
        )
    listed = _git(checkout, "log", "--first-parent", "--reverse", "--format=%H %s", f"{older}..{newer}")
    first = _git(checkout, "log", "-1", "--format=%H %s", older)
    url = _commit_url(checkout, repository_url)
    points = []
    for line in [first, *listed.splitlines()]:
        sha, _, subject = line.strip().partition(" ")
        points.append(Point(sha, f"{sha[:7]} {subject}", f"{url}/commit/{sha}" if url else ""))
    return points, entered


def _is_ancestor(checkout: Path, older: str, newer: str) -> bool:
    return (
        subprocess.run(
            ["git", "-C", str(checkout), "merge-base", "--is-ancestor", older, newer], check=False
        ).returncode
        == 0
    )


@contextlib.contextmanager
def commit_build(
    checkout: Path, point: Point, module: str, cache_dir: Path, log: Log
) -> Iterator[Installation]:
    """The commit `point` names in `checkout`, installed as `--optimizer <checkout>` installs it,
    cached by commit (the worktree it is built from goes when the block ends)."""
    sha = point.ref
    with tempfile.TemporaryDirectory(prefix="ditox-bisect-") as scratch:
        worktree = Path(scratch) / sha[:12]
        try:
            _git(checkout, "worktree", "add", "--detach", "--force", str(worktree), sha)
            if (worktree / ".gitmodules").is_file():
                _git(worktree, "submodule", "update", "--init", "--recursive")
        except InputError as exc:
            raise OptimizerLoadError(f"{sha[:12]} cannot be checked out: {exc}") from None
        try:
            with optimizer_build(
                str(worktree), cache_dir, log, "bisect", module=module, key=f"commit-{sha}"
            ) as build:
                yield build
        finally:
            with contextlib.suppress(InputError):
                _git(checkout, "worktree", "remove", "--force", str(worktree))
            shutil.rmtree(worktree, ignore_errors=True)


def _is_code(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if name in _BUILD_FILES:
        return True
    if any(part in _NOT_CODE_DIRS for part in parts[:-1]) or name in _NOT_CODE_NAMES:
        return False
    return not (name.endswith(_NOT_CODE_SUFFIXES) or name.startswith("test_"))


def plausibility(checkout: Path, sha: str, passes: Sequence[str]) -> str:
    """Whether commit `sha`'s change (against its first parent) touches the source of `passes`
    (a file that names one of them at that commit), only other code, or no code at all."""
    parent = _git(checkout, "rev-list", "--max-count=1", "--skip=1", "--first-parent", sha).strip()
    changed = _git(checkout, "diff", "--name-only", parent or _empty_tree(checkout), sha).split()
    sources: set[str] = set()
    for name in passes:
        done = subprocess.run(
            ["git", "-C", str(checkout), "grep", "-l", "-w", "-F", name, sha, "--"],
            capture_output=True,
            text=True,
            check=False,
        )
        sources |= {
            line.partition(":")[2] for line in done.stdout.splitlines() if _is_code(line.partition(":")[2])
        }
    if sources & set(changed):
        return TOUCHES_THE_PASS
    return TOUCHES_SHARED_CODE if any(_is_code(path) for path in changed) else IMPLAUSIBLE


def _empty_tree(checkout: Path) -> str:
    return _git(checkout, "hash-object", "-t", "tree", "/dev/null").strip()
