"""What a PR changed, by pass, read from real git checkouts laid out like onnx/optimizer (made with
git, read without it): a pass is named by its `getPassName`, a helper changes the passes that
include it, a file outside the pass folder changes what every pass shares unless no build reads it."""

from __future__ import annotations

from pathlib import Path

from ditox_ci.log import Log
from ditox_ci.triage.impact import impact_of
from tests.integration.triage.test_exercise import commit, git

# the optimizer's passes, in its order
PASSES = ("eliminate_identity", "fuse_bn_into_conv", "split_init", "split_predict")
PASS_FILE = """#pragma once
#include "onnxoptimizer/pass.h"
{includes}
struct {cls} final : public PredicateBasedPass {{
{passes}
}};
"""
NAMED = """  std::string getPassName() const override {{
    return "{name}";
  }}
"""


def pass_file(cls: str, names: tuple[str, ...], includes: tuple[str, ...] = ()) -> str:
    return PASS_FILE.format(
        cls=cls,
        includes="\n".join(f'#include "onnxoptimizer/passes/{name}"' for name in includes),
        passes="".join(NAMED.format(name=name) for name in names),
    )


def optimizer_checkout(root: Path) -> tuple[Path, str]:
    """onnx/optimizer's layout in small: `split.h` defines two passes, `fuse_bn_into_conv.h`
    includes `pass_util.h` (whose code is in `pass_util.cc`) through `tensor_util.h`, and a
    submodule; its first commit is the PR's base."""
    checkout = root / "optimizer"
    passes = checkout / "onnxoptimizer" / "passes"
    passes.mkdir(parents=True)
    (passes / "split.h").write_text(pass_file("Split", ("split_init", "split_predict")))
    (passes / "fuse_bn_into_conv.h").write_text(
        pass_file("FuseBN", ("fuse_bn_into_conv",), ("tensor_util.h",))
    )
    (passes / "eliminate_identity.h").write_text(pass_file("EliminateIdentity", ("eliminate_identity",)))
    (passes / "tensor_util.h").write_text('#include "onnxoptimizer/passes/pass_util.h"\n')
    (passes / "pass_util.h").write_text("int helper();\n")
    (passes / "pass_util.cc").write_text("int helper() { return 1; }\n")
    (checkout / "onnxoptimizer" / "pass_manager.cc").write_text("// the pass manager\n")
    (checkout / "CMakeLists.txt").write_text("project(onnx_optimizer)\n")
    (checkout / "README.md").write_text("optimizer\n")
    for folder in ("docs", ".github/workflows", "onnxoptimizer/test"):
        (checkout / folder).mkdir(parents=True)
        (checkout / folder / "notes.txt").write_text("not built\n")
    git(checkout, "init", "-q")
    git(checkout, "add", ".")
    git(checkout, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},third_party/onnx")
    return checkout, commit(checkout, "base")


def test_a_pass_is_named_by_its_getpassname_and_helpers_change_their_includers(tmp_path: Path) -> None:
    checkout, base = optimizer_checkout(tmp_path)
    passes = checkout / "onnxoptimizer" / "passes"
    (passes / "split.h").write_text(pass_file("Split", ("split_init", "split_predict")) + "// fixed\n")
    log = Log({}, quiet=True)
    impact = impact_of(checkout, base, PASSES, log)
    assert impact is not None
    assert impact.passes == ("split_init", "split_predict") and impact.shared == ()
    assert impact.changes(["split_predict"]) and not impact.changes(
        ["fuse_bn_into_conv", "eliminate_identity"]
    )
    commit(checkout, "split")
    # a helper's code: what includes its header, through another helper too
    (passes / "pass_util.cc").write_text("int helper() { return 2; }\n")
    impact = impact_of(checkout, "HEAD", PASSES, log)
    assert impact is not None and impact.passes == ("fuse_bn_into_conv",) and impact.shared == ()
    assert impact.files == ("onnxoptimizer/passes/pass_util.cc",)


