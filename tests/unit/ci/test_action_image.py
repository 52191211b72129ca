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
