"""`ditox-ci bisect` over a planted optimizer's releases (a folder of wheels) and its generated git
history (tests/fakes/planted_history.py): real pip, real git, real workers on every build.

The history, oldest first (`ei`: eliminate_identity doubles a weight; `ed`: eliminate_deadend
does so in every other run, a flaky bug):

    c0 start · c1 tidy · c2 docs · c3 ei enters (#12) · c4 ed enters (#13) · c5 does not build ·
    c6 refactor · c7 ei fixed (#15) · c8 docs
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from planted_history import history, release, source_release
from wheels import PACKAGE

from ditox_ci.report.schema import read_checked_report
from ditox_ci.report.since import FIXED, IMPLAUSIBLE, INTRODUCED, SKIP, TOUCHES_THE_PASS, Since
from ditox_ci.triage.bisect_builds import plausibility

EI, ED = "eliminate_identity", "eliminate_deadend"
OPTIMIZER = f"{PACKAGE}:optimize"
DOUBLE, FLAKY = {EI: "double"}, {EI: "double", ED: "flaky"}
COMMITS = [
    ("Start planted_opt", {}, "code"),
    ("Tidy the wrapper", {}, "code"),
    ("Describe the project", None, "docs"),
    ("Rewrite identity elimination (#12)", DOUBLE, "code"),
    ("Speed up dead-end elimination (#13)", FLAKY, "code"),
    ("Move to a new build backend", FLAKY, "broken"),
    ("Refactor the pass table", FLAKY, "code"),
    ("Fix identity elimination (#15)", {ED: "flaky"}, "code"),
    ("Document the fix", None, "docs"),
]


def _model() -> onnx.ModelProto:
    """y = Identity(x) + w, with a dead end: the planted passes both have work to do."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    weight = onnx.numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Add", ["i", "w"], ["y"]),
        helper.make_node("Relu", ["x"], ["unused"]),
    ]
    graph = helper.make_graph(nodes, "planted", [x], [y], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _cli(
    *args: str, cwd: Path, pythonpath: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **env}
    environ.pop("GITHUB_ACTIONS", None)
    if pythonpath is not None:
        environ["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-m", "ditox_ci", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=environ,
        timeout=900,
    )


def _install(source: Path | str, target: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(source)],
        check=True,
    )
    return target


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The history, the releases, and a bundle per bug reduced on the build that has both (c6)."""
    root = tmp_path_factory.mktemp("bisect")
    shas = history(root / "repo", COMMITS)
    (root / "shas.json").write_text(json.dumps(shas))
    subprocess.run(["git", "-C", str(root / "repo"), "checkout", "-q", shas[6]], check=True)
    both = _install(root / "repo", root / "c6")
    subprocess.run(["git", "-C", str(root / "repo"), "checkout", "-q", "main"], check=True)
    onnx.save(_model(), root / "model.onnx")
    for bug in (EI, ED):
        done = _cli(
            "reduce",
            "model.onnx",
            "--passes",
            bug,
            "--optimizer",
            OPTIMIZER,
            "--out",
            "bundles",
            "--cache-dir",
            "cache",
            cwd=root,
            pythonpath=both,
        )
        assert done.returncode == 1, done.stderr[-2000:]
        (root / f"bundle-{bug}").symlink_to(Path(done.stdout.strip().splitlines()[-1]))
    return {"root": root, "repo": root / "repo", "c6": both}


def _shas(world: dict[str, Path]) -> list[str]:
    return json.loads((world["root"] / "shas.json").read_text())


def _bisected(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert done.returncode == 0, done.stderr[-3000:]
    return {line.split("\t")[0]: line for line in done.stdout.splitlines() if "\t" in line}


def _over_commits(
    world: dict[str, Path], good: str, bad: str, cache: Path, *args: str, cwd: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    """`ditox-ci bisect ARGS` over the planted history from `good` to `bad`, the checkout named
    relative to `cwd` as a workflow names it."""
    range_ = ("--checkout", os.path.relpath(world["repo"], cwd), "--good", good, "--bad", bad)
    return _cli("bisect", *args, *range_, "--optimizer", OPTIMIZER, "--cache-dir", str(cache), cwd=cwd, **env)


def _over_releases(
    world: dict[str, Path], wheels: Path, out: Path, build: Path, *bugs: str
) -> subprocess.CompletedProcess[str]:
    """`ditox-ci bisect` of the bundles of `bugs` over the releases in `wheels`, with `build` (an
    installed planted_opt) as the build under test; its cache and `r.json` go into `out`."""
    bundles = [str(world["root"] / f"bundle-{bug}") for bug in bugs]
    releases = ("--package", "planted-opt", "--find-links", str(wheels), "--cache-dir", str(out / "cache"))
    return _cli(
        "bisect",
        *bundles,
        "--optimizer",
        OPTIMIZER,
        *releases,
        "--out-json",
        str(out / "r.json"),
        cwd=world["root"],
        pythonpath=build,
    )


def _one_result(path: Path) -> Since:
    """The one bug's result `--out-json` wrote."""
    (result,) = json.loads(path.read_text())
    return Since.from_json(result["since"])


