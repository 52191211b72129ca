"""The nightly's previous-report step (`ditox-ci previous`, what `previous: workflow:nightly.yml`
runs) against the local GitHub server: the newest successful run of the workflow on the branch
that still has the report artifact, downloaded through the redirect GitHub answers with."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import pytest

from ditox_ci.__main__ import main_inner
from ditox_ci.errors import ConfigError, GitHubError, InputError
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


def test_the_newest_successful_run_on_the_branch_with_the_artifact_is_fetched(tmp_path: Path) -> None:
    with GitHubServer() as server:
        wanted = _report_bytes(tmp_path, BUG_A, BUG_B)
        newer = _report_bytes(tmp_path, BUG_A)
        older = _report_bytes(tmp_path, BUG_B)

        def artifact(data: bytes, name: str = "ditox-report") -> dict[str, bytes]:
            return {name: _zip(**{"report.json": data})}

        nightly = "nightly.yml"
        server.add_workflow_run(nightly, artifacts=artifact(older))
        server.add_workflow_run(nightly, artifacts=artifact(wanted))
        server.add_workflow_run(nightly, conclusion="failure", artifacts=artifact(newer))
        server.add_workflow_run(nightly, branch="experiment", artifacts=artifact(newer))
        server.add_workflow_run(nightly, expired=True, artifacts=artifact(newer))
        server.add_workflow_run(nightly, artifacts=artifact(newer, name="other"))
        own = server.add_workflow_run(nightly, artifacts=artifact(newer))  # the run asking
        env = {**github_env(tmp_path, server.url), "GITHUB_RUN_ID": str(own)}
        out = tmp_path / "previous"
        argv = ["previous", "--workflow", "nightly.yml", "--branch", "main", "--out", str(out)]
        assert main_inner(argv, env) == 0
        assert _fingerprints(out / "report.json") == _fingerprints(tmp_path / "r2.json")
        assert not (out / "ditox-report.zip").exists()


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
