"""Which passes a PR touched, read from real git checkouts of an optimizer's sources (made with git,
read without it), against what `git diff --name-only` lists."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ditox_ci.log import Log
from ditox_ci.triage.impact import impact_of

PASSES = ("eliminate_identity", "fuse_bn_into_conv", "nop")


def changed_passes(checkout: Path, since: str | None, passes: tuple[str, ...], log: Log) -> tuple[str, ...]:
    """The passes the sweep exercises as changed: none where what changed cannot be known."""
    impact = impact_of(checkout, since, passes, log)
    return () if impact is None else impact.passes


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


def commit(checkout: Path, message: str) -> str:
    git(checkout, "add", "-A")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(checkout, "rev-parse", "HEAD")


def test_passes_whose_source_changed_since_the_base_commit(tmp_path: Path) -> None:
    checkout, base = optimizer_checkout(tmp_path)
    (checkout / "onnxoptimizer" / "passes" / "fuse_bn_into_conv.h").write_text("// fixed\n")
    (checkout / "onnxoptimizer" / "passes" / "gone_pass.h").write_text("// not a pass of this build\n")
    (checkout / "README.md").write_text("changed too, names no pass\n")
    commit(checkout, "head")
    # uncommitted work in the checkout counts too: the head build is built from it
    (checkout / "onnxoptimizer" / "passes" / "eliminate_identity.h").write_text("// edited\n")
    log = Log({}, quiet=True)
    assert changed_passes(checkout, base, PASSES, log) == ("eliminate_identity", "fuse_bn_into_conv")
    assert changed_passes(checkout, None, PASSES, log) == ()
    # as git names commits: a short sha, an ancestor, a tag, a branch; from a folder inside
    git(checkout, "tag", "v1", base)
    inside = checkout / "onnxoptimizer"
    both = ("eliminate_identity", "fuse_bn_into_conv")
    for since in (base[:10], "HEAD~1", "HEAD^", "HEAD^1", "HEAD~1^0", "v1"):
        assert changed_passes(inside, since, PASSES, log) == both, since
    assert changed_passes(checkout, "HEAD", PASSES, log) == ("eliminate_identity",)


def test_a_deleted_or_untracked_source_as_git_diff_lists_it(tmp_path: Path) -> None:
    checkout, base = optimizer_checkout(tmp_path)
    (checkout / "onnxoptimizer" / "passes" / "nop.h").unlink()  # deleted, not yet committed
    (checkout / "onnxoptimizer" / "passes" / "fuse_bn_into_conv.h").write_text("// untracked edit\n")
    git(checkout, "rm", "-q", "--cached", "onnxoptimizer/passes/fuse_bn_into_conv.h")
    expected = set(git(checkout, "diff", "--name-only", base, "--").split())
    assert expected == {"onnxoptimizer/passes/nop.h", "onnxoptimizer/passes/fuse_bn_into_conv.h"}
    assert changed_passes(checkout, base, PASSES, Log({}, quiet=True)) == ("fuse_bn_into_conv", "nop")


def test_no_git_is_needed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Action's image has no git: the checkout's history is read without it."""
    checkout, base = optimizer_checkout(tmp_path)
    (checkout / "onnxoptimizer" / "passes" / "fuse_bn_into_conv.h").write_text("// fixed\n")
    commit(checkout, "head")
    git(checkout, "gc", "-q")  # the objects packed, as a clone holds them
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    assert changed_passes(checkout, base, PASSES, Log({}, quiet=True)) == ("fuse_bn_into_conv",)


def test_nothing_changed_where_it_cannot_be_known(tmp_path: Path, capsys) -> None:
    log = Log({})
    not_a_checkout = tmp_path / "plain"
    not_a_checkout.mkdir()
    assert changed_passes(not_a_checkout, "0" * 40, PASSES, log) == ()
    assert capsys.readouterr().err == "", "a workspace that is no checkout is skipped quietly"
    checkout, base = optimizer_checkout(tmp_path)
    (checkout / "onnxoptimizer" / "passes" / "fuse_bn_into_conv.h").write_text("// fixed\n")
    commit(checkout, "head")
    # a shallow clone (actions/checkout's default) lacks the base commit: said, since more history is the fix
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{checkout}", str(shallow))
    assert changed_passes(shallow, base, PASSES, log) == ()
    said = capsys.readouterr()
    assert f"passes changed since {base} not looked up" in said.err + said.out
    assert "fetch-depth: 0" in said.err + said.out
    git(shallow, "fetch", "-q", "--unshallow")
    assert changed_passes(shallow, base, PASSES, log) == ("fuse_bn_into_conv",)


def test_a_damaged_checkout_is_said_and_the_sweep_goes_on(tmp_path: Path, capsys) -> None:
    checkout, base = optimizer_checkout(tmp_path)
    tree = git(checkout, "rev-parse", f"{base}^{{tree}}")
    loose = checkout / ".git" / "objects" / tree[:2] / tree[2:]
    loose.chmod(0o644)
    loose.write_bytes(b"not zlib at all")
    assert changed_passes(checkout, base, PASSES, Log({})) == ()
    said = capsys.readouterr()
    assert f"passes changed since {base} not looked up (the checkout could not be read" in said.err + said.out


def test_a_symlink_the_pr_plants_is_compared_by_its_target_never_followed(tmp_path: Path) -> None:
    """A fork's PR is hostile ground: reading a link to /dev/zero would never end."""
    checkout, base = optimizer_checkout(tmp_path)
    passes = checkout / "onnxoptimizer" / "passes"
    (passes / "eliminate_identity.h").unlink()
    (passes / "eliminate_identity.h").symlink_to("/dev/zero")
    commit(checkout, "head")
    log = Log({}, quiet=True)
    assert changed_passes(checkout, base, PASSES, log) == ("eliminate_identity",)
    assert changed_passes(checkout, "HEAD", PASSES, log) == (), "the link is unchanged since HEAD"
    # the whole folder a link elsewhere: nothing in it is read, every file of the base is gone
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "fuse_bn_into_conv.h").write_text("// fuse_bn_into_conv\n")
    shutil.rmtree(passes)
    passes.symlink_to(elsewhere)
    assert changed_passes(checkout, base, PASSES, log) == PASSES
