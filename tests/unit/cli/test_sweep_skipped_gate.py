"""The skipped-share gate: a whole sweep is judged by --max-skipped, a shard is not (the merge is)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ditox_ci.cli.sweep import skipped_gate
from ditox_ci.errors import InputError
from ditox_ci.log import Log
from ditox_ci.report.model import ModelEntry
from tests.helpers import minimal_report


def _report(skipped: int, ok: int, limit: float | None = None, count: int = 1):
    models = [ModelEntry(f"s{i}", "t", "", status="skipped", reason="r") for i in range(skipped)]
    models += [ModelEntry(f"o{i}", "t", "") for i in range(ok)]
    stats = {} if limit is None else {"max_skipped": limit}
    return replace(minimal_report(), models=tuple(models), shard={"index": 0, "count": count}, stats=stats)


def test_a_whole_sweep_gates_on_its_skipped_share(capsys: pytest.CaptureFixture[str]) -> None:
    log = Log({})
    for report, gates in ((_report(1, 1, 0.4), True), (_report(1, 1, 0.5), False), (_report(1, 1), False)):
        skipped_gate(report, log, Path("s.md"))
        said = "more than --max-skipped" in capsys.readouterr().err
        assert (said, report.closes_gate()) == (gates, gates)
    with pytest.raises(InputError, match="no model ran: all 2 were skipped"):
        skipped_gate(_report(2, 0), log, Path("s.md"))
    # a merge of shards interrupted before their first model: it exited 0, a green empty sweep
    with pytest.raises(InputError, match="no model ran: the report holds none"):
        skipped_gate(_report(0, 0), log, Path("s.md"))


def test_a_shard_leaves_the_skipped_share_to_the_merge(capsys: pytest.CaptureFixture[str]) -> None:
    """A shard of four may hold only models that skip; 1 % of the whole sweep may be all of it."""
    log = Log({})
    for report in (_report(1, 1, 0.4, count=4), _report(2, 0, 0.4, count=4)):
        skipped_gate(report, log, Path("s.md"))
        assert not report.closes_gate()
    assert "the merge judges the whole sweep" in capsys.readouterr().err
