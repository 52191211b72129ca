"""The writability probe of --out and --cache-dir: two sweeps sharing a cache folder probe it at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ditox_ci.report.outputs import prepare_out_dir


def test_two_sweeps_probing_one_folder_at_once_both_go_on(tmp_path: Path) -> None:
    """Both wrote and removed `.ditox-write-test`: one removed the other's file, and its sweep
    stopped with "cannot write there (No such file or directory)"."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda _: prepare_out_dir(tmp_path / "cache", "--cache-dir"), range(400)))
    assert done == [tmp_path / "cache"] * 400
    assert list((tmp_path / "cache").iterdir()) == []
