from __future__ import annotations

import re
from dataclasses import replace

from ditox_ci.github.text import (
    fingerprint_in,
    fingerprint_marker,
    fit,
    hard_truncate,
    issue_title,
    repro_dir,
    sticky_marker,
)
from ditox_ci.report.model import Culprit, Finding
from ditox_ci.report.render import environment
from ditox_ci.report.text import code, link_target, md
from tests.helpers import minimal_report


def test_md_neutralises_html_mentions_links_and_bidi():
    text = md("<b>x</b> @octocat [a](http://e) #12 line\nbreak \u202eevil\x1b[31m")
    assert "<b>" not in text and "\\<b\\>" in text
    assert "@octocat" not in text and "@\u200boctocat" in text
    assert "\\[a\\]\\(http" in text and "\\#\u200b12" in text
    assert "\n" not in text and "\u202e" not in text and "\x1b" not in text


def test_untrusted_text_cannot_become_a_link_or_a_cross_reference():
    hostile = "see https://evil.example/x, WWW.evil.com, GH-12, gh-3, #123, octo/repo#4, ftp://h"
    for text in (md(hostile), issue_title(Finding("f" * 16, "warning", hostile, "c", Culprit("unknown")))):
        assert not re.search(r"(?i)[a-z]://|www\.|gh-\d|#\d", text), text
    # what people read is unchanged but for invisible zero-width spaces
    assert md(hostile).replace("\u200b", "").replace("\\", "") == hostile


def test_code_fence_cannot_be_closed_from_inside():
    block = code("a\n````\n@here\r\nb")
    fence = block.splitlines()[0]
    assert set(fence) == {"`"} and len(fence) == 5
    inner = block.splitlines()[1:-1]
    assert all(not line.startswith(fence) for line in inner) and "\r" not in block
    assert "@\u200bhere" in block


def test_markers_round_trip_and_cannot_be_forged_into_comments():
    assert fingerprint_in("x\n" + fingerprint_marker("abc123") + "\ny") == "abc123"
    forged = fingerprint_marker("a --> <b>")
    assert forged.count("-->") == 1 and forged.endswith(" -->") and "<b>" not in forged


def test_repro_dir_only_accepts_plain_relative_paths():
    def f(repro):
        return Finding("f", "warning", "m", "c", Culprit("unknown"), repro=repro)

    assert repro_dir(f("repro/abc/")) == "repro/abc"
    assert [repro_dir(f(r)) for r in ("../x", "/etc", "a; rm -rf ~", None)] == [None] * 4


def test_fit_keeps_under_the_limit_with_fewest_cuts():
    def render_with(shown):
        return "head\n" + "".join(f"item {i} " + "x" * 90 + "\n" for i in range(shown)) + "tail\n"

    text = fit(render_with, 100, 1000, "see artifact")
    assert len(text) <= 1000 and text.endswith("tail\n")
    shown = len(re.findall("item", text))
    assert shown >= 1 and len(render_with(shown + 1)) > 1000


def test_hard_truncate_closes_fences_and_details():
    text = "<details>\n```\n" + "line\n" * 500
    cut = hard_truncate(text, 300, "see artifact")
    assert len(cut) <= 300 and cut.count("```") == 2 and "</details>" in cut
    assert cut.rstrip().endswith("see artifact_")


def test_a_link_target_cannot_close_its_link_or_open_another():
    """A pass name from a fork's report (or an optimizer's pass list) went raw into `[source](…)`:
    `x) ![i](https://evil.example/p.png` made a live image from any host under the bot's name."""
    hostile = "https://github.com/onnx/optimizer/blob/v0.4.2/passes/x) ![i](https://evil.example/p.png"
    target = link_target(hostile)
    assert target.startswith("https://github.com/onnx/optimizer/blob/v0.4.2/passes/x")
    assert not set("()[]<> !\"'`\n") & set(target)
    assert link_target("javascript:alert(1)") == "" and link_target("../../etc") == ""


def test_a_pass_name_that_is_no_identifier_makes_no_source_link():
    hostile = "x) ![i](https://evil.example/p.png"
    report = minimal_report()
    report = replace(report, optimizer=replace(report.optimizer, version="0.4.2"))

    def culprit_linked(name: str) -> str:
        finding = Finding("f" * 16, "output-mismatch", "m", "default", Culprit("pass", (name,)))
        page = '{% import "_macros.md.j2" as m with context %}{{ m.culprit_linked(f) }}'
        return environment().from_string(page).render(f=finding, report=report)

    linked = culprit_linked("fuse_bn_into_conv")
    source = "https://github.com/onnx/optimizer/blob/v0.4.2/onnxoptimizer/passes/fuse_bn_into_conv.h"
    assert f"([source]({source}))" in linked
    for name in (hostile, "../../x"):
        text = culprit_linked(name)
        assert "[source]" not in text and "](" not in text, text


def test_comment_keys_that_differ_only_in_punctuation_are_two_comments():
    """`ditox (ort)` and `ditox [ort]` made one marker (each character a marker cannot hold became
    `_`): two publishing jobs edited one comment in turn. A plain key keeps its marker."""
    assert sticky_marker("ditox (ort)") != sticky_marker("ditox [ort]")
    assert sticky_marker("default") == "<!-- ditox-ci:sticky key=default -->"
    assert sticky_marker("x" * 81) != sticky_marker("x" * 82)
    forged = sticky_marker("a --> <b>")
    assert forged.count("-->") == 1 and "<b>" not in forged
