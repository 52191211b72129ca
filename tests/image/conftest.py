"""The image tests need the image: `make image-test` builds it and names it in DITOX_IMAGE."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.image.replay import REPOSITORY, TOKEN, Runner
from tests.integration.github_server import GitHubServer

# the optimizer builds the examples' wheel jobs would make: PyPI's manylinux wheels of onnxoptimizer
WHEEL_VERSIONS = ("0.4.2", "0.4.1")


@pytest.fixture(scope="session")
def image() -> str:
    name = os.environ.get("DITOX_IMAGE")
    if not name:
        pytest.fail("no image: run `make image-test`, which builds it and sets DITOX_IMAGE")
    return name


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """version → the cp311 manylinux wheel (the Action's image runs CPython 3.11)."""
    folder = Path(os.environ.get("DITOX_IMAGE_DIR", "/var/tmp/ditox-image")) / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    found = {}
    for version in WHEEL_VERSIONS:
        pattern = f"onnxoptimizer-{version}-cp311-cp311-manylinux*x86_64*.whl"
        if not list(folder.glob(pattern)):
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                 "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
                 f"onnxoptimizer=={version}", "--dest", str(folder)],
                check=True, timeout=300,
            )  # fmt: skip
        (found[version],) = folder.glob(pattern)
    return found


@pytest.fixture
def server() -> Iterator[GitHubServer]:
    with GitHubServer(REPOSITORY) as running:
        # the token the runner hands the Action: an Actions token with the workflow's permissions
        running.tokens[TOKEN] = "write"
        running.identities[TOKEN] = "github-actions[bot]"
        yield running


@pytest.fixture
def runner(
    image: str, server: GitHubServer, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Runner:
    # the runner's user runs the `run:` steps: it must reach the job folders (pytest makes its
    # temporary folders for root alone)
    for folder in (tmp_path, *tmp_path.parents):
        folder.chmod(folder.stat().st_mode | 0o055)
        if folder == tmp_path_factory.getbasetemp():
            break
    return Runner(image, tmp_path, server.url, models=CORPUS)


# Small, and holding one real new bug of onnxoptimizer 0.4.2 (eliminate_consecutive_idempotent_ops
# drops a Reshape whose successor copies dims with 0) besides clean models and known split_* ones.
CORPUS = ",".join(
    [
        "onnx-node:test_group_normalization_example_expanded",
        "onnx-node:test_relu*",
        "onnx-node:test_softmax_example",
        "onnx-node:test_shape_start_1",
        "onnx-node:test_add_bcast",
        "onnx-node:test_matmul_2d",
    ]
)
