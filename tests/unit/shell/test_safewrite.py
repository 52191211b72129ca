"""Writes as root follow no link (threat model: a process the optimizer left behind swaps the out
folder for a link before publish): a link at the file is replaced, a link on the way refused."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import pytest

from ditox_ci.ci.action import write_outputs
from ditox_ci.errors import InputError
from ditox_ci.log import Log
from ditox_ci.report.model import write_text_atomic
from ditox_ci.safewrite import append_bytes


def test_a_link_at_the_file_is_replaced_and_its_target_left_alone(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / "junit.xml").symlink_to(victim)
    write_text_atomic(out / "junit.xml", "<testsuites/>")
    assert victim.read_text() == "keep"
    assert not (out / "junit.xml").is_symlink() and (out / "junit.xml").read_text() == "<testsuites/>"
    assert oct((out / "junit.xml").stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("depth", [0, 1], ids=["out-is-a-link", "a-folder-above-is-a-link"])
def test_a_linked_folder_on_the_way_is_refused_and_nothing_is_written_there(
    tmp_path: Path, depth: int
) -> None:
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    (tmp_path / "ws").mkdir()
    link = tmp_path / "ws" / "out"
    link.symlink_to(elsewhere)
    target = link / "ditox.sarif" if depth == 0 else link / "nested" / "ditox.sarif"
    (elsewhere / "nested").mkdir()
    with pytest.raises(OSError) as refused:
        write_text_atomic(target, "{}")
    assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR)
    assert sorted(p.name for p in elsewhere.rglob("*")) == ["nested"]


def test_a_relative_path_is_walked_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_text_atomic(Path("out/deeper/report.json"), "{}")
    assert (tmp_path / "out" / "deeper" / "report.json").read_text() == "{}"
    assert not [name for name in os.listdir(tmp_path / "out" / "deeper") if name.startswith(".")]


def test_an_append_follows_no_link_at_the_name_and_never_waits_on_a_fifo(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    runner_files = tmp_path / "file_commands"
    runner_files.mkdir()
    summary = runner_files / "step_summary"
    append_bytes(summary, b"one\n")
    append_bytes(summary, b"two\n")
    assert summary.read_text() == "one\ntwo\n"

    summary.unlink()
    summary.symlink_to(victim)  # what a process left behind by the optimizer (the runner's user) may do
    with pytest.raises(OSError) as refused:
        append_bytes(summary, b"planted")
    assert refused.value.errno == errno.ELOOP and victim.read_text() == "keep"

    summary.unlink()
    os.mkfifo(summary)  # opened for writing with no reader, a plain open would block the job
    with pytest.raises(OSError) as refused:
        append_bytes(summary, b"planted")
    assert refused.value.errno == errno.ENXIO
    reader = os.open(summary, os.O_RDONLY | os.O_NONBLOCK)  # with a reader it opens: still refused
    try:
        with pytest.raises(OSError, match="not a regular file"):
            append_bytes(summary, b"planted")
        assert os.read(reader, 16) == b""  # nothing was written to it
    finally:
        os.close(reader)


def test_an_append_as_root_follows_no_link_on_the_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder above the runner's file swapped for a link: root's walk refuses it. The walk needs
    no privilege, so it is tested as root whoever runs the tests (CI runs them as a plain user)."""
    runner_files = tmp_path / "file_commands"
    runner_files.mkdir()
    (tmp_path / "linked").symlink_to(runner_files)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(OSError) as refused:
        append_bytes(tmp_path / "linked" / "step_summary", b"planted")
    assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR)
    assert list(runner_files.iterdir()) == []
    append_bytes(runner_files / "step_summary", b"kept")  # the path itself is walked as root
    assert (runner_files / "step_summary").read_bytes() == b"kept"


def test_the_step_summary_and_the_outputs_file_are_not_written_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "summary").symlink_to(victim)
    (tmp_path / "outputs").symlink_to(victim)
    env = {"GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), "GITHUB_OUTPUT": str(tmp_path / "outputs")}
    err = io.StringIO()
    log = Log(env, stream=err)
    log.summary("## comment")
    log.summary("## more")
    assert victim.read_text() == "keep"
    assert err.getvalue().count("was not written") == 1, err.getvalue()
    with pytest.raises(InputError, match=r"cannot write .*outputs"):
        write_outputs({"new": "1"}, env)
    assert victim.read_text() == "keep"
