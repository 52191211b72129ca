"""The Action's runner I/O: INPUT_* → argv per stage, outputs file format, the gate."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from ditox_ci.ci.action import (
    build_argv,
    format_outputs,
    gate,
    hand_over,
    install_commands,
    outputs,
    plan,
    runnable,
    stage_env,
    wheel_warnings,
    write_outputs,
)
from ditox_ci.ci.inputs import read_inputs
from ditox_ci.errors import ConfigError, OptimizerLoadError
from ditox_ci.report.model import Culprit, Finding, Report
from tests.helpers import minimal_report, parse_github_output


def _report(*statuses: str) -> Report:
    findings = tuple(
        Finding(
            fingerprint=f"f{i}",
            kind="output-mismatch",
            model="m",
            config="default",
            culprit=Culprit(scope="pass"),
            status=status,
        )
        for i, status in enumerate(statuses)
    )
    return minimal_report(*findings)


def test_defaults_run_sweep_then_publish() -> None:
    assert build_argv({}) == [
        ["sweep", "--out", "ditox-report", "--optimizer", "onnxoptimizer"],
        [
            "publish",
            "--report",
            "ditox-report/report.json",
            "--comment",
            "--check",
            "--check-name",
            "ditox-ci",
            "--comment-key",
            "default",
            "--no-file-issues",
            "--max-new-issues",
            "10",
            "--artifact",
            "ditox-report",
            "--sarif",
            "ditox-report/ditox.sarif",
            "--junit",
            "ditox-report/junit.xml",
            "--no-close-fixed",
            "--fail-on",
            "new",
        ],
    ]


def test_publish_inputs_map_to_flags() -> None:
    env = {
        "INPUT_MODE": "publish",
        "INPUT_FILE_ISSUES": "true",
        "INPUT_CLOSE_FIXED": "true",
        "INPUT_PR_NUMBER": "12",
        "INPUT_COMMENT": "false",
    }
    (publish,) = build_argv(env)
    assert publish[publish.index("--pr") + 1] == "12"
    assert {"--file-issues", "--close-fixed", "--no-comment"} <= set(publish)
    assert "--baseline" not in publish
    with pytest.raises(ConfigError, match="pr_number"):
        read_inputs({**env, "INPUT_PR_NUMBER": "12; rm -rf /"})


def test_surface_inputs_name_and_bound_what_publish_writes() -> None:
    env = {
        "INPUT_MODE": "publish",
        "INPUT_CHECK": "false",
        "INPUT_CHECK_NAME": "ditox-ci / nightly",
        "INPUT_COMMENT_KEY": "shard-a",
        "INPUT_MAX_NEW_ISSUES": "3",
    }
    (publish,) = build_argv(env)
    assert "--no-check" in publish
    named = {"--check-name": "ditox-ci / nightly", "--comment-key": "shard-a", "--max-new-issues": "3"}
    assert {flag: publish[publish.index(flag) + 1] for flag in named} == named


def test_untrusted_reaches_publish_only() -> None:
    env = {"INPUT_MODE": "all", "INPUT_UNTRUSTED": "true"}
    sweep, publish = build_argv(env)
    assert "--untrusted" in publish and "--untrusted" not in sweep


def test_publish_classifies_with_the_sweeps_baseline_and_previous() -> None:
    env = {"INPUT_BASELINE": ".github/ditox-baseline.yml", "INPUT_PREVIOUS": "nightly/report.json"}
    for argv in build_argv(env):
        assert argv[argv.index("--baseline") + 1] == ".github/ditox-baseline.yml", argv
        assert argv[argv.index("--previous") + 1] == "nightly/report.json", argv


def test_sweep_inputs_map_to_flags() -> None:
    env = {
        "INPUT_MODE": "sweep",
        "INPUT_MODELS": "models/a.onnx\nmodels/zoo\n",
        "INPUT_CONFIGS": "default, single",
        "INPUT_OPTIMIZER": "mypkg.opt:optimize",
        "INPUT_BASELINE": ".ditox/baseline.yml",
        "INPUT_SHARD_INDEX": "2",
        "INPUT_SHARD_COUNT": "4",
        "INPUT_RTOL": "1e-4",
        "INPUT_ATOL": "",
        "INPUT_MAX_SKIPPED": "0.2",
        "INPUT_JOBS": "2",
        "INPUT_RUNNER": "reference",
        "INPUT_TIMEOUT": "60",
        "INPUT_OUT": "shard-2",
        "INPUT_GITHUB_TOKEN": "ghs_secret",
    }
    [argv] = build_argv(env)
    assert argv == [
        "sweep",
        "--out",
        "shard-2",
        "--optimizer",
        "mypkg.opt:optimize",
        "--models",
        "models/a.onnx",
        "models/zoo",
        "--configs",
        "default,single",
        "--shard",
        "2/4",
        "--baseline",
        ".ditox/baseline.yml",
        "--rtol",
        "0.0001",
        "--max-skipped",
        "0.2",
        "--jobs",
        "2",
        "--runner",
        "reference",
        "--timeout",
        "60.0",
    ]
    assert "ghs_secret" not in " ".join(argv)
    # the default leaves the CLI's own default; a runner it does not know is the input's error
    assert "--runner" not in build_argv({**env, "INPUT_RUNNER": "auto"})[0]
    with pytest.raises(ConfigError, match="input runner: 'tvm' is not one of auto, onnxruntime, reference"):
        read_inputs({**env, "INPUT_RUNNER": "tvm"})


def test_merge_and_publish_modes() -> None:
    env = {"INPUT_MODE": "merge", "INPUT_REPORTS": "shards/a\nshards/b", "INPUT_OUT": "merged"}
    assert build_argv(env) == [["merge", "shards/a", "shards/b", "--out", "merged"]]
    env = {
        "INPUT_MODE": "publish",
        "INPUT_OUT": "merged",
        "INPUT_COMMENT": "false",
        "INPUT_FILE_ISSUES": "true",
        "INPUT_DRY_RUN": "true",
        "INPUT_FAIL_ON": "any",  # the check's conclusion follows the job's gate
    }
    assert build_argv(env) == [
        [
            "publish",
            "--report",
            "merged/report.json",
            "--no-comment",
            "--check",
            "--check-name",
            "ditox-ci",
            "--comment-key",
            "default",
            "--file-issues",
            "--max-new-issues",
            "10",
            "--artifact",
            "ditox-report",
            "--sarif",
            "merged/ditox.sarif",
            "--junit",
            "merged/junit.xml",
            "--no-close-fixed",
            "--dry-run",
            "--fail-on",
            "any",
        ]
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"INPUT_MODE": "everything"}, "input mode"),
        ({"INPUT_FAIL_ON": "sometimes"}, "input fail_on"),
        (
            {"INPUT_MODE": "sweep", "INPUT_SHARD_INDEX": "4", "INPUT_SHARD_COUNT": "4"},
            "shard_index",
        ),
        ({"INPUT_SHARD_COUNT": "3"}, "mode 'all'"),
        ({"INPUT_MODE": "merge"}, "reports"),
        ({"INPUT_JOBS": "many"}, "INPUT_JOBS"),
    ],
)
def test_bad_inputs_are_config_errors_naming_the_input(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        read_inputs(env)


@pytest.mark.parametrize(
    "env",
    [
        {"INPUT_MODELS": "ok.onnx,--out=/x,--optimizer=evil_mod"},
        {"INPUT_MODELS": "ok.onnx\n-h"},
        {"INPUT_MODE": "merge", "INPUT_REPORTS": "shard-0,--out=/etc"},
        {"INPUT_PASSES": "fuse_bn_into_conv,--jobs=64"},
        {"INPUT_BASELINE": "--previous=/tmp/forged.json"},
    ],
    ids=["models", "models-newline", "reports", "passes", "scalar"],
)
def test_an_input_value_that_starts_with_a_dash_is_refused_before_any_command(env: dict[str, str]) -> None:
    """A list built from text a PR controls (its changed files) must not add options to a stage."""
    with pytest.raises(ConfigError, match=r"starts with '-' and would be read as an option") as caught:
        build_argv(env)
    assert "\n" not in str(caught.value)


def test_a_file_whose_name_starts_with_a_dash_is_named_with_its_folder() -> None:
    (sweep,) = build_argv({"INPUT_MODE": "sweep", "INPUT_MODELS": "./-odd.onnx"})
    assert sweep[sweep.index("--models") + 1] == "./-odd.onnx"


def test_non_input_environment_is_ignored() -> None:
    assert read_inputs({"DITOX_MODE": "bogus", "MODE": "bogus"}).mode == "all"


def test_a_build_the_workflow_names_is_installed_by_the_sweep_not_as_root(tmp_path: Path) -> None:
    """A checkout's setup.py (a wheel's or requirement's too) runs in the sweep stage, as the
    workspace's owner without credentials; root installs only ditox-ci's own extras."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    spec = str(tmp_path)
    assert install_commands(spec, "/usr/bin/python3") == []
    (step,) = plan(read_inputs({"INPUT_OPTIMIZER": spec, "INPUT_MODE": "sweep"}), "py")
    assert step.as_workspace_owner and not step.needs_token
    assert step.command[4:9] == ("sweep", "--out", "ditox-report", "--optimizer", spec)
    assert install_commands("onnxoptimizer", "python") == []


