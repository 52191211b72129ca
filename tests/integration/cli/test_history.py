"""`ditox-ci history` over eight generated nights, run as a nightly runs it (relative paths, each
night's folder beside the one before), and its page opened in a real headless Chromium: what the
history says is what the nights were, and the page renders its charts with no console error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image

from ditox_ci.report.evidence import KnownBy, KnownSource, Triage
from ditox_ci.report.model import Culprit, Finding, ModelEntry, Report, write_report
from ditox_ci.report.nights_page import HEAT, LINE
from tests.helpers import minimal_report, run_cli

NIGHTS = 8
# fuse_bn_into_conv stops firing on the sixth night; the crash in eliminate_shape_op is there from
# the third night on, and an output mismatch in fuse_consecutive_squeezes is fixed on the fifth
STOPS, CRASH_FROM, MISMATCH_UNTIL = 5, 2, 4


def _finding(fingerprint: str, kind: str, culprit: str, status: str) -> Finding:
    return Finding(
        fingerprint=fingerprint,
        kind=kind,
        model=f"zoo:model-{culprit}",
        config=f"pass:{culprit}",
        culprit=Culprit("pass", (culprit,), "single-pass config"),
        status=status,
        measured={"message": "it differs"},
    )


def _night_report(night: int) -> Report:
    # a warning and a limitation the baseline accepts, every night: no night counts them as bugs
    accepted = _finding("f" * 20, "output-mismatch", "split_init", "known")
    by_design = KnownBy(KnownSource.BASELINE, "split-init-by-design")
    accepted = replace(accepted, triage=Triage(known_by=by_design))
    findings = [_finding("b" * 20, "warning", "eliminate_deadend", "known"), accepted]
    if night >= CRASH_FROM:
        status = "new" if night == CRASH_FROM else "known"
        findings.append(_finding("c" * 20, "optimizer-crash", "eliminate_shape_op", status))
    if night <= MISMATCH_UNTIL:
        findings.append(_finding("d" * 20, "output-mismatch", "fuse_consecutive_squeezes", "known"))
    elif night == MISMATCH_UNTIL + 1:
        findings.append(_finding("d" * 20, "output-mismatch", "fuse_consecutive_squeezes", "fixed"))
    fired = 0 if night >= STOPS else 40
    models = tuple(ModelEntry(id=f"zoo:model-{i}", source="zoo", sha256="") for i in range(100))
    return replace(
        minimal_report(*findings),
        models=models,
        coverage={
            "fuse_bn_into_conv": {"models_changed": fired, "models_checked": 100},
            "eliminate_identity": {"models_changed": 12, "models_checked": 100},
        },
        stats={
            "wall_s": 60.0 + night,
            "effect": {
                "default": {"models_changed": 50, "nodes": -(500 + 10 * fired), "initializers": 0, "bytes": 0}
            },
        },
    )


def _history(tmp_path: Path, *extra: str) -> list[subprocess.CompletedProcess[str]]:
    done = []
    for night in range(NIGHTS):
        folder = tmp_path / f"night{night}"
        write_report(_night_report(night), folder / "report.json")
        previous = ("--previous", f"night{night - 1}") if night else ()
        date = f"2026-11-{10 + night:02d}"
        args = ("history", "--report", f"night{night}", *previous, "--date", date, "--sha", f"{night:040x}")
        env = {**os.environ, "GITHUB_REPOSITORY": "onnx/optimizer"}
        done.append(run_cli(*args, *extra, env=env, cwd=tmp_path))
    return done


def test_each_night_is_carried_forward_as_it_was(tmp_path: Path) -> None:
    runs = _history(tmp_path)
    assert [run.returncode for run in runs] == [0] * NIGHTS, runs[-1].stderr
    assert "no history.json" not in runs[1].stderr and "no history.json" not in runs[-1].stderr
    history = json.loads((tmp_path / f"night{NIGHTS - 1}" / "history.json").read_text())
    nights = history["nights"]
    assert [n["date"] for n in nights] == [f"2026-11-{10 + i:02d}" for i in range(NIGHTS)]
    assert [n["changed"]["fuse_bn_into_conv"] for n in nights] == [40] * STOPS + [0] * (NIGHTS - STOPS)
    assert [n["nodes_removed"] for n in nights] == [900] * STOPS + [500] * (NIGHTS - STOPS)
    crash = [n["bugs"].get("c" * 20, {}).get("status") for n in nights]
    assert crash == [None, None, "new", *["known"] * (NIGHTS - 3)]
    assert nights[MISMATCH_UNTIL + 1]["bugs"]["d" * 20]["status"] == "fixed"
    assert "d" * 20 not in nights[MISMATCH_UNTIL + 2]["bugs"]
    assert not any("b" * 20 in n["bugs"] or "f" * 20 in n["bugs"] for n in nights)
    # a night run again (the same date and commit) replaces itself; --nights bounds the history
    again = run_cli(
        "history",
        "--report",
        "night7",
        "--previous",
        "night7",
        "--date",
        "2026-11-17",
        "--sha",
        f"{7:040x}",
        "--nights",
        "5",
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr
    kept = json.loads((tmp_path / "night7" / "history.json").read_text())["nights"]
    assert [n["date"] for n in kept] == [f"2026-11-{10 + i:02d}" for i in range(3, NIGHTS)]


def test_a_broken_history_is_one_line_and_exit_4(tmp_path: Path) -> None:
    write_report(_night_report(0), tmp_path / "night" / "report.json")
    (tmp_path / "previous").mkdir()
    (tmp_path / "previous" / "history.json").write_text('{"schema_version": 1, "nights": [{"sha": "abc"}]}')
    done = run_cli("history", "--report", "night", "--previous", "previous", cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert "does not follow history.json's form" in done.stderr and "Traceback" not in done.stderr


def test_the_page_says_what_changed_and_carries_nothing_from_outside(tmp_path: Path) -> None:
    _history(tmp_path)
    page = (tmp_path / "night5" / "history.html").read_text()
    # the night fuse_bn_into_conv stopped firing, and what the default passes removed dropped
    assert "<code>fuse_bn_into_conv</code> changed 0 models (the night before: 40)" in page
    assert "the default passes removed 500 nodes (the night before: 900)" in page
    gone = "gone: <code>dddddddddddd</code> output-mismatch, culprit <code>fuse_consecutive_squeezes</code>"
    assert gone in page
    # each bug's first night, and a link to its issue by its fingerprint
    assert "<td>2026-11-12</td>" in page and "issues?q=is%3Aissue+cccccccccccccccccccc" in page
    assert "<script" not in page and 'src="http' not in page and "<link" not in page


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
)


def _pixels(image: np.ndarray, colour: str) -> int:
    rgb = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    return int((np.abs(image[:, :, :3].astype(np.int16) - rgb).max(axis=2) <= 8).sum())


def test_the_page_renders_its_charts_in_a_real_browser_with_no_console_error(tmp_path: Path) -> None:
    assert CHROMIUM is not None, "no Chromium on PATH: `make test` installs Debian's (`make browser`)"
    _history(tmp_path)
    page = tmp_path / "night7" / "history.html"
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            CHROMIUM,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,1600",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []
    image = np.asarray(Image.open(shot).convert("RGB"))
    assert image.shape[:2] == (1600, 1280)
    # the trend lines and sparklines are drawn, and the crash's strip is red from its third night
    # (a strip cell is 9 × 16 pixels: five nights of one open bug each)
    assert _pixels(image, LINE) > 2000
    assert _pixels(image, HEAT[1]) >= 5 * 9 * 16
    assert _pixels(image, HEAT[0]) >= 9 * 16


def test_what_a_report_names_is_text_on_the_page_never_markup(tmp_path: Path) -> None:
    hostile = replace(
        _finding("e" * 20, "output-mismatch", "eliminate_identity", "new"),
        model="<img src=x onerror=alert(1)>",
    )
    write_report(minimal_report(hostile), tmp_path / "night" / "report.json")
    done = run_cli("history", "--report", "night", "--repository", "o/r", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "night" / "history.html").read_text()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
