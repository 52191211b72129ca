"""The nightly's previous-report step (`ditox-ci previous`, what `previous: workflow:nightly.yml`
runs) against the local GitHub server: the newest finished run of the workflow on the branch
that still has the report artifact from a whole sweep, downloaded through the redirect GitHub
answers with."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ditox_ci.__main__ import main_inner
from ditox_ci.errors import ConfigError, GitHubError, InputError
from ditox_ci.github.previous import RUNS_LOOKED_AT
from tests.helpers import ROOT
from tests.integration.github_fixtures import BUG_A, BUG_B, github_env, report, write
from tests.integration.github_server import GitHubServer


def _zip(**files: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, data in files.items():
            bundle.writestr(name.replace("__", "/"), data)
    return buffer.getvalue()


def _report_bytes(tmp_path: Path, *bugs: object) -> bytes:
    return write(tmp_path, f"r{len(bugs)}.json", report(*bugs)).read_bytes()  # type: ignore[arg-type]


def _fingerprints(path: Path) -> list[str]:
    return sorted(f["fingerprint"] for f in json.loads(path.read_text())["findings"])


def test_the_newest_finished_run_with_a_whole_report_is_fetched_failed_or_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with GitHubServer() as server:
        wanted = _report_bytes(tmp_path, BUG_A, BUG_B)
        newer = _report_bytes(tmp_path, BUG_A)
        stopped = json.loads(newer)
        stopped["stats"].update(interrupted=True, interrupted_by="SIGTERM")
        interrupted = json.dumps(stopped).encode()
        skipping = json.loads(newer)  # half its models skipped, over its --max-skipped 0.2
        skipping["stats"]["max_skipped"] = 0.2
        for model in skipping["models"][::2]:
            model.update(status="skipped", reason="the download failed")
        skipped = json.dumps(skipping).encode()

        def artifact(data: bytes, name: str = "ditox-report") -> dict[str, bytes]:
            return {name: _zip(**{"report.json": data})}

        nightly = "nightly.yml"
        server.add_workflow_run(nightly, artifacts=artifact(newer))
        # the night that found BUG_B failed its gate (fail_on: new): the next night must know it
        failed = server.add_workflow_run(nightly, conclusion="failure", artifacts=artifact(wanted))
        cut = server.add_workflow_run(nightly, conclusion="cancelled", artifacts=artifact(interrupted))
        holes = server.add_workflow_run(nightly, conclusion="failure", artifacts=artifact(skipped))
        server.add_workflow_run(nightly, branch="experiment", artifacts=artifact(newer))
        expired = server.add_workflow_run(nightly, expired=True, artifacts=artifact(newer))
        other = server.add_workflow_run(nightly, artifacts=artifact(newer, name="other"))
        own = server.add_workflow_run(nightly, artifacts=artifact(newer))  # the run asking
        env = {**github_env(tmp_path, server.url), "GITHUB_RUN_ID": str(own)}
        out = tmp_path / "previous"
        argv = ["previous", "--workflow", "nightly.yml", "--branch", "main", "--out", str(out)]
        assert main_inner(argv, env) == 0
        assert _fingerprints(out / "report.json") == _fingerprints(tmp_path / "r2.json")
        assert not (out / "ditox-report.zip").exists()
        err = capsys.readouterr().err
        assert f"run {cut} " in err and "its sweep was interrupted" in err
        assert f"run {holes} " in err and "skipped too much (50.0%25 of the corpus was skipped" in err
        assert f"/actions/runs/{failed} (failure)" in err
        # each run passed over is named with why (the threat model says the log does)
        assert f"/actions/runs/{expired}) is passed over: its artifact 'ditox-report' is expired" in err
        assert f"/actions/runs/{other}) is passed over: its artifact 'ditox-report' is absent" in err


def test_another_artifact_name_picks_that_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A workflow with a report job per matrix value uploads one artifact each."""
    with GitHubServer() as server:
        mine, theirs = _report_bytes(tmp_path, BUG_A, BUG_B), _report_bytes(tmp_path, BUG_A)
        reports = {"ditox-report-onnxruntime": _zip(**{"report.json": theirs})}
        reports["ditox-report-onnxruntime-extended"] = _zip(**{"report.json": mine})
        server.add_workflow_run("nightly.yml", artifacts=reports)
        out = tmp_path / "previous"
        argv = ["previous", "--workflow", "nightly.yml", "--out", str(out), "--artifact"]
        assert main_inner([*argv, "ditox-report-onnxruntime-extended"], github_env(tmp_path, server.url)) == 0
        assert _fingerprints(out / "report.json") == _fingerprints(tmp_path / "r2.json")
        # a misnamed one (the default here) would look like the first night every night: said
        (out / "report.json").unlink()
        assert main_inner([*argv, "ditox-report"], github_env(tmp_path, server.url)) == 0
        assert not (out / "report.json").exists()
        said = "no artifact 'ditox-report', only ditox-report-onnxruntime, ditox-report-onnxruntime-extended"
        assert said in capsys.readouterr().err


