"""coverage_svg: well-formed heatmap, one cell per pass × family (models changed/checked, each
family's model count in its header), never-fired passes called out, nothing past the canvas."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import replace

import cairosvg
from PIL import Image

from ditox_ci.corpus.exported import load_manifest as load_exported_manifest
from ditox_ci.corpus.node_cases import SHIPPED_INDEX
from ditox_ci.corpus.sources import LIGHT_FAMILY, ONNX_DATA_FAMILIES
from ditox_ci.report.coverage import coverage_svg, never_fired
from ditox_ci.report.model import Report

SVG = "{http://www.w3.org/2000/svg}"


def _report(coverage: dict, by_family: dict | None, checked: dict | None = None) -> Report:
    stats = {"coverage_by_family": by_family} if by_family is not None else {}
    if checked is not None:
        stats["coverage_checked_by_family"] = checked
    return Report(
        tool={},
        optimizer={},
        environment={},
        shard={"index": 0, "count": 1},
        models=(),
        findings=(),
        coverage=coverage,
        stats=stats,
    )


def _cells(svg: str) -> dict[tuple[str, str], int]:
    root = ET.fromstring(svg)
    return {
        (g.get("data-pass"), g.get("data-family")): int(g.get("data-changed"))
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "cell"
    }


def test_one_cell_per_pass_and_family_with_counts() -> None:
    report = _report(
        {
            "fuse_bn_into_conv": {"models_changed": 3, "models_checked": 9},
            "eliminate_identity": {"models_changed": 1, "models_checked": 9},
            "fuse_qkv": {"models_changed": 0, "models_checked": 9},
        },
        {"fuse_bn_into_conv": {"fusions": 3}, "eliminate_identity": {"nops": 1}, "fuse_qkv": {"fusions": 0}},
    )
    cells = _cells(coverage_svg(report))
    assert len(cells) == 3 * 2
    assert cells[("fuse_bn_into_conv", "fusions")] == 3
    assert cells[("fuse_bn_into_conv", "nops")] == 0
    assert cells[("eliminate_identity", "nops")] == 1


def test_never_fired_passes_are_called_out() -> None:
    report = _report(
        {
            "nop": {"models_changed": 0, "models_checked": 4},
            "fuse_qkv": {"models_changed": 2, "models_checked": 4},
        },
        {"nop": {"graphs": 0}, "fuse_qkv": {"fusions": 2}},
    )
    svg = coverage_svg(report)
    assert never_fired(report) == ["nop"]
    root = ET.fromstring(svg)
    callout = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "never-fired"]
    assert callout == ["Never fired: nop"]
    labels = {t.text for t in root.iter(f"{SVG}text") if t.get("class") == "pass"}
    assert labels == {"nop — never fired", "fuse_qkv"}


def _texts(svg: str, kind: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text") if t.get("class") == kind]


def test_each_cell_gives_models_changed_out_of_checked_and_each_header_the_family_s_models() -> None:
    report = _report(
        {
            "fuse_bn_into_conv": {"models_changed": 3, "models_checked": 12},
            "eliminate_identity": {"models_changed": 1, "models_checked": 11},
        },
        {"fuse_bn_into_conv": {"node/nn": 3, "simple": 0}, "eliminate_identity": {"node/nn": 0, "simple": 1}},
        # one model of node/nn was not checked by eliminate_identity (its run of it failed)
        {"fuse_bn_into_conv": {"node/nn": 9, "simple": 3}, "eliminate_identity": {"node/nn": 8, "simple": 3}},
    )
    svg = coverage_svg(report)
    root = ET.fromstring(svg)
    cells = {
        (g.get("data-pass"), g.get("data-family")): (g.get("data-changed"), g.get("data-checked"))
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "cell"
    }
    assert cells == {
        ("fuse_bn_into_conv", "node/nn"): ("3", "9"),
        ("fuse_bn_into_conv", "simple"): ("0", "3"),
        ("eliminate_identity", "node/nn"): ("0", "8"),
        ("eliminate_identity", "simple"): ("1", "3"),
    }
    assert _cells_text(svg) == {"3/9", "0/3", "0/8", "1/3"}
    assert _texts(svg, "family") == ["node/nn (9)", "simple (3)", "all: changed/checked"]
    assert _ink_outside_canvas(svg) == 0


def test_a_report_without_checked_counts_draws_models_changed_alone() -> None:
    """A report written before `coverage_checked_by_family` (or a shard's, merged) still draws."""
    report = _report({"fuse_qkv": {"models_changed": 2, "models_checked": 9}}, {"fuse_qkv": {"fusions": 2}})
    svg = coverage_svg(report)
    assert _cells(svg) == {("fuse_qkv", "fusions"): 2}
    assert _texts(svg, "family") == ["fusions", "all: changed/checked"]


def test_without_family_counts_one_column_from_coverage() -> None:
    report = _report({"fuse_qkv": {"models_changed": 5, "models_checked": 5}}, None)
    assert _cells(coverage_svg(report)) == {("fuse_qkv", "all"): 5}
    assert _texts(coverage_svg(report), "family") == ["all (5)", "all: changed/checked"]
    assert "Never fired" not in coverage_svg(report)


def test_names_are_escaped() -> None:
    report = _report({'a<b&"c': {"models_changed": 0, "models_checked": 1}}, {'a<b&"c': {"<family>": 0}})
    cells = _cells(coverage_svg(report))
    assert cells == {('a<b&"c', "<family>"): 0}


def _cells_text(svg: str) -> set[str]:
    root = ET.fromstring(svg)
    return {
        t.text or "" for g in root.iter(f"{SVG}g") if g.get("class") == "cell" for t in g.iter(f"{SVG}text")
    }


def _ink_outside_canvas(svg: str) -> int:
    """Renders `svg` on a canvas grown by a margin on every side (cairosvg) and counts the painted
    pixels in the margin: text that runs past the canvas, which a viewer would clip."""
    root = ET.fromstring(svg)
    width, height, margin = int(root.get("width")), int(root.get("height")), 200
    grown = svg.replace(
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}"',
        f'width="{width + 2 * margin}" height="{height + 2 * margin}" '
        f'viewBox="{-margin} {-margin} {width + 2 * margin} {height + 2 * margin}"',
        1,
    )
    assert grown != svg
    image = Image.open(io.BytesIO(cairosvg.svg2png(bytestring=grown.encode()))).convert("RGBA")
    alpha = image.getchannel("A")
    inside = (margin, margin, margin + width, margin + height)
    painted = sum(alpha.histogram()[1:])
    return painted - sum(alpha.crop(inside).histogram()[1:])