def test_an_optimizer_input_naming_a_missing_file_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(OptimizerLoadError, match="no such wheel file"):
        read_inputs({"INPUT_MODE": "sweep", "INPUT_OPTIMIZER": "dist/missing-0.1-py3-none-any.whl"})
    with pytest.raises(OptimizerLoadError, match=r"base_optimizer: .*no such file"):
        read_inputs({"INPUT_MODE": "sweep", "INPUT_BASE_OPTIMIZER": "tools/opt.py:optimize"})
    assert read_inputs({"INPUT_MODE": "publish", "INPUT_OPTIMIZER": "dist/gone.whl"}).mode == "publish"


def test_the_base_optimizer_goes_to_the_one_sweep_that_installs_it_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the workspace, where the wheel job's artifact was downloaded
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "onnxoptimizer-0.4.2-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    env = {
        "INPUT_MODE": "sweep",
        "INPUT_OPTIMIZER": "dist/onnxoptimizer-0.4.2-cp311-cp311-manylinux_2_28_x86_64.whl",
        "INPUT_BASE_OPTIMIZER": "onnxoptimizer==0.4.2",
        "INPUT_PREVIOUS": "nightly/report.json",
        "INPUT_SHARD_INDEX": "1",
        "INPUT_SHARD_COUNT": "2",
    }
    (sweep,) = build_argv(env)
    assert sweep[sweep.index("--optimizer") + 1] == env["INPUT_OPTIMIZER"]
    assert sweep[sweep.index("--base-optimizer") + 1] == "onnxoptimizer==0.4.2"
    assert sweep[sweep.index("--previous") + 1] == "nightly/report.json"
    assert sweep[sweep.index("--shard") + 1] == "1/2"


