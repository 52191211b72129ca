"""Unit tests start no process: the command line's early start of the workers' forkserver is a
no-op here (tests/integration/cli/test_command_line.py starts it for real)."""

from __future__ import annotations

import pytest

import ditox_ci.__main__


@pytest.fixture(autouse=True)
def _no_early_forkserver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ditox_ci.__main__, "warm_up", lambda: None)