def test_nothing_runs_past_the_canvas_when_rendered() -> None:
    long_pass = "eliminate_nop_monotone_argmax_with_a_much_longer_name_than_any_real_pass"
    silent = [f"never_fired_pass_{i}" for i in range(40)]
    coverage = {name: {"models_changed": 0, "models_checked": 2047} for name in [long_pass, *silent]}
    coverage["fuse_bn_into_conv"] = {"models_changed": 1234, "models_checked": 2047}
    families = {"onnx-node", "light", "a-family-with-a-long-name-and-<markup>&"}
    by_family = {name: dict.fromkeys(families, 0) for name in coverage}
    by_family["fuse_bn_into_conv"] = {
        "onnx-node": 1200,
        "light": 30,
        "a-family-with-a-long-name-and-<markup>&": 4,
    }
    checked = {name: dict.fromkeys(families, 2047) for name in coverage}
    svg = coverage_svg(_report(coverage, by_family, checked))
    assert "1200/2047" in _cells_text(svg)
    assert _ink_outside_canvas(svg) == 0
    # the check sees clipping: the same picture on a canvas 100 px narrower has ink outside it
    root = ET.fromstring(svg)
    width, height = int(root.get("width")), int(root.get("height"))
    narrow = svg.replace(
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}"',
        f'width="{width - 100}" height="{height}" viewBox="0 0 {width - 100} {height}"',
        1,
    )
    assert _ink_outside_canvas(narrow) > 0


def test_the_last_column_gives_each_pass_its_denominator_and_a_legend_says_what_colours_count() -> None:
    report = _report(
        {
            "fuse_qkv": {"models_changed": 2, "models_checked": 9},
            "nop": {"models_changed": 0, "models_checked": 9},
        },
        {"fuse_qkv": {"fusions": 2}, "nop": {"fusions": 0}},
    )
    root = ET.fromstring(coverage_svg(report))
    totals = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "total"]
    assert totals == ["2/9", "0/9"]
    assert len([r for r in root.iter(f"{SVG}rect") if r.get("class") == "legend"]) == 6


def test_a_default_sweep_s_picture_has_a_column_per_family_and_fits_its_canvas() -> None:
    """The default corpus is onnx-node (its families from the shipped index), onnx-data and exported
    (its families from its manifest)."""
    cases = json.loads(SHIPPED_INDEX.read_text())["cases"]
    families = Counter(case["family"] for case in cases) + Counter(dict.fromkeys(ONNX_DATA_FAMILIES, 50))
    families[LIGHT_FAMILY] = 9
    families += Counter(model.family for model in load_exported_manifest()[1])
    passes = [f"a_pass_named_like_eliminate_consecutive_idempotent_ops_{i}" for i in range(48)]
    coverage = {name: {"models_changed": 1, "models_checked": families.total()} for name in passes}
    changed = {name: {family: i % 3 for family in families} for i, name in enumerate(passes)}
    checked = {name: dict(families) for name in passes}
    svg = coverage_svg(_report(coverage, changed, checked))
    assert len(_texts(svg, "family")) == len(families) + 1 <= 18
    assert _ink_outside_canvas(svg) == 0


def test_a_pass_that_cannot_fire_here_is_labelled_so_never_silent_and_the_footer_counts_all():
    """A fuzz run makes no config for a pass that cannot fire (SwiGluFusion is not in its table);
    a sweep's single configs do (BiasSoftmaxFusion is): both are counted under the picture."""
    coverage = {
        "BiasSoftmaxFusion": {"models_changed": 0, "models_checked": 4},
        "ConvBNFusion": {"models_changed": 2, "models_checked": 4},
    }
    report = _report(coverage, {"BiasSoftmaxFusion": {"node/nn": 0}, "ConvBNFusion": {"node/nn": 2}})
    inert = {"BiasSoftmaxFusion": "matches only an Add on CUDA", "SwiGluFusion": "CUDA only"}
    report = replace(report, optimizer={"name": "onnxruntime-extended", "cannot_fire": inert})
    svg = coverage_svg(report)
    assert _texts(svg, "pass") == ["BiasSoftmaxFusion — cannot fire here", "ConvBNFusion"]
    footer = " ".join(t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text"))
    assert "1 of 2 passes changed at least one model." in footer and "2 cannot fire here" in footer
    assert "Never fired" not in footer and never_fired(report) == []
