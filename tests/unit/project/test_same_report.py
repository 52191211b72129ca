"""scripts/same_report.py: the refactor check says "the same" only when nothing but timings moved."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ditox_ci.report.model import Culprit, Finding
from tests.helpers import ROOT, minimal_report

_spec = importlib.util.spec_from_file_location("same_report", ROOT / "scripts" / "same_report.py")
assert _spec and _spec.loader
same_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(same_report)


def _report() -> dict:
    culprit = Culprit("pass", ("p",))
    finding = Finding("f1", "output-mismatch", "m.onnx", "pass:p", culprit, "new", {"elapsed_s": 1.5})
    return minimal_report(finding).to_json()


def _write(folder: Path, name: str, data: dict) -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_timings_and_checkout_paths_are_not_differences(tmp_path: Path, capsys) -> None:
    before = _report()
    after = json.loads(json.dumps(before))
    before["stats"].update(wall_s=10.0, cache_hits=3, baseline={"sources": ["/a/x/baseline-default.yml"]})
    after["stats"].update(wall_s=99.5, cache_hits=7, baseline={"sources": ["/b/baseline-default.yml"]})
    assert same_report.main([str(_write(tmp_path, "a", before)), str(_write(tmp_path, "b", after))]) == 0
    assert "the same apart from timings" in capsys.readouterr().out


def test_a_changed_finding_is_a_difference_with_its_path(tmp_path: Path, capsys) -> None:
    before = _report()
    after = json.loads(json.dumps(before))
    after["findings"][0]["kind"] = "optimizer-crash"
    assert same_report.main([str(_write(tmp_path, "a", before)), str(_write(tmp_path, "b", after))]) == 1
    out = capsys.readouterr().out
    assert "findings/0/kind:" in out and '+ "optimizer-crash"' in out


def test_a_missing_report_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert same_report.main([str(tmp_path / "none.json"), str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No such file" in err
