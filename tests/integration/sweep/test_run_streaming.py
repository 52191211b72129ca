"""A sweep that streams: models finish as it goes, so a cancel keeps them and the progress moves.

One corpus shaped like the default one (the operator cases, small shipped models, four large
`light` networks that dominate the cost, the packaged models; about 36 s on 2 idle cores), swept
whole once to learn how long it takes, then again and cancelled after a third of that time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

CORPUS = (
    "onnx-node",
    "onnx-data:[sp]*",
    "onnx-data:light/inception_v1",
    "onnx-data:light/inception_v2",
    "onnx-data:light/densenet121",
    "onnx-data:light/resnet50",
    "packaged",
)
STATUS = re.compile(r"^\s+(\d+)/(\d+) models in \d+s(?:, parts (\d+)/\d+)?")

pytestmark = pytest.mark.slow


class Sweep:
    """`ditox-ci sweep` in a subprocess, each stderr line stamped with its seconds since the start."""

    def __init__(self, cache: Path, out: Path):
        command = [sys.executable, "-m", "ditox_ci", "sweep", "--models", *CORPUS, "--jobs", "2"]
        command += ["--localize", "off", "--reduce-budget", "0", "--cache-dir", str(cache), "--out", str(out)]
        # every pass on its own: screened, resnet50 takes a quarter of its time and the corpus 29 s
        command += ["--screen", "off"]
        env = {key: value for key, value in os.environ.items() if key != "GITHUB_ACTIONS"}
        self.started = time.monotonic()
        self.process = subprocess.Popen(command, env={**env, "CI": "true"}, stderr=subprocess.PIPE, text=True)
        self.lines: list[tuple[float, str]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append((time.monotonic() - self.started, line.rstrip("\n")))

    def wait(self) -> float:
        self.process.wait(timeout=600)
        self.reader.join(timeout=10)
        return time.monotonic() - self.started

    def first_progress_s(self) -> float | None:
        """When the log first said a model or a part had finished."""
        for at, line in self.lines:
            match = STATUS.match(line)
            if match and (int(match.group(1)) or int(match.group(3) or 0)):
                return at
        return None


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, Sweep]:
    """The whole sweep once, on models already unpacked: that is paid once per machine, not per run."""
    cache = tmp_path_factory.mktemp("cache")
    listing = ["corpus", "list", "--models", *CORPUS, "--cache-dir", str(cache)]
    subprocess.run([sys.executable, "-m", "ditox_ci", *listing], check=True, capture_output=True, timeout=300)
    whole = Sweep(cache, tmp_path_factory.mktemp("whole") / "out")
    wall_s = whole.wait()
    assert whole.process.returncode in (0, 1), "\n".join(line for _, line in whole.lines[-20:])
    return cache, wall_s, whole


def test_the_corpus_takes_at_least_30_s_and_progress_shows_in_its_first_tenth(
    full_run: tuple[Path, float, Sweep],
) -> None:
    _, wall_s, whole = full_run
    assert wall_s >= 30, f"the corpus swept in {wall_s:.0f} s: too short to say anything about streaming"
    first = whole.first_progress_s()
    assert first is not None and first <= 0.1 * wall_s, (first, wall_s)


def test_a_cancel_after_a_third_of_the_run_keeps_at_least_a_quarter_of_the_models(
    full_run: tuple[Path, float, Sweep], tmp_path: Path
) -> None:
    cache, wall_s, _ = full_run
    cancelled = Sweep(cache, tmp_path / "out")
    time.sleep(max(0.0, cancelled.started + wall_s / 3 - time.monotonic()))
    cancelled.process.send_signal(signal.SIGTERM)
    cancelled.wait()

    assert cancelled.process.returncode == 128 + signal.SIGTERM
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    planned = report["stats"]["models_planned"]
    assert report["stats"]["interrupted_by"] == "SIGTERM"
    kept = len(report["models"])
    assert kept >= planned / 4, f"{kept} of {planned} models after {wall_s / 3:.0f} s"
