"""action.yml runs either this checkout's Dockerfile (main) or, in a release, an image pinned by
its digest: a tag could be moved under users who pinned the release's commit."""

from __future__ import annotations

import re

import yaml

from tests.helpers import ROOT

PINNED_IMAGE = re.compile(r"^docker://ghcr\.io/[\w.-]+/[\w.-]+@sha256:[0-9a-f]{64}$")


def test_action_runs_the_dockerfile_or_an_image_pinned_by_digest() -> None:
    runs = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["runs"]
    assert runs["using"] == "docker"
    assert runs["image"] == "Dockerfile" or PINNED_IMAGE.match(runs["image"]), runs["image"]


def test_the_dockerfile_pins_its_base_by_digest_and_installs_by_hash() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^ARG PYTHON_IMAGE=python:[\w.-]+@sha256:[0-9a-f]{64}$", dockerfile, re.M)
    assert dockerfile.count("--require-hashes") == 2
    assert '"-P"' in dockerfile and "PYTHONSAFEPATH=1" in dockerfile


def _ignore_rules() -> list[tuple[bool, str]]:
    """(excluded?, pattern) per .dockerignore line, in order."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            negated = line.startswith("!")
            rules.append((not negated, line.lstrip("!").strip("/")))
    return rules


def _pattern(glob: str) -> re.Pattern[str]:
    """Docker's pattern syntax: `*` within one path part, `**` across parts."""
    parts = re.split(r"(\*\*/?|\*|\?)", glob)
    table = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(table.get(part, re.escape(part)) for part in parts) + r"\Z")


def _sent_to_the_build(path: str, rules: list[tuple[bool, str]]) -> bool:
    """moby's rule: the last pattern matching the path or one of its parent folders decides."""
    parents = ["/".join(path.split("/")[: i + 1]) for i in range(path.count("/") + 1)]
    excluded = False
    for excludes, glob in rules:
        if any(_pattern(glob).match(candidate) for candidate in parents):
            excluded = excludes
    return not excluded


def _copy_sources() -> list[str]:
    """The build-context sources of every COPY (not COPY --from, which copies between stages)."""
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    sources = []
    for words in (line.split() for line in dockerfile.splitlines() if line.startswith("COPY ")):
        if not any(word.startswith("--from") for word in words):
            sources += [word for word in words[1:-1] if not word.startswith("--")]
    return sources


def test_every_copy_source_survives_the_dockerignore() -> None:
    rules = _ignore_rules()
    sources = _copy_sources()
    assert {"requirements.lock", "models.lock", "ditox_ci", "entrypoint.py"} <= set(sources)
    for source in sources:
        root = ROOT / source
        found = (
            [root]
            if root.is_file()
            else [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        )
        files = [str(path.relative_to(ROOT)) for path in found]
        assert files, f"COPY {source}: nothing there"
        dropped = [name for name in files if not _sent_to_the_build(name, rules)]
        assert not dropped, f".dockerignore drops what the Dockerfile copies: {dropped[:5]}"


def test_the_dockerignore_check_sees_a_dropped_file() -> None:
    rules = [(True, "*"), (False, "ditox_ci"), (True, "**/__pycache__")]
    assert _sent_to_the_build("ditox_ci/sweep/run.py", rules)
    assert not _sent_to_the_build("models.lock", rules)
    assert not _sent_to_the_build("ditox_ci/__pycache__/sweep.cpython-311.pyc", rules)
