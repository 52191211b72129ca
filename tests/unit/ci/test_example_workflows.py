"""What every example workflow that files issues needs, read from examples/*.yml as a maintainer
copies them, and the permissions docs/threat-model.md gives each job. The image tests replay
pr.yml, nightly.yml, the fork pair and release.yml; the nightlies of the other optimizers install
ditox-ci from GitHub, so their shape is checked here: without `previous` a nightly calls last
night's bugs new every night and never closes a fixed one; two publishers at once (a manual run
beside the scheduled one, or a matrix of report jobs) each open an issue for one bug; a matrix
of report jobs under one check name shows whichever finished last."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ditox_ci.report.outputs import REPORT_ARTIFACT
from tests.helpers import ROOT, option_names

EXAMPLES = sorted((ROOT / "examples").glob("*.yml"))


def _workflow(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _publishes(job: dict[str, Any], modes: tuple[str, ...] = ("publish",)) -> list[dict[str, Any]]:
    return [
        step["with"]
        for step in job.get("steps", [])
        if str(step.get("uses", "")).startswith("ditox/action@") and step["with"].get("mode") in modes
    ]


def _artifacts(steps: list[dict[str, Any]], action: str, condition: str | None = None) -> list[str]:
    """The artifacts `steps` upload or download (`action`), those run on `condition` alone if given."""
    return [
        str(step["with"]["name"])
        for step in steps
        if str(step.get("uses", "")).startswith(f"actions/{action}-artifact@")
        and "name" in step["with"]
        and condition in (None, step.get("if"))
    ]


def _uploads_after_publish(job: dict[str, Any]) -> list[str]:
    """The artifacts uploaded after the publish step, once it went through (its outputs are set):
    a report whose publish did not go through must not be tomorrow's previous."""
    steps = job.get("steps", [])
    publish = next(i for i, step in enumerate(steps) if step.get("with", {}).get("mode") == "publish")
    went_through = f"${{{{ !cancelled() && steps.{steps[publish].get('id')}.outputs.report != '' }}}}"
    return _artifacts(steps[publish + 1 :], "upload", went_through)


FILING = [
    (path.name, name)
    for path in EXAMPLES
    for name, job in _workflow(path)["jobs"].items()
    if any(str(inputs.get("file_issues")) == "true" for inputs in _publishes(job))
]


def test_the_nightlies_are_among_the_workflows_that_file_issues() -> None:
    assert {workflow for workflow, _ in FILING} >= {
        "nightly.yml",
        "nightly-onnxslim.yml",
        "nightly-onnxscript.yml",
        "nightly-onnxruntime.yml",
    }


@pytest.mark.parametrize(("workflow", "job_name"), FILING)
def test_a_job_that_files_issues_knows_last_nights_report_and_publishes_alone(
    workflow: str, job_name: str
) -> None:
    data = _workflow(ROOT / "examples" / workflow)
    job = data["jobs"][job_name]
    (inputs,) = _publishes(job)
    # last night's report, from this workflow's own artifact, uploaded by this very job
    assert inputs.get("previous") == f"workflow:{workflow}@${{{{ github.ref_name }}}}", inputs
    assert inputs.get("artifact", REPORT_ARTIFACT) in _uploads_after_publish(job)
    assert job["permissions"].get("actions") == "read"
    assert str(inputs.get("close_fixed")) == "true"
    # one publisher at a time, across runs and within the run's matrix
    assert data["concurrency"]["cancel-in-progress"] is False
    assert "github.ref" in data["concurrency"]["group"]
    matrix = job.get("strategy", {}).get("matrix")
    if matrix:
        assert job["strategy"].get("max-parallel") == 1
        assert all(f"matrix.{axis}" in inputs.get("check_name", "") for axis in matrix), inputs
        assert all(f"matrix.{axis}" in inputs["artifact"] for axis in matrix), inputs


PUBLISHING = [
    (path.name, name)
    for path in EXAMPLES
    for name, job in _workflow(path)["jobs"].items()
    if _publishes(job, ("publish", "all"))
]


@pytest.mark.parametrize(("workflow", "job_name"), PUBLISHING)
def test_the_artifact_the_texts_name_is_the_one_the_job_has(workflow: str, job_name: str) -> None:
    """The comment, check and issues say "download the `<artifact>` artifact": the job uploads it, or
    publishes one it downloaded (the fork pair)."""
    job = _workflow(ROOT / "examples" / workflow)["jobs"][job_name]
    (inputs,) = _publishes(job, ("publish", "all"))
    steps = job.get("steps", [])
    has = _artifacts(steps, "upload") + _artifacts(steps, "download")
    assert inputs.get("artifact", REPORT_ARTIFACT) in has


ROW = re.compile(r"^\| `(?P<workflow>[\w.-]+\.yml)` (?P<jobs>[\w, -]+?) \| (?P<permissions>[^|]+) \|", re.M)


def _documented() -> list[tuple[str, str, set[str]]]:
    text = (ROOT / "docs" / "threat-model.md").read_text(encoding="utf-8")
    rows = []
    for row in ROW.finditer(text):
        granted = set(re.findall(r"`([\w-]+: (?:read|write))`", row["permissions"]))
        if granted:  # "read-only (GitHub gives fork PRs nothing else)" names none
            rows += [(row["workflow"], job.strip(), granted) for job in row["jobs"].split(",")]
    return rows


def test_the_threat_model_table_has_rows_for_the_nightlies() -> None:
    nightlies = ("nightly-onnxslim.yml", "nightly-onnxscript.yml", "nightly-onnxruntime.yml")
    assert {(w, j) for w, j, _ in _documented()} >= {(w, j) for w in nightlies for j in ("sweep", "report")}


@pytest.mark.parametrize(("workflow", "job_name", "granted"), _documented())
def test_the_threat_model_gives_each_job_the_permissions_its_workflow_grants(
    workflow: str, job_name: str, granted: set[str]
) -> None:
    data = _workflow(ROOT / "examples" / workflow)
    permissions = data["jobs"][job_name].get("permissions", data.get("permissions", {}))
    assert {f"{scope}: {level}" for scope, level in permissions.items()} == granted


def test_the_nightlys_since_job_bisects_with_options_the_cli_has_and_reports_that_exist() -> None:
    """The job after `report`: every `ditox-ci bisect` option its script gives is one the CLI has,
    it bisects the report the report job uploaded, and it runs only when there are new or fixed bugs."""
    data = _workflow(ROOT / "examples" / "nightly.yml")
    job = data["jobs"]["since"]
    assert job["needs"] == "report"
    assert "needs.report.outputs.new" in job["if"] and "needs.report.outputs.fixed" in job["if"]
    assert set(data["jobs"]["report"]["outputs"]) == {"new", "fixed"}
    script = next(step["run"] for step in job["steps"] if "ditox-ci bisect" in step.get("run", ""))
    command = script[script.index("ditox-ci bisect") :].replace("\\\n", " ")
    given = re.findall(r"(--[\w-]+)", command + " " + script[script.index("range=(") :])
    known = option_names("bisect")
    assert given and all(flag in known for flag in given), (given, sorted(known))
    assert "--report ditox-report" in command and "--budget" in command
    assert _artifacts(job["steps"], "download") == ["ditox-report", "optimizer-wheel"]
    assert "--optimizer dist/*.whl" in command  # the build the bugs were found with
    assert job["steps"][0]["with"]["fetch-depth"] == 0
