"""What tells two builds of one optimizer apart, when a PR check compares a head and a base.

A head wheel built from a checkout of 0.4.2-and-more calls itself 0.4.2 like the release on PyPI;
a summary that says "onnxoptimizer 0.4.2" for both could be comparing a build with itself. Each
build is identified by its distribution version, a hash of its files (pip's RECORD, which lists
every installed file's sha256; else the optimizer module's own file), `git describe` of the
checkout it was imported from, and a hash of its pass list.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ditox_ci.report.header import OptimizerInfo

GIT_TIMEOUT_S = 10


@dataclass(frozen=True)
class BuildIdentity:
    version: str
    passes_sha256: str
    files_sha256: str = ""
    git_describe: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "version": self.version,
            "passes_sha256": self.passes_sha256,
            "files_sha256": self.files_sha256,
            "git_describe": self.git_describe,
        }

    def label(self) -> str:
        """'0.4.2 (git v0.4.2-37-g96ddf59, files 1a2b3c4d, passes 5e6f7a8b)'"""
        parts = [f"git {self.git_describe}"] if self.git_describe else []
        if self.files_sha256:
            parts.append(f"files {self.files_sha256[:8]}")
        parts.append(f"passes {self.passes_sha256[:8]}")
        return f"{self.version} ({', '.join(parts)})"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _record_hash(distribution: str, search_path: str | None) -> str:
    """sha256 of the distribution's RECORD (every installed file's hash), "" when not installed."""
    try:
        found = importlib.metadata.distributions(name=distribution, path=[search_path]) if search_path else [
            importlib.metadata.distribution(distribution)
        ]
        record = next(iter(found)).read_text("RECORD")
    except (importlib.metadata.PackageNotFoundError, StopIteration):
        return ""
    return _sha256(record.encode()) if record else ""


def _module_file(spec: str, search_path: str | None) -> Path | None:
    """The file an import-path optimizer (`pkg.module:function`, `file.py:function`) comes from."""
    module = spec.rpartition(":")[0]
    if not module:
        return None
    if module.endswith(".py"):
        return Path(module)
    if search_path:  # the base's own folder, never this process's copy
        candidate = Path(search_path, *module.split("."))
        for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if path.is_file():
                return path
        return None
    with contextlib.suppress(ImportError, ValueError):
        found = importlib.util.find_spec(module)
        if found is not None and found.origin and Path(found.origin).is_file():
            return Path(found.origin)
    return None


def _git_describe(folder: Path) -> str:
    """`git describe --tags --always --dirty` of the checkout holding `folder`, "" outside one."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "-C", str(folder), "describe", "--tags", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
        if done.returncode == 0:
            return done.stdout.strip()
    return ""


def identify(info: OptimizerInfo, spec: str, search_path: str | None = None) -> BuildIdentity:
    """The identity of the build `spec` loads (from `search_path` first, for an installed base)."""
    passes = _sha256(json.dumps([list(info.passes), list(info.default_passes)]).encode())
    files = _record_hash(info.distributions[0], search_path) if info.distributions else ""
    module_file = _module_file(spec, search_path)
    if not files and module_file is not None:
        files = _sha256(module_file.read_bytes())
    described = _git_describe(module_file.parent) if module_file is not None and not search_path else ""
    return BuildIdentity(info.version, passes, files, described)


def look_alike(head: BuildIdentity, base: BuildIdentity) -> str | None:
    """A warning when the two builds report one version but are not the same build."""
    if head.version != base.version:
        return None
    differ = [
        what
        for what, mine, theirs in (
            ("pass list", head.passes_sha256, base.passes_sha256),
            ("files", head.files_sha256, base.files_sha256),
        )
        if mine and theirs and mine != theirs
    ]
    if not differ:
        return None
    return (
        f"head and base both report version {head.version} but differ in {' and '.join(differ)}: "
        f"head {head.label()}, base {base.label()}; give the head build its own version "
        "(a local version label such as +pr123) so reports and issues can tell them apart"
    )