def test_the_first_night_has_no_previous_report_and_that_is_fine(tmp_path: Path) -> None:
    with GitHubServer() as server:
        server.add_workflow_run("nightly.yml", conclusion="failure")
        out = tmp_path / "previous"
        argv = ["previous", "--workflow", "nightly.yml", "--out", str(out)]
        assert main_inner(argv, github_env(tmp_path, server.url)) == 0
        assert not (out / "report.json").exists()


@pytest.mark.parametrize(
    ("archive", "says"),
    [
        (_zip(**{"nested__report.json": b"{}"}), "no top-level report.json"),
        (b"not a zip", "not a zip archive"),
        (_zip(**{"report.json": b'{"schema_version": 1e999}'}), "too large for a float"),
    ],
    ids=["no-report", "not-a-zip", "crafted-report"],
)
def test_an_artifact_that_is_no_report_is_an_input_error(tmp_path: Path, archive: bytes, says: str) -> None:
    with GitHubServer() as server:
        server.add_workflow_run("nightly.yml", artifacts={"ditox-report": archive})
        argv = ["previous", "--workflow", "nightly.yml", "--out", str(tmp_path / "previous")]
        with pytest.raises(InputError, match=says):
            main_inner(argv, github_env(tmp_path, server.url))


def test_a_workflow_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    with GitHubServer() as server:
        server.add_workflow_run("nightly.yml")
        argv = ["previous", "--workflow", "nightly.yaml", "--out", str(tmp_path / "previous")]
        with pytest.raises(ConfigError, match=r"no workflow 'nightly\.yaml' in octo/optimizer"):
            main_inner(argv, github_env(tmp_path, server.url))


def test_a_token_without_actions_read_is_a_github_error(tmp_path: Path) -> None:
    with GitHubServer() as server:
        server.add_workflow_run("nightly.yml")
        server.inject("GET", r"/actions/workflows/", "403", times=10)
        argv = ["previous", "--workflow", "nightly.yml", "--out", str(tmp_path / "previous")]
        with pytest.raises(GitHubError, match="actions: read"):
            main_inner(argv, github_env(tmp_path, server.url))


def test_a_refused_artifact_listing_is_a_github_error(tmp_path: Path) -> None:
    with GitHubServer() as server:
        server.add_workflow_run("nightly.yml", artifacts={"ditox-report": _zip(**{"report.json": b"{}"})})
        server.inject("GET", r"/actions/runs/\d+/artifacts", "403", times=10)
        argv = ["previous", "--workflow", "nightly.yml", "--out", str(tmp_path / "previous")]
        with pytest.raises(GitHubError, match=r"artifacts of run .*actions: read"):
            main_inner(argv, github_env(tmp_path, server.url))