RUNNER_ENV = {
    "INPUT_GITHUB_TOKEN": "tok",
    "GITHUB_TOKEN": "from-the-workflow-env",
    "GH_TOKEN": "gh",
    "ACTIONS_RUNTIME_TOKEN": "runtime",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc",
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://oidc.invalid",
    "ACTIONS_CACHE_URL": "https://cache.invalid",
    "ACTIONS_RESULTS_URL": "https://results.invalid",
    "ACTIONS_STEP_DEBUG": "true",
    "GITHUB_REPOSITORY": "o/r",
}


def test_only_the_publish_stage_gets_the_token_and_no_stage_other_credentials() -> None:
    inputs = read_inputs({**RUNNER_ENV, "INPUT_OPTIMIZER": "onnxsim"})
    steps = plan(inputs, "py")
    assert [step.title.split()[0] for step in steps] == ["install", "ditox-ci", "ditox-ci"]
    safe = {"GITHUB_REPOSITORY": "o/r", "ACTIONS_STEP_DEBUG": "true", "PYTHONSAFEPATH": "1"}
    *others, publish = steps
    assert publish.command[4] == "publish"
    assert stage_env(inputs, RUNNER_ENV, publish) == {**safe, "GITHUB_TOKEN": "tok"}
    for step in others:
        assert stage_env(inputs, RUNNER_ENV, step) == safe, step.title


