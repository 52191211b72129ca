"""coverage_svg: well-formed heatmap, one cell per pass × family, never-fired passes called out."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ditox_ci.report.coverage import coverage_svg, never_fired
from ditox_ci.report.model import Report

SVG = "{http://www.w3.org/2000/svg}"


def _report(coverage: dict, by_family: dict | None) -> Report:
    stats = {"coverage_by_family": by_family} if by_family is not None else {}
    return Report(tool={}, optimizer={}, environment={}, shard={"index": 0, "count": 1},
                  models=(), findings=(), coverage=coverage, stats=stats)


def _cells(svg: str) -> dict[tuple[str, str], int]:
    root = ET.fromstring(svg)
    return {
        (g.get("data-pass"), g.get("data-family")): int(g.get("data-changed"))
        for g in root.iter(f"{SVG}g") if g.get("class") == "cell"
    }


def test_one_cell_per_pass_and_family_with_counts() -> None:
    report = _report(
        {"fuse_bn_into_conv": {"models_changed": 3, "models_checked": 9},
         "eliminate_identity": {"models_changed": 1, "models_checked": 9},
         "fuse_qkv": {"models_changed": 0, "models_checked": 9}},
        {"fuse_bn_into_conv": {"fusions": 3}, "eliminate_identity": {"nops": 1},
         "fuse_qkv": {"fusions": 0}},
    )
    cells = _cells(coverage_svg(report))
    assert len(cells) == 3 * 2
    assert cells[("fuse_bn_into_conv", "fusions")] == 3
    assert cells[("fuse_bn_into_conv", "nops")] == 0
    assert cells[("eliminate_identity", "nops")] == 1


def test_never_fired_passes_are_called_out() -> None:
    report = _report(
        {"nop": {"models_changed": 0, "models_checked": 4},
         "fuse_qkv": {"models_changed": 2, "models_checked": 4}},
        {"nop": {"graphs": 0}, "fuse_qkv": {"fusions": 2}},
    )
    svg = coverage_svg(report)
    assert never_fired(report) == ["nop"]
    root = ET.fromstring(svg)
    callout = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "never-fired"]
    assert callout == ["Never fired: nop"]
    labels = {t.text for t in root.iter(f"{SVG}text") if t.get("class") == "pass"}
    assert labels == {"nop — never fired", "fuse_qkv"}


def test_without_family_counts_one_column_from_coverage() -> None:
    report = _report({"fuse_qkv": {"models_changed": 5, "models_checked": 5}}, None)
    assert _cells(coverage_svg(report)) == {("fuse_qkv", "all"): 5}
    assert "Never fired" not in coverage_svg(report)


def test_names_are_escaped() -> None:
    report = _report({"a<b&\"c": {"models_changed": 0, "models_checked": 1}},
                     {"a<b&\"c": {"<family>": 0}})
    cells = _cells(coverage_svg(report))
    assert cells == {('a<b&"c', "<family>"): 0}