@pytest.mark.parametrize(
    "route",
    [r"/actions/workflows/", r"/actions/runs/\d+/artifacts", r"/actions/artifacts/\d+/zip"],
    ids=["runs", "artifacts", "download"],
)
def test_github_down_leaves_no_previous_report_and_the_run_goes_on(
    tmp_path: Path, route: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An outage once the retries are spent is the first night again, said in a warning: the
    stages run without --previous, so nothing is marked fixed and no issue is closed."""
    with GitHubServer() as server:
        server.add_workflow_run("nightly.yml", artifacts={"ditox-report": _zip(**{"report.json": b"{}"})})
        server.inject("GET", route, "500", times=10)
        out = tmp_path / "previous"
        argv = ["previous", "--workflow", "nightly.yml", "--out", str(out)]
        assert main_inner(argv, github_env(tmp_path, server.url)) == 0
        assert not (out / "report.json").exists() and not (out / "ditox-report.zip").exists()
        assert "going on without a previous report" in capsys.readouterr().err
        assert any(x.status == 500 and re.search(route, x.path) for x in server.exchanges)


def test_a_forks_run_of_the_workflow_on_a_branch_named_main_is_never_the_previous_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fork PR that edits nightly.yml to run `on: pull_request` from its branch `main` makes a
    finished "nightly.yml on main" run with its own artifact; taken as previous, everything in
    it would be known. Nor does a pull request or workflow_run of the repository's own count."""
    with GitHubServer() as server:
        own = _report_bytes(tmp_path, BUG_B)
        forged = _report_bytes(tmp_path, BUG_A, BUG_B)

        def artifact(data: bytes) -> dict[str, bytes]:
            return {"ditox-report": _zip(**{"report.json": data})}

        nightly = "nightly.yml"
        taken = server.add_workflow_run(nightly, event="workflow_dispatch", artifacts=artifact(own))
        server.add_workflow_run(nightly, event="pull_request", artifacts=artifact(forged))
        fork = server.add_workflow_run(
            nightly, event="pull_request", head_repository="mallory/optimizer", artifacts=artifact(forged)
        )
        server.add_workflow_run(
            nightly, event="schedule", head_repository="mallory/optimizer", artifacts=artifact(forged)
        )
        out = tmp_path / "previous"
        argv = ["previous", "--workflow", nightly, "--branch", "main", "--out", str(out)]
        assert main_inner(argv, github_env(tmp_path, server.url)) == 0
        assert _fingerprints(out / "report.json") == [BUG_B.fingerprint]
        err = capsys.readouterr().err
        assert f"run {fork} " in err and "its code came from mallory/optimizer" in err
        assert "it ran on 'pull_request'" in err
        assert f"runs/{taken} (success): the newest finished run" in err and "on 'workflow_dispatch'" in err
        downloads = [x for x in server.exchanges if x.path.endswith("/zip")]
        assert len(downloads) == 1  # the forged artifacts were never fetched


def test_only_forged_runs_is_the_first_night(tmp_path: Path) -> None:
    with GitHubServer() as server:
        forged = {"ditox-report": _zip(**{"report.json": _report_bytes(tmp_path, BUG_A)})}
        server.add_workflow_run(
            "nightly.yml", event="pull_request", head_repository="mallory/x", artifacts=forged
        )
        out = tmp_path / "previous"
        assert (
            main_inner(
                ["previous", "--workflow", "nightly.yml", "--out", str(out)], github_env(tmp_path, server.url)
            )
            == 0
        )
        assert not (out / "report.json").exists()


def test_the_token_is_never_sent_to_a_download_url_off_the_apis_origin(tmp_path: Path) -> None:
    """The API names the archive's URL; one on another origin (here a second local server standing
    in for someone else's host) is refused before any request, so the token does not leave."""
    with GitHubServer() as server, GitHubServer() as elsewhere:
        data = {"ditox-report": _zip(**{"report.json": _report_bytes(tmp_path, BUG_A)})}
        server.add_workflow_run("nightly.yml", artifacts=data, archive_origin=elsewhere.url)
        out = tmp_path / "previous"
        with pytest.raises(GitHubError, match=r"not on the API's origin .*: the token is not sent there"):
            main_inner(
                ["previous", "--workflow", "nightly.yml", "--out", str(out)], github_env(tmp_path, server.url)
            )
        assert elsewhere.exchanges == [] and not (out / "report.json").exists()


def test_a_small_artifact_that_unpacks_to_millions_of_objects_is_refused_before_it_is_parsed(
    tmp_path: Path,
) -> None:
    """25 KB of zip holding 24 MiB of `{}` (unknown top-level key and all) peaked at 1.36 GiB of
    memory; its values are counted before any is built, in a process of its own to measure."""
    body = b'{"schema_version": 1, "junk": [' + b"{}," * (8 * 1024 * 1024) + b"{}]}"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("report.json", body)
    archive = buffer.getvalue()
    assert len(archive) < 100_000
    with GitHubServer() as server:
        server.add_workflow_run("nightly.yml", artifacts={"ditox-report": archive})
        out = tmp_path / "previous"
        env = {**os.environ, **github_env(tmp_path, server.url), "PYTHONPATH": str(ROOT)}
        # the child reports its own peak (VmHWM, of its own address space): getrusage's maxrss of a
        # child also counts the pages of the forked test process it was before its exec
        report_peak = (
            "import atexit, runpy, sys; atexit.register(lambda: sys.stderr.write(next(line for line in "
            "open('/proc/self/status') if line.startswith('VmHWM')))); sys.argv[0] = 'ditox-ci'; "
            "runpy.run_module('ditox_ci', run_name='__main__')"
        )
        argv = ["previous", "--workflow", "nightly.yml", "--out", str(out)]
        command = [sys.executable, "-c", report_peak, *argv]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    err = done.stderr
    assert done.returncode == InputError.exit_code, err
    assert "more than 2000000 JSON values" in err and "Traceback" not in err
    peak_kib = int(err.split("VmHWM:")[1].split()[0])
    assert peak_kib < 400 * 1024, f"peak {peak_kib // 1024} MiB"


def test_the_download_writes_through_no_link_in_the_out_folder(tmp_path: Path) -> None:
    """The download runs as root with the token; the out folder is in the workspace, which a
    process the optimizer left behind (the workspace owner's) could reach: a link at report.json
    is replaced, a linked out folder refused, and nothing is written where either points."""
    with GitHubServer() as server:
        data = {"ditox-report": _zip(**{"report.json": _report_bytes(tmp_path, BUG_A)})}
        server.add_workflow_run("nightly.yml", artifacts=data)
        victim, elsewhere = tmp_path / "victim.txt", tmp_path / "etc"
        victim.write_text("keep")
        elsewhere.mkdir()
        out = tmp_path / "previous"
        out.mkdir()
        (out / "report.json").symlink_to(victim)
        argv = ["previous", "--workflow", "nightly.yml", "--out", str(out)]
        assert main_inner(argv, github_env(tmp_path, server.url)) == 0
        assert victim.read_text() == "keep" and not (out / "report.json").is_symlink()

        linked = tmp_path / "linked"
        linked.symlink_to(elsewhere)
        with pytest.raises(InputError, match="writes through no link"):
            main_inner([*argv[:-1], str(linked)], github_env(tmp_path, server.url))
        assert list(elsewhere.iterdir()) == []


def test_runs_of_other_events_do_not_use_up_the_runs_looked_at(tmp_path: Path) -> None:
    """A nightly workflow that also runs on pull_request: the ten newest finished runs were all pull
    requests', and the night before looked like the first night (nothing marked fixed)."""
    with GitHubServer() as server:
        nightly = {"ditox-report": _zip(**{"report.json": _report_bytes(tmp_path, BUG_B)})}
        taken = server.add_workflow_run("nightly.yml", event="schedule", artifacts=nightly)
        for _ in range(12):
            server.add_workflow_run("nightly.yml", event="pull_request", artifacts={})
        out = tmp_path / "previous"
        argv = ["previous", "--workflow", "nightly.yml", "--out", str(out)]
        assert main_inner(argv, github_env(tmp_path, server.url)) == 0
        assert _fingerprints(out / "report.json") == [BUG_B.fingerprint]
        assert any(x.path.endswith(f"runs/{taken}/artifacts") for x in server.exchanges)


def test_the_runs_looked_at_end_with_a_warning_not_in_silence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with GitHubServer() as server:
        for _ in range(RUNS_LOOKED_AT + 2):
            server.add_workflow_run("nightly.yml", event="schedule", artifacts={})
        out = tmp_path / "previous"
        argv = ["previous", "--workflow", "nightly.yml", "--out", str(out)]
        assert main_inner(argv, github_env(tmp_path, server.url)) == 0
        assert not (out / "report.json").exists()
        err = capsys.readouterr().err
        assert f"no report among the last {RUNS_LOOKED_AT} trusted runs of nightly.yml" in err


def test_the_nights_before_come_with_the_report_taken_and_never_with_one_passed_over(tmp_path: Path) -> None:
    """`ditox-ci history` carries history.json forward: the previous report's artifact brings it,
    beside report.json; the history of a run whose report is not taken is not written."""
    taken = _report_bytes(tmp_path, BUG_A)
    stopped = json.loads(taken)
    stopped["stats"].update(interrupted=True, interrupted_by="SIGTERM")
    nights = b'{"schema_version": 1, "nights": []}'
    out = tmp_path / "previous"
    argv = ["previous", "--workflow", "nightly.yml", "--out", str(out)]
    with GitHubServer() as server:
        both = {"report.json": taken, "history.json": nights}
        server.add_workflow_run("nightly.yml", artifacts={"ditox-report": _zip(**both)})
        assert main_inner(argv, github_env(tmp_path, server.url)) == 0
        assert (out / "history.json").read_bytes() == nights
    (out / "history.json").unlink()
    with GitHubServer() as server:
        server.add_workflow_run("nightly.yml", artifacts={"ditox-report": _zip(**{"report.json": taken})})
        cut = {"report.json": json.dumps(stopped).encode(), "history.json": nights}
        server.add_workflow_run(
            "nightly.yml", conclusion="cancelled", artifacts={"ditox-report": _zip(**cut)}
        )
        assert main_inner(argv, github_env(tmp_path, server.url)) == 0
        assert (out / "report.json").is_file() and not (out / "history.json").exists()