def test_a_stage_keeps_only_what_it_needs_by_name_and_the_optimizers_no_file_command() -> None:
    """Secrets were dropped by known names only: AWS_SECRET_ACCESS_KEY, HF_API_KEY, PYPI_PASSWORD or
    GH_PAT given in the workflow's `env:` reached the optimizer. And the optimizer's stage could
    write the runner's file commands (GITHUB_ENV: LD_PRELOAD for upload-artifact)."""
    secrets = {"AWS_SECRET_ACCESS_KEY": "a", "HF_API_KEY": "h", "PYPI_PASSWORD": "p", "GH_PAT": "g"}
    runner = {
        "PATH": "/usr/bin",
        "HOME": "/github/home",
        "LC_ALL": "C.UTF-8",
        "GITHUB_WORKSPACE": "/github/workspace",
        "RUNNER_TEMP": "/tmp",
        "DITOX_JOBS": "2",
        "PIP_INDEX_URL": "https://pypi.example/simple",
        "GITHUB_ENV": "/github/file_commands/set_env",
        "GITHUB_STEP_SUMMARY": "/github/file_commands/step_summary",
    }
    inputs = read_inputs({**RUNNER_ENV, "INPUT_OPTIMIZER": "onnxsim"})
    install, sweep, publish = plan(inputs, "py")
    env = {**RUNNER_ENV, **secrets, **runner}
    for step in (install, sweep, publish):
        child = stage_env(inputs, env, step)
        assert not set(secrets) & set(child), step.title
        assert set(runner) - {"GITHUB_ENV", "GITHUB_STEP_SUMMARY"} <= set(child)
        commands = {"GITHUB_ENV", "GITHUB_STEP_SUMMARY"} & set(child)
        assert commands == (set() if step.as_workspace_owner else {"GITHUB_ENV", "GITHUB_STEP_SUMMARY"})
    assert sweep.as_workspace_owner and not publish.as_workspace_owner


def test_every_python_a_stage_starts_ignores_the_working_directory() -> None:
    inputs = read_inputs({"INPUT_OPTIMIZER": "onnxscript"})
    for step in plan(inputs, "py"):
        assert step.command[:2] == ("py", "-P"), step.command
        assert stage_env(inputs, {}, step)["PYTHONSAFEPATH"] == "1"


@pytest.mark.parametrize(
    ("statuses", "fail_on", "code"),
    [
        (("new", "known"), "new", 1),
        (("known", "fixed"), "new", 0),
        (("known",), "any", 1),
        (("fixed",), "any", 0),
        (("new",), "never", 0),
    ],
)
def test_gate(statuses: tuple[str, ...], fail_on: str, code: int) -> None:
    """fail_on picks the statuses; which kinds gate is tests/unit/report/test_kinds.py's."""
    assert gate(_report(*statuses), fail_on) == code


def test_outputs_are_counts_and_report_path() -> None:
    values = outputs(_report("new", "new", "known", "fixed"), Path("out/report.json"))
    assert values == {"new": "2", "known": "1", "fixed": "1", "report": "out/report.json"}


def test_outputs_file_round_trips_multiline_and_delimiter_like_values(tmp_path: Path) -> None:
    target = tmp_path / "github_output"
    target.write_text("earlier<<EOF\nkept\nEOF\n")
    values = {"report": "a\nb\n\nc", "tricky": "ghadelimiter_x\nEOF", "new": "3"}
    write_outputs(values, {"GITHUB_OUTPUT": str(target)})
    assert parse_github_output(target.read_text()) == {"earlier": "kept", **values}
    assert format_outputs({"a": "1"}) != format_outputs({"a": "1"})  # fresh delimiter each time