def test_files_no_build_reads_change_nothing_others_change_every_pass(tmp_path: Path) -> None:
    checkout, base = optimizer_checkout(tmp_path)
    for name in (
        "README.md",
        "docs/notes.txt",
        ".github/workflows/notes.txt",
        "onnxoptimizer/test/notes.txt",
    ):
        (checkout / name).write_text("edited\n")
    log = Log({}, quiet=True)
    impact = impact_of(checkout, base, PASSES, log)
    assert impact is not None and len(impact.files) == 4
    assert impact.passes == () and impact.shared == () and not impact.changes(["eliminate_identity"])
    commit(checkout, "docs")
    (checkout / "onnxoptimizer" / "pass_manager.cc").write_text("// the pass manager, changed\n")
    # a file outside the pass folder is shared code, whatever its path ends with: here as many
    # characters before `split.h` as the pass folder's path has, and split.h changed too
    tool = "tools/" + "a" * (len("onnxoptimizer/passes/") - len("tools//")) + "/split.h"
    (checkout / tool).parent.mkdir(parents=True)
    (checkout / tool).write_text("// a tool's header named like a pass file\n")
    split = checkout / "onnxoptimizer" / "passes" / "split.h"
    split.write_text(split.read_text() + "// changed\n")
    git(checkout, "add", "tools")
    impact = impact_of(checkout, base, PASSES, log)
    assert impact is not None and impact.shared == ("onnxoptimizer/pass_manager.cc", tool)
    assert impact.passes == ("split_init", "split_predict")
    assert impact.changes(["eliminate_identity"]), "the code every pass runs in changed"


def test_a_submodule_moved_changes_every_pass(tmp_path: Path) -> None:
    """onnx/optimizer builds the onnx submodule's IR: a PR that moves it changes every pass."""
    checkout, base = optimizer_checkout(tmp_path)
    git(checkout, "update-index", "--add", "--cacheinfo", f"160000,{'2' * 40},third_party/onnx")
    impact = impact_of(checkout, base, PASSES, Log({}, quiet=True))
    assert impact is not None and impact.shared == ("third_party/onnx",)
    assert git(checkout, "diff", "--cached", "--name-only", base) == "third_party/onnx"


def test_untracked_sources_the_build_compiles_count_others_do_not(tmp_path: Path) -> None:
    """onnx/optimizer's CMakeLists compiles every onnxoptimizer/*.cc and *.h it finds
    (`file(GLOB_RECURSE)`), tracked or not: an untracked one there changes what the build is, as an
    edit does. A workflow's files beside the checkout (a downloaded report) change nothing, nor does
    an untracked file the build does not compile."""
    checkout, base = optimizer_checkout(tmp_path)
    log = Log({}, quiet=True)
    (checkout / "base-report").mkdir()
    (checkout / "base-report" / "report.json").write_text("{}\n")
    (checkout / "onnxoptimizer" / "passes" / "notes.txt").write_text("not compiled\n")
    impact = impact_of(checkout, base, PASSES, log)
    assert impact is not None and impact.files == () and impact.passes == () and impact.shared == ()
    # a helper's code, new: what includes its header
    (checkout / "onnxoptimizer" / "passes" / "tensor_util.cc").write_text("int more() { return 1; }\n")
    impact = impact_of(checkout, base, PASSES, log)
    assert impact is not None and impact.files == ("onnxoptimizer/passes/tensor_util.cc",)
    assert impact.passes == ("fuse_bn_into_conv",) and impact.shared == ()
    # a new source outside the pass folder: compiled into every pass's build
    (checkout / "onnxoptimizer" / "extra").mkdir()
    (checkout / "onnxoptimizer" / "extra" / "registry.cc").write_text("static int registered = 1;\n")
    impact = impact_of(checkout, base, PASSES, log)
    assert impact is not None and impact.shared == ("onnxoptimizer/extra/registry.cc",)
    assert impact.changes(["eliminate_identity"])
    assert git(checkout, "status", "--porcelain", "--untracked-files=all").count("??") == 4
