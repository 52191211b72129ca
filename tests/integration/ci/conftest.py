"""Fixtures of the Action's integration tests."""

import sys
from pathlib import Path

import pytest

from tests.integration.ci.action_runs import venv_over_this_env


@pytest.fixture()
def fresh_python(tmp_path: Path) -> str:
    """A venv of its own, so the wheel the Action installs lands there and not in the shared one."""
    return venv_over_this_env(sys.executable, tmp_path / "venv")