def test_no_outputs_file_outside_a_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # where a file without a GITHUB_OUTPUT path would land
    write_outputs({"new": "1"}, {})
    assert list(tmp_path.iterdir()) == []


def test_previous_from_a_workflow_is_downloaded_first_with_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"INPUT_PREVIOUS": "workflow:nightly.yml@main", "INPUT_GITHUB_TOKEN": "tok"}
    inputs = read_inputs(env)
    fetch, sweep, publish = plan(inputs, "py")
    assert fetch.command[4:] == (
        *("previous", "--workflow", "nightly.yml", "--artifact", "ditox-report"),
        *("--out", ".ditox-previous", "--branch", "main"),
    )
    named = read_inputs({**env, "INPUT_ARTIFACT": "ditox-report-onnxruntime"})
    (fetch_named, *_) = plan(named, "py")
    assert fetch_named.command[fetch_named.command.index("--artifact") + 1] == "ditox-report-onnxruntime"
    assert stage_env(inputs, env, fetch)["GITHUB_TOKEN"] == "tok"
    assert "GITHUB_TOKEN" not in stage_env(inputs, env, sweep)
    for step in (sweep, publish):
        assert step.command[step.command.index("--previous") + 1] == ".ditox-previous/report.json"
    monkeypatch.chdir(tmp_path)
    assert "--previous" not in runnable(sweep)  # the first night: nothing was downloaded
    (tmp_path / ".ditox-previous").mkdir()
    (tmp_path / ".ditox-previous" / "report.json").write_text("{}")
    assert runnable(sweep) == sweep.command


def test_reuse_from_a_workflow_is_downloaded_for_the_sweep_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"INPUT_REUSE_FROM": "workflow:nightly.yml@main", "INPUT_GITHUB_TOKEN": "tok"}
    fetch, sweep, publish = plan(read_inputs(env), "py")
    assert fetch.command[4:] == (
        *("previous", "--workflow", "nightly.yml", "--artifact", "ditox-report"),
        *("--out", ".ditox-reuse", "--branch", "main"),
    )
    assert sweep.command[sweep.command.index("--reuse-from") + 1] == ".ditox-reuse/report.json"
    assert "--no-reuse" not in sweep.command and "--reuse-from" not in publish.command
    assert "--no-reuse" in plan(read_inputs({**env, "INPUT_REUSE": "false"}), "py")[1].command
    assert [step.title for step in plan(read_inputs({**env, "INPUT_MODE": "publish"}), "py")] == [
        "ditox-ci publish"
    ]
    monkeypatch.chdir(tmp_path)
    assert "--reuse-from" not in runnable(sweep)  # nothing was downloaded: every result is judged
    (tmp_path / ".ditox-reuse").mkdir()
    (tmp_path / ".ditox-reuse" / "report.json").write_text("{}")
    assert runnable(sweep) == sweep.command


def test_a_plain_linux_wheel_gets_a_warning_a_manylinux_one_does_not() -> None:
    plain = "dist/onnxoptimizer-0.4.2-cp311-cp311-linux_x86_64.whl"
    many = "dist/onnxoptimizer-0.4.2-cp311-cp311-manylinux_2_28_x86_64.whl"
    (warning,) = wheel_warnings(plain, many, "onnxoptimizer==0.4.1", "")
    assert warning.startswith(plain) and "cibuildwheel" in warning


