"""report.json is strict JSON, written atomically."""

import json
import math
from pathlib import Path

from ditox_ci.report.header import Environment, ShardOf, Tool
from ditox_ci.report.junit import write_junit
from ditox_ci.report.model import Culprit, Finding, Report, read_report, strict_json, write_report
from ditox_ci.report.sarif import write_sarif


def _report(evidence: dict) -> Report:
    finding = Finding("f" * 20, "output-mismatch", "m", "pass:a", Culprit("pass", ("a",)), measured=evidence)
    return Report({}, {}, {}, {"index": 0, "count": 1}, (), (finding,), {}, {"wall_s": math.inf})


def test_non_finite_numbers_are_encoded_so_strict_parsers_read_the_report(tmp_path: Path):
    path = tmp_path / "report.json"
    write_report(_report({"max_abs": math.inf, "max_rel": -math.inf, "nested": [math.nan, 1.5]}), path)

    def refuse(constant: str) -> None:
        raise ValueError(f"bare {constant} in report.json")

    data = json.loads(path.read_text(), parse_constant=refuse)
    evidence = data["findings"][0]["evidence"]
    assert evidence == {"max_abs": "Infinity", "max_rel": "-Infinity", "nested": ["NaN", 1.5]}
    assert data["stats"]["wall_s"] == "Infinity"
    assert read_report(path).findings[0].evidence["nested"] == ["NaN", 1.5]
    assert strict_json({"a": (1.0, math.nan)}) == {"a": [1.0, "NaN"]}


def test_the_report_is_replaced_whole_and_no_partial_file_is_left(tmp_path: Path):
    path = tmp_path / "out" / "report.json"
    write_report(_report({"max_abs": 1.0}), path)
    first = path.stat().st_ino
    write_report(_report({"max_abs": 2.0}), path)
    assert path.stat().st_ino != first  # a new file renamed over the old one, not rewritten in place
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]
    assert path.stat().st_mode & 0o777 == 0o644


def test_sarif_and_junit_replace_a_link_planted_in_out_instead_of_writing_through_it(tmp_path: Path):
    """publish writes them as root into a folder the optimizer under test could reach."""
    target = tmp_path / "outside"
    target.write_text("untouched")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("ditox.sarif", "junit.xml"):
        (out / name).symlink_to(target)
    report = _report({"max_abs": 1.0})
    write_sarif(report, out / "ditox.sarif")
    write_junit(report, out / "junit.xml")
    assert target.read_text() == "untouched"
    assert not (out / "ditox.sarif").is_symlink() and json.loads((out / "ditox.sarif").read_text())["runs"]
    assert not (out / "junit.xml").is_symlink() and "<testsuites" in (out / "junit.xml").read_text()


def test_the_header_and_stats_are_records_whose_json_reads_back_as_it_was_written(tmp_path: Path):
    """tool, environment and shard are records; report.json holds what the writer wrote, an
    environment's key this version does not name included, and no key it did not write."""
    written = {"onnx": "1.23.2", "python": "3.11.7", "cuda": "12.4"}
    stats = {"wall_s": 2.5, "baseline": {"stale": ["x"]}, "newer_key": [1]}
    tool, shard = {"name": "ditox-ci", "version": "9.9"}, {"index": 2, "count": 4}
    report = Report(tool, {"name": "o"}, written, shard, (), (), {}, stats)
    assert report.stats.wall_s == 2.5 and set(report.stats.stages) == {"baseline", "newer_key"}
    assert report.optimizer.name == "o" and report.optimizer.build is None
    assert report.tool == Tool("9.9") and report.shard == ShardOf(2, 4) and not report.shard.whole
    assert report.environment.onnx == "1.23.2" and report.environment.onnxruntime is None
    path = tmp_path / "report.json"
    write_report(report, path)
    data = json.loads(path.read_text())
    assert data["environment"] == written and data["shard"] == {"index": 2, "count": 4}
    assert data["tool"] == {"name": "ditox-ci", "version": "9.9"} and "build" not in data["optimizer"]
    assert {key: data["stats"][key] for key in stats} == stats
    assert read_report(path) == report
    assert Environment.from_json({}).to_json() == {}