def test_bisect_names_the_commit_that_brought_a_bug_and_the_one_that_fixed_it(world, tmp_path):
    shas, bundle, cache = _shas(world), str(world["root"] / f"bundle-{EI}"), tmp_path / "cache"
    done = _over_commits(world, shas[0], shas[6], cache, bundle, "--out-json", "in.json", cwd=tmp_path)
    _bisected(done)
    entered = _one_result(tmp_path / "in.json")
    assert (entered.change, entered.after.ref, entered.before.ref) == (INTRODUCED, shas[3], shas[2])
    assert entered.after.label == f"{shas[3][:7]} Rewrite identity elimination (#12)"
    assert entered.plausibility == TOUCHES_THE_PASS
    assert entered.builds <= 5, entered  # ⌈log2 7⌉ + 2
    assert entered.headline.startswith(f"introduced by {shas[3][:7]} Rewrite identity elimination (#12)")
    # the bug leaves at c7; c5 does not build: skipped, said so, and a neighbour tried instead
    done = _over_commits(world, "main", shas[3], cache, bundle, "--out-json", "out.json", cwd=tmp_path)
    _bisected(done)
    left = _one_result(tmp_path / "out.json")
    assert (left.change, left.after.ref, left.before.ref) == (FIXED, shas[7], shas[6])
    assert left.headline.startswith(f"fixed by {shas[7][:7]} Fix identity elimination (#15)")
    (broken,) = [t for t in left.tried if t.verdict == SKIP]
    assert broken.ref == shas[5] and "pip could not install" in broken.reason, broken
    assert not left.candidates  # c5 is not next to the change: the range is exact
    # a commit that touches only docs could not have brought a bug: flagged
    assert plausibility(world["repo"], shas[2], [EI]) == IMPLAUSIBLE
    # each commit built once, the second bisection taking the first's builds from the cache
    builds = sorted(p.name for p in (cache / "builds").iterdir() if not p.name.startswith("."))
    assert len(builds) == len({t.ref for t in (*entered.tried, *left.tried) if t.verdict != SKIP}), builds


def test_a_flaky_bug_gets_more_runs_where_it_does_not_show_and_a_confidence(world, tmp_path):
    shas, bundle, counter = _shas(world), str(world["root"] / f"bundle-{ED}"), str(tmp_path / "calls")
    done = _over_commits(
        world,
        shas[0],
        "main",
        tmp_path / "cache",
        bundle,
        "--out-json",
        "f.json",
        cwd=tmp_path,
        PLANTED_FLAKY_COUNTER=counter,
    )
    _bisected(done)
    since = _one_result(tmp_path / "f.json")
    assert (since.change, since.after.ref) == (INTRODUCED, shas[4]), since
    flaky = [t for t in since.tried if t.verdict == "bad" and t.shown < t.runs]
    assert flaky, since.tried  # it did miss runs where it is present
    goods = [t for t in since.tried if t.verdict == "good"]
    assert goods and all(t.runs > 3 for t in goods), goods  # more than --runs before "good"
    assert 0.8 <= since.confidence < 1.0 and "confidence" in since.headline, since


def test_releases_two_bugs_share_builds_and_an_uninstallable_release_is_skipped(world, tmp_path):
    root = world["root"]
    wheels = tmp_path / "wheels"
    for version, bugs in [
        ("1.0", {}),
        ("1.2", {}),
        ("1.3", DOUBLE),
        ("1.4", DOUBLE),
        ("1.5", FLAKY),
        ("1.6", FLAKY),
    ]:
        release(wheels, version, bugs)
    source_release(wheels, "1.1")  # no wheel: bisecting releases builds nothing
    newest = _install(wheels / "planted_opt-1.6-py3-none-any.whl", tmp_path / "newest")
    done = _over_releases(world, wheels, tmp_path, newest, EI, ED)
    lines = _bisected(done)
    found = {
        entry["fingerprint"]: Since.from_json(entry["since"])
        for entry in json.loads((tmp_path / "r.json").read_text())
    }
    identity, deadend = (
        found[json.loads((root / f"bundle-{b}" / "finding.json").read_text())["finding"]["fingerprint"]]
        for b in (EI, ED)
    )
    assert (identity.change, identity.after.label, identity.before.label) == (INTRODUCED, "1.3", "1.2")
    assert (deadend.change, deadend.after.label, deadend.before.label) == (INTRODUCED, "1.5", "1.4")
    assert identity.headline == "introduced in 1.3 (1.2 is fine)"
    assert any("introduced in 1.5 (1.4 is fine)" in line for line in lines.values()), lines
    (skipped,) = [t for t in identity.tried if t.verdict == SKIP]
    assert skipped.ref == "1.1" and "no wheel for this Python" in skipped.reason
    # one build per release however many bugs asked for it: fewer installs than the two searches asked
    installed = [p for p in (tmp_path / "cache" / "builds").iterdir() if not p.name.startswith(".")]
    assert len(installed) < identity.builds + deadend.builds, (installed, identity.builds, deadend.builds)
    assert identity.builds <= 5 and deadend.builds <= 5  # ⌈log2 7⌉ + 2


