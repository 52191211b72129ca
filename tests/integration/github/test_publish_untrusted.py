"""Publishing reports that may be hostile (issue 19, items 3, 4 and 7): a report is checked against
the shipped schema before anything acts on it, issues are closed or reopened only on what the
report really ran, never from an interrupted or untrusted report, the work is bounded whatever the
report's size, and untrusted text makes no links. Real sweeps show real reports pass the schema.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ditox_ci.errors import InputError
from ditox_ci.report.model import ModelEntry
from ditox_ci.report.schema import schema_errors
from tests.helpers import ROOT
from tests.integration.action_models import write_models, write_wrong_add
from tests.integration.github_fixtures import (
    BUG_A,
    BUG_B,
    PR,
    distinct_bugs,
    github_env,
    report,
    run_publish,
    sticky_comments,
    write,
)
from tests.integration.github_server import GitHubServer


def filed(server: GitHubServer, tmp_path: Path, *bugs) -> dict[str, dict]:
    env = github_env(tmp_path, server.url)
    path = write(tmp_path, "filed.json", report(*bugs))
    assert run_publish(["--report", str(path), "--file-issues"], env)[0] == 0
    return {b.fingerprint: next(i for i in server.bot_issues() if b.fingerprint in i["body"]) for b in bugs}


# -- the schema ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fingerprint", ["", "0123456789abcdef.001", "ab" * 41, "../../etc/passwd"])
def test_a_malformed_fingerprint_stops_publish_before_any_request(server, tmp_path: Path, fingerprint: str):
    path = write(tmp_path, "r.json", report(replace(BUG_A, fingerprint=fingerprint)))
    with pytest.raises(InputError, match=r"does not follow the report\.json schema"):
        run_publish(["--report", str(path), "--file-issues"], github_env(tmp_path, server.url))
    assert server.exchanges == []


def test_an_unknown_status_stops_publish(server, tmp_path: Path):
    data = report(BUG_A).to_json()
    data["findings"][0]["status"] = "reopen"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"findings/0/status"):
        run_publish(["--report", str(path)], github_env(tmp_path, server.url))


def test_reports_of_real_sweeps_and_merges_follow_the_schema(tmp_path: Path):
    models = tmp_path / "models"
    write_models(models)
    write_wrong_add(models / "wrong_add.onnx")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": f"{ROOT}:{ROOT / 'tests' / 'fakes'}"}

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ditox_ci", *argv]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    sweep = ["sweep", "--models", "models", "--optimizer", "faulty_optimizers:optimize", "--jobs", "1"]
    for index in range(2):
        done = cli(*sweep, "--configs", "default,single", "--shard", f"{index}/2", "--out", f"shard{index}")
        assert done.returncode in (0, 1), done.stderr
    assert cli("merge", "shard0", "shard1", "--out", "merged").returncode == 1  # new findings: the gate
    for folder in ("shard0", "shard1", "merged"):
        data = json.loads((tmp_path / folder / "report.json").read_text())
        assert schema_errors(data) == [], folder
    merged = json.loads((tmp_path / "merged" / "report.json").read_text())
    assert any(f["status"] == "new" for f in merged["findings"])  # the planted bug was found

    env.update(GITHUB_REPOSITORY="octo/optimizer", GITHUB_SHA="c" * 40)  # what the dry run plans against
    published = cli("publish", "--report", "merged/report.json", "--dry-run", "--sarif", "out.sarif")
    assert published.returncode == 0, published.stderr
    assert json.loads((tmp_path / "out.sarif").read_text())["runs"][0]["results"]


# -- close and reopen only on what the report ran -----------------------------------------------


def test_a_fixed_finding_on_a_model_the_report_never_ran_closes_nothing(server, tmp_path: Path):
    issue = filed(server, tmp_path, BUG_B)[BUG_B.fingerprint]
    crafted = replace(report(replace(BUG_B, status="fixed")), models=())  # claims fixed, ran nothing
    argv = ["--report", str(write(tmp_path, "fixed.json", crafted)), "--file-issues", "--close-fixed"]
    code, _, err = run_publish(argv, github_env(tmp_path, server.url))
    assert code == 0 and issue["state"] == "open"
    assert "stays open: this report did not run model 'test_pad/model.onnx' to completion" in err

    other_config = replace(report(replace(BUG_B, status="fixed")), stats={"configs": ["nop"]})
    argv = ["--report", str(write(tmp_path, "fixed2.json", other_config)), "--file-issues", "--close-fixed"]
    assert run_publish(argv, github_env(tmp_path, server.url))[0] == 0 and issue["state"] == "open"

    really = report(replace(BUG_B, status="fixed"))  # ran the model and its config: closes
    argv = ["--report", str(write(tmp_path, "fixed3.json", really)), "--file-issues", "--close-fixed"]
    assert run_publish(argv, github_env(tmp_path, server.url))[0] == 0 and issue["state"] == "closed"


def test_a_previous_report_that_claims_an_issues_fingerprint_on_another_model_closes_nothing(
    server, tmp_path: Path
):
    """The fingerprint is public (in the issue's marker): a previous report (a fork's, taken as the
    nightly's) may claim it on any model that ran clean. The issue closes only when this run ran
    the issue's own model and config, whatever the previous report names."""
    issue = filed(server, tmp_path, BUG_B)[BUG_B.fingerprint]
    env = github_env(tmp_path, server.url)
    lying = write(tmp_path, "lying.json", report(replace(BUG_B, model="test_conv/model.onnx", config="nop")))
    only_conv = (ModelEntry("test_conv/model.onnx", "test", "0" * 64),)
    this_run = write(tmp_path, "now.json", replace(report(), models=only_conv))
    argv = ["--report", str(this_run), "--previous", str(lying), "--file-issues", "--close-fixed"]
    code, _, err = run_publish(argv, env)
    assert code == 0 and issue["state"] == "open"
    assert "this report did not run model 'test_pad/model.onnx' to completion" in err

    ran_it = write(tmp_path, "ran.json", report())  # the issue's own model and config, bug gone
    argv = ["--report", str(ran_it), "--previous", str(lying), "--file-issues", "--close-fixed"]
    assert run_publish(argv, env)[0] == 0 and issue["state"] == "closed"


def test_an_issue_without_its_own_model_is_not_closed_until_a_run_records_it(server, tmp_path: Path):
    """An issue filed before subject markers names no model to check: it stays open, and the
    first run that sees the bug again records the model it saw it on."""
    issue = filed(server, tmp_path, BUG_B)[BUG_B.fingerprint]
    issue["body"] = re.sub(r"<!-- ditox-ci:subject [^>]*-->\n", "", issue["body"])
    env = github_env(tmp_path, server.url)
    fixed = ["--report", str(write(tmp_path, "fixed.json", report(replace(BUG_B, status="fixed"))))]
    code, _, err = run_publish([*fixed, "--file-issues", "--close-fixed"], env)
    assert code == 0 and issue["state"] == "open" and "names no model of its own" in err

    seen_again = write(tmp_path, "again.json", report(BUG_B))
    assert run_publish(["--report", str(seen_again), "--file-issues"], env)[0] == 0
    assert "ditox-ci:subject" in issue["body"]
    assert run_publish([*fixed, "--file-issues", "--close-fixed"], env)[0] == 0 and issue["state"] == "closed"


def test_an_interrupted_report_closes_nothing(server, tmp_path: Path):
    issue = filed(server, tmp_path, BUG_B)[BUG_B.fingerprint]
    rep = report(replace(BUG_B, status="fixed"))
    interrupted = replace(rep, stats={**rep.stats.to_json(), "interrupted": True})
    argv = ["--report", str(write(tmp_path, "cut.json", interrupted)), "--file-issues", "--close-fixed"]
    code, _, err = run_publish(argv, github_env(tmp_path, server.url))
    assert code == 0 and issue["state"] == "open" and "interrupted sweep" in err


def test_a_crafted_new_finding_on_a_model_not_run_reopens_nothing(server, tmp_path: Path):
    issue = filed(server, tmp_path, BUG_B)[BUG_B.fingerprint]
    issue.update(state="closed", state_reason="completed")
    crafted = replace(report(BUG_B), models=(ModelEntry("other.onnx", "t", "0" * 64),))
    argv = ["--report", str(write(tmp_path, "crafted.json", crafted)), "--file-issues"]
    code, _, err = run_publish(argv, github_env(tmp_path, server.url))
    assert code == 0 and issue["state"] == "closed" and "stays closed" in err
    assert len(server.bot_issues()) == 1


def test_an_untrusted_report_gives_a_neutral_check_and_touches_no_issue(server, tmp_path: Path):
    issue = filed(server, tmp_path, BUG_B)[BUG_B.fingerprint]
    issue.update(state="closed", state_reason="completed")
    env = github_env(tmp_path, server.url)
    argv = ["--report", str(write(tmp_path, "fork.json", report(BUG_A, BUG_B))), "--untrusted"]
    code, _, err = run_publish([*argv, "--file-issues", "--close-fixed"], env)
    assert code == 0 and "untrusted" in err
    assert issue["state"] == "closed" and len(server.bot_issues()) == 1  # BUG_A: no issue either
    newest = max(server.repo.check_runs.values(), key=lambda run: run["id"])
    assert newest["conclusion"] == "neutral" and newest["output"]["title"].startswith("unverified")
    assert "Unverified" in newest["output"]["summary"]
    assert len(sticky_comments(server)) == 1  # the pull request still hears about it


@pytest.mark.parametrize("check_name", [None, "ditox-ci"], ids=["default", "gate-name-given"])
def test_an_untrusted_check_never_carries_the_gates_name(server, tmp_path: Path, check_name):
    """Branch protection counts `neutral` as passing: a fork's neutral check named like pr.yml's
    required `ditox-ci` would satisfy it whatever its sweep found."""
    argv = ["--report", str(write(tmp_path, "fork.json", report(BUG_A))), "--untrusted"]
    argv += ["--check-name", check_name] if check_name else []
    assert run_publish(argv, github_env(tmp_path, server.url))[0] == 0
    assert [run["name"] for run in server.repo.check_runs.values()] == ["ditox-ci (unverified)"]


@pytest.mark.parametrize("found", [(), (BUG_A,)], ids=["clean", "new-bug"])
def test_an_untrusted_commit_status_is_never_success(server, tmp_path: Path, found):
    """Where check runs are denied, the fallback status has no neutral state: `pending`, named apart."""
    server.no_checks_tokens.add("write-token")
    argv = ["--report", str(write(tmp_path, "fork.json", report(*found))), "--untrusted"]
    assert run_publish(argv, github_env(tmp_path, server.url))[0] == 0
    statuses = [s for listed in server.repo.statuses.values() for s in listed]
    assert [(s["context"], s["state"]) for s in statuses] == [("ditox-ci (unverified)", "pending")]


def test_publish_writes_its_files_through_no_linked_folder(server, tmp_path: Path):
    """publish runs as root: an out folder swapped for a link gets neither junit.xml nor
    ditox.sarif where the link points, and the refusal is one input error."""
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    (tmp_path / "out").symlink_to(elsewhere)
    path = write(tmp_path, "r.json", report(BUG_A))
    for flag in ("--junit", "--sarif"):
        with pytest.raises(InputError, match="writes through no link"):
            run_publish(
                ["--report", str(path), flag, str(tmp_path / "out" / "f")], github_env(tmp_path, server.url)
            )
    assert list(elsewhere.iterdir()) == []


# -- bounded work ------------------------------------------------------------------------------


def test_two_thousand_findings_make_a_bounded_number_of_writes(server, tmp_path: Path):
    bugs = distinct_bugs(2000, "output-mismatch", "diff")
    env = github_env(tmp_path, server.url)
    argv = ["--report", str(write(tmp_path, "big.json", report(*bugs))), "--file-issues"]
    assert run_publish(argv, env)[0] == 0
    writes = server.writes()
    # one comment, one check run (50 annotations), two labels, ten issues
    assert len(writes) == 1 + 1 + 2 + 10, [(x.method, x.path) for x in writes]
    (run,) = server.repo.check_runs.values()
    assert run["output"]["annotations_count"] == 50
    assert "1950 more new bugs are not annotated" in run["output"]["summary"]
    assert len(run["output"]["summary"]) <= 65_535

    argv += ["--max-writes", "5"]  # the next commit: the budget stops the run early
    env = {**env, "GITHUB_EVENT_PATH": str(tmp_path / "event2.json")}
    event = {"pull_request": {"number": PR, "head": {"sha": "c" * 40}}}
    (tmp_path / "event2.json").write_text(json.dumps(event))
    before = len(server.writes())
    code, _, err = run_publish(argv, env)
    assert code == 0 and len(server.writes()) - before == 5 and "--max-writes" in err


# -- no links from untrusted text --------------------------------------------------------------


def test_untrusted_text_makes_no_links_in_comments_issues_and_checks(server, tmp_path: Path):
    hostile = "see https://evil.example/x or www.evil.example, GH-1 and #1"
    bug = replace(BUG_A, model="links/model.onnx", measured={**BUG_A.measured, "message": hostile})
    rep = replace(report(bug), models=(ModelEntry("links/model.onnx", "t", "0" * 64),))
    # what the PR changed names the PR's own files: a file may be named like a link
    impact = {"since": hostile, "files": 2, "passes": [], "shared": ["www.evil.example", "](https://evil.example/y)"]}
    rep = replace(rep, stats=replace(rep.stats, impact=impact))
    argv = ["--report", str(write(tmp_path, "links.json", rep)), "--file-issues"]
    assert run_publish(argv, github_env(tmp_path, server.url))[0] == 0
    texts = [c["body"] for c in server.repo.comments.values()]
    assert any("What the PR changed" in text for text in texts)
    texts += [i["body"] for i in server.bot_issues()] + [i["title"] for i in server.bot_issues()]
    texts += [run["output"]["summary"] for run in server.repo.check_runs.values()]
    for text in texts:
        outside_code = text.split("```")[::2]  # GitHub makes no links inside code blocks
        for part in outside_code:
            assert "https://evil" not in part and "www.evil" not in part and "GH-1" not in part
