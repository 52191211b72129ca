"""Which passes a PR touched, read from a real git checkout of an optimizer's sources."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ditox_ci.log import Log
from ditox_ci.triage.exercise import changed_passes

PASSES = ("eliminate_identity", "fuse_bn_into_conv", "nop")


def git(checkout: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def optimizer_checkout(root: Path) -> tuple[Path, str]:
    """A checkout laid out like onnx/optimizer, and its first commit (the PR's base)."""
    checkout = root / "optimizer"
    passes = checkout / "onnxoptimizer" / "passes"
    passes.mkdir(parents=True)
    for name in PASSES:
        (passes / f"{name}.h").write_text(f"// {name}\n")
    (checkout / "README.md").write_text("optimizer\n")
    git(checkout, "init", "-q")
    git(checkout, "add", ".")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return checkout, git(checkout, "rev-parse", "HEAD")


def test_passes_whose_source_changed_since_the_base_commit(tmp_path: Path) -> None:
    checkout, base = optimizer_checkout(tmp_path)
    (checkout / "onnxoptimizer" / "passes" / "fuse_bn_into_conv.h").write_text("// fixed\n")
    (checkout / "onnxoptimizer" / "passes" / "gone_pass.h").write_text("// not a pass of this build\n")
    (checkout / "README.md").write_text("changed too, names no pass\n")
    git(checkout, "add", ".")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "head")
    # uncommitted work in the checkout counts too: the head build is built from it
    (checkout / "onnxoptimizer" / "passes" / "eliminate_identity.h").write_text("// edited\n")
    log = Log({}, quiet=True)
    assert changed_passes(checkout, base, PASSES, log) == ("eliminate_identity", "fuse_bn_into_conv")
    assert changed_passes(checkout, None, PASSES, log) == ()


def test_nothing_changed_where_it_cannot_be_known(tmp_path: Path, capsys) -> None:
    log = Log({})
    not_a_checkout = tmp_path / "plain"
    not_a_checkout.mkdir()
    assert changed_passes(not_a_checkout, "0" * 40, PASSES, log) == ()
    assert capsys.readouterr().err == "", "a workspace that is no checkout is skipped quietly"
    checkout, _ = optimizer_checkout(tmp_path)
    # a shallow clone lacks the base commit: said once, since more history is the fix
    assert changed_passes(checkout, "1" * 40, PASSES, log) == ()
    said = capsys.readouterr()
    assert "fetch-depth: 0" in said.err + said.out


def test_a_missing_git_is_said_not_taken_for_no_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Action's image has no git: its PR sweeps exercised no changed pass and did not say so."""
    checkout, base = optimizer_checkout(tmp_path)
    (checkout / "onnxoptimizer" / "passes" / "fuse_bn_into_conv.h").write_text("// fixed\n")
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    assert changed_passes(checkout, base, PASSES, Log({})) == ()
    said = capsys.readouterr()
    assert "no git here" in said.err + said.out
