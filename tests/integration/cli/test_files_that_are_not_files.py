"""Files that are not files, and a disk that fills (threat model, third round): a FIFO or a device
where a baseline goes is one error line at once, never a hang or exit 70; a write that fails on a
full disk keeps the old file whole, leaves no temporary file, and is exit 4 naming the file."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from ditox_ci.report.model import write_report
from tests.helpers import minimal_report
from tests.integration.github_fixtures import BUG_A, report

# a file size limit stands for a full disk: a write past it fails with EFBIG (SIGXFSZ ignored)
SIZE_LIMIT = 4096


def _cli(
    *args: str, cwd: Path, limit: int | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "ditox_ci", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        preexec_fn=limited if limit is not None else None,
    )


def test_a_fifo_or_a_device_at_the_baseline_is_one_line_at_once(tmp_path: Path) -> None:
    """A FIFO at the baseline path hung publish until the job's timeout; one linked to /dev/zero
    read until MemoryError (exit 70)."""
    path = write_report_file(tmp_path)
    fifo = tmp_path / "fifo.yml"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.yml"
    zero.symlink_to("/dev/zero")
    for baseline in (fifo, zero):
        done = _cli("publish", "--report", str(path), "--baseline", str(baseline), "--dry-run", cwd=tmp_path)
        assert done.returncode == 4, done.stderr
        [line] = [line for line in done.stderr.splitlines() if line.startswith("ditox-ci:")]
        assert f"baseline {baseline} is not a regular file" in line and "Traceback" not in done.stderr


def test_baseline_update_on_a_full_disk_keeps_the_old_baseline_whole(tmp_path: Path) -> None:
    """It wrote in place: a full disk left a 0-byte baseline, which the next run read as valid
    with no entries."""
    path = write_report_file(tmp_path, report(BUG_A))
    baseline = tmp_path / "baseline.yml"
    entry = "- {id: mine, passes: [split_init], reason: " + "r" * (SIZE_LIMIT - 60) + "}"
    old = f"version: 1\nentries:\n{entry}\n"
    baseline.write_text(old)
    args = ("baseline", "update", "--report", str(path), "--baseline", str(baseline))
    done = _cli(*args, cwd=tmp_path, limit=SIZE_LIMIT)
    assert done.returncode == 4, done.stderr
    assert f"cannot write {baseline} (File too large); free some space and run again" in done.stderr
    assert baseline.read_text() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.yml", "r.json"]


def test_a_report_write_on_a_full_disk_is_exit_4_and_leaves_nothing_half_written(tmp_path: Path) -> None:
    """merge's report.json past the disk's room was exit 70 ("a bug in ditox-ci") with its
    temporary file left behind."""
    shard = tmp_path / "shard"
    shard.mkdir()
    long = replace(BUG_A, measured={**BUG_A.measured, "message": "x" * SIZE_LIMIT})
    write_report(report(long), shard / "report.json")
    assert (shard / "report.json").stat().st_size > SIZE_LIMIT
    out = tmp_path / "out"
    done = _cli("merge", str(shard), "--out", str(out), cwd=tmp_path, limit=SIZE_LIMIT)
    assert done.returncode == 4, done.stderr
    assert f"cannot write {out / 'report.json'}" in done.stderr and "free some space" in done.stderr
    assert not out.exists() or list(out.iterdir()) == []


def write_report_file(tmp_path: Path, content: object = None) -> Path:
    path = tmp_path / "r.json"
    write_report(content or minimal_report(), path)
    return path
