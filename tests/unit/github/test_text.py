from __future__ import annotations

import re

from ditox_ci.github.text import (
    fingerprint_in,
    fingerprint_marker,
    fit,
    hard_truncate,
    issue_title,
    repro_dir,
)
from ditox_ci.report.model import Culprit, Finding
from ditox_ci.report.text import code, md


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