def test_hand_over_never_follows_a_folder_swapped_for_a_link_while_it_walks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process the optimizer left behind may turn a folder of `out` into a link out of the
    workspace after root listed it: here at the worst moment, just as the walk enters it."""
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    (workspace / "out" / "sub").mkdir(parents=True)
    (workspace / "out" / "sub" / "report.json").write_text("{}")
    outside.mkdir()
    (outside / "secret").write_text("")
    if os.geteuid() == 0:
        os.chown(workspace, 1001, 1001)  # the runner's user owns the workspace, as on GitHub
    real_open, real_scandir = os.open, os.scandir

    def swap_before_entering(path: object) -> None:
        if isinstance(path, str) and os.path.basename(path) == "sub" and not (outside / "swapped").exists():
            (outside / "swapped").touch()
            (workspace / "out" / "sub").rename(workspace / "out" / "gone")
            (workspace / "out" / "sub").symlink_to(outside)

    def entering_open(path: Any, *args: Any, **kwargs: Any) -> int:
        swap_before_entering(path)
        return real_open(path, *args, **kwargs)

    def entering_scandir(path: Any = ".") -> Any:
        swap_before_entering(path)
        return real_scandir(path)

    changed: list[Path] = []

    def chown(
        path: str, uid: int, gid: int, *, dir_fd: int | None = None, follow_symlinks: bool = True
    ) -> None:
        folder = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else os.path.dirname(path)
        where = os.path.join(os.path.realpath(folder), os.path.basename(path))
        changed.append(Path(os.path.realpath(where) if follow_symlinks else where))

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "chown", chown)
    monkeypatch.setattr(os, "lchown", lambda path, uid, gid: chown(path, uid, gid, follow_symlinks=False))
    monkeypatch.setattr(os, "open", entering_open)
    monkeypatch.setattr(os, "scandir", entering_scandir)
    hand_over(workspace / "out", workspace)
    monkeypatch.undo()
    assert (outside / "swapped").exists()
    assert [path for path in changed if not path.is_relative_to(workspace)] == []


def test_hand_over_passes_over_a_file_deleted_while_it_walks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It runs in the entrypoint's `finally`: a file a leftover process deletes after the walk
    listed it must not raise and replace the job's exit code with a traceback."""
    workspace = tmp_path / "workspace"
    (workspace / "out").mkdir(parents=True)
    for name in ("a.json", "b.json"):
        (workspace / "out" / name).write_text("{}")
    if os.geteuid() == 0:
        os.chown(workspace, 1001, 1001)  # the runner's user owns the workspace, as on GitHub
    changed: list[str] = []

    def chown(name: str, uid: int, gid: int, **kwargs: Any) -> None:
        if name == "a.json":  # what chown says of a file deleted since the walk listed it
            raise FileNotFoundError(2, "No such file or directory", name)
        changed.append(name)

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "chown", chown)
    monkeypatch.setattr(os, "lchown", lambda path, uid, gid: changed.append(str(path)))
    hand_over(workspace / "out", workspace)
    monkeypatch.undo()
    assert "b.json" in changed and str(workspace / "out") in changed


def test_an_optimizer_input_is_used_as_checked_so_a_trailing_newline_still_installs_it() -> None:
    """A YAML block scalar ends with a newline: `onnxsim\\n` passed the check, skipped the install
    step (no adapter of that name) and then failed as an unknown optimizer."""
    env = {"INPUT_OPTIMIZER": "onnxsim\n", "INPUT_BASE_OPTIMIZER": " onnxsim ", "INPUT_MODE": "sweep"}
    inputs = read_inputs(env)
    assert (inputs.optimizer, inputs.base_optimizer) == ("onnxsim", "onnxsim")
    install, sweep = plan(inputs, "py")
    assert install.title == "install optimizer onnxsim" and "--optimizer" in sweep.command


def test_bisect_tries_the_releases_as_the_workspaces_owner_without_a_token() -> None:
    env = {"INPUT_MODE": "bisect", "INPUT_OPTIMIZER": "onnxoptimizer==0.4.2", "INPUT_BISECT_BUDGET": "20"}
    (argv,) = build_argv(env)
    report, optimizer = "ditox-report/report.json", "onnxoptimizer==0.4.2"
    assert argv == ["bisect", "--report", report, "--optimizer", optimizer, "--budget", "20.0"]
    # it installs and runs builds of the optimizer; last night's report is none of its business
    steps = plan(read_inputs({**env, "INPUT_PREVIOUS": "workflow:nightly.yml"}), "python")
    assert [s.title for s in steps] == ["ditox-ci bisect"]
    assert steps[0].as_workspace_owner and not steps[0].needs_token
