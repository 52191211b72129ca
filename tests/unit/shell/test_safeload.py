"""safeload.read_text: every way a named file can fail to be read is one InputError line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ditox_ci.errors import InputError
from ditox_ci.safeload import read_text


def test_a_readable_file_is_its_text(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text("{}\n", encoding="utf-8")
    assert read_text(tmp_path / "r.json", "report", "run a sweep") == "{}\n"


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("missing.json", None, r"report .*missing\.json does not exist; run a sweep"),
        ("latin1.json", b"\xe9t\xe9", r"report .*latin1\.json is unreadable \(.*utf-8"),
        ("folder", "dir", r"report .*folder is unreadable \(.*Is a directory"),
        ("nul\x00.json", None, r"report .* is unreadable \(embedded null byte\)"),
    ],
    ids=["missing", "not-utf8", "a-folder", "nul-in-path"],
)
def test_each_failure_is_one_input_error(tmp_path: Path, name: str, content: object, says: str) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "dir":
        path.mkdir()
    with pytest.raises(InputError, match=says):
        read_text(path, "report", "run a sweep")