@pytest.mark.parametrize(
    ("releases", "headline"),
    [
        # fixed in a release: the releases are tried from the newest back until one has it
        ([("1.0", {}), ("1.1", DOUBLE), ("1.2", DOUBLE), ("1.3", {})], "fixed in 1.3 (1.2 still has it)"),
        # fixed since the newest release: the build under test is where it left
        ([("1.0", {}), ("1.1", DOUBLE)], "fixed in 1.4 (the build under test) (1.1 still has it)"),
    ],
)
def test_releases_a_bug_the_build_under_test_no_longer_shows_is_found_where_it_left(
    world, tmp_path, releases, headline
):
    wheels = tmp_path / "wheels"
    for version, bugs in releases:
        release(wheels, version, bugs)
    fixed = _install(release(tmp_path / "unreleased", "1.4", {}), tmp_path / "fixed")
    done = _over_releases(world, wheels, tmp_path, fixed, EI)
    assert done.returncode == 0, done.stderr[-3000:]
    since = _one_result(tmp_path / "r.json")
    assert (since.change, since.headline) == (FIXED, headline)
    # the newest release first, back to the newest one that has it, and no further
    newest_first = [version for version, _ in reversed(releases)]
    shown_at = next(version for version, bugs in reversed(releases) if bugs)
    tried = newest_first[: newest_first.index(shown_at) + 1]
    assert [t.ref for t in since.tried] == list(reversed(tried))
    assert [t.verdict for t in since.tried] == ["bad", *["good"] * (len(tried) - 1)]


def test_a_reports_new_and_fixed_bugs_are_bisected_in_one_range_and_recorded(world, tmp_path):
    """A sweep of the build with both bugs (c6), then one range from c4 to main: the identity bug
    shows at c4 only (fixed in the range), the dead-end one at both ends (older than the range)."""
    shas = _shas(world)
    models = tmp_path / "models"
    models.mkdir()
    onnx.save(_model(), models / "planted.onnx")
    configs = f"pass:{EI},pass:{ED}"
    swept = _cli(
        "sweep",
        "--models",
        str(models),
        "--optimizer",
        OPTIMIZER,
        "--configs",
        configs,
        "--out",
        "swept",
        "--cache-dir",
        str(tmp_path / "cache"),
        cwd=tmp_path,
        pythonpath=world["c6"],
    )
    assert swept.returncode == 1, swept.stderr[-3000:]
    # the bundles in last night's folder, as the nightly's `since` job has a fixed bug's
    (tmp_path / "last-night").mkdir()
    (tmp_path / "swept" / "repro").rename(tmp_path / "last-night" / "repro")
    args = ("--report", "swept", "--bundles-from", "last-night")
    done = _over_commits(world, shas[4], "main", tmp_path / "cache", *args, cwd=tmp_path)
    _bisected(done)
    report = json.loads((tmp_path / "swept" / "report.json").read_text())
    since = {f["config"]: Since.from_json(f["since"]) for f in report["findings"]}
    fixed, older = since[f"pass:{EI}"], since[f"pass:{ED}"]
    assert (fixed.change, fixed.after.ref) == (FIXED, shas[7]), fixed
    assert (older.change, older.after.ref) == ("present-since-oldest", shas[4]), older
    assert (
        older.headline
        == f"already present at {shas[4][:7]} Speed up dead-end elimination (#13), where the range starts"
    )
    # the report still follows its schema
    read_checked_report(tmp_path / "swept" / "report.json")


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        ((), 2, "name the bugs"),
        (("--report", "nowhere"), 4, "nowhere: no report.json there"),
        (("bundle-without-record",), 4, "no finding.json"),
        (("bundle-without-record", "--good", "HEAD"), 2, "--good and --bad go together"),
        (("bundle-without-record", "--runs", "0"), 2, "--runs must be 1 or more"),
    ],
)
def test_bad_input_is_one_line_and_its_own_exit_code(
    tmp_path: Path, args: tuple[str, ...], code: int, said: str
):
    (tmp_path / "bundle-without-record").mkdir()
    onnx.save(_model(), tmp_path / "bundle-without-record" / "model.onnx")
    done = _cli("bisect", *args, cwd=tmp_path)
    assert done.returncode == code, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert said in line, line


def test_a_checkout_without_the_ref_is_said_before_anything_is_built(world, tmp_path: Path):
    bundle = str(world["root"] / f"bundle-{EI}")
    done = _over_commits(world, "v9.9", "main", tmp_path / "cache", bundle, cwd=tmp_path)
    assert done.returncode == 4 and "--good v9.9 is no commit of" in done.stderr, done.stderr
    assert not (tmp_path / "cache" / "builds").exists()
