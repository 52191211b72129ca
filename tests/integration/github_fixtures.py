"""Realistic reports for the publisher tests: several kinds and culprits, hostile strings."""

from __future__ import annotations

import argparse
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from ditox_ci.cli import publish
from ditox_ci.report.model import Culprit, Finding, ModelEntry, Report, write_report

HOSTILE_MODEL = "evil/<img src=x onerror=alert(1)> @octocat ```` ](http://x) #1.onnx"
HOSTILE_MESSAGE = "boom\n```\n@maintainers </details><script>alert(1)</script>\u202egnp.exe"
SHA = "a" * 40
PR = 7
WORKFLOW = ".github/workflows/pr.yml"


def finding(fp: str, kind: str, model: str, passes: tuple[str, ...], message: str) -> Finding:
    return Finding(
        fingerprint=fp,
        kind=kind,
        model=model,
        config=f"pass:{passes[0]}" if len(passes) == 1 else "default",
        culprit=Culprit("pass" if len(passes) == 1 else "interaction", passes, "bisect", 4),
        measured={"message": message, "max_abs": 0.5, "output": "y"},
        repro=f"repro/{fp}/",
    )


BUG_A = finding(
    "0123456789abcdef0001", "output-mismatch", HOSTILE_MODEL, ("fuse_bn_into_conv",), HOSTILE_MESSAGE
)
BUG_B = finding(
    "0123456789abcdef0002",
    "optimizer-crash",
    "test_pad/model.onnx",
    ("fuse_pad_into_conv", "eliminate_nop_pad"),
    "Segmentation fault (signal 11)",
)
BUG_B_OTHER_MODEL = finding(
    "0123456789abcdef0002",
    "optimizer-crash",
    "test_pad2/model.onnx",
    ("fuse_pad_into_conv", "eliminate_nop_pad"),
    "Segmentation fault",
)
BY_DESIGN = finding(
    "0123456789abcdef0003",
    "interface-change",
    "test_conv/model.onnx",
    ("split_init",),
    "outputs differ: 1 vs 2",
)


MODELS = (HOSTILE_MODEL, "test_pad/model.onnx", "test_pad2/model.onnx", "test_conv/model.onnx")


def distinct_bugs(count: int, kind: str, message: str) -> list[Finding]:
    """`count` findings of `kind` by one pass on one model, each with a fingerprint and a message
    (`message` and its number) of its own."""
    return [
        finding(f"{n:020x}", kind, "test_pad/model.onnx", ("fuse_pad_into_conv",), f"{message} {n}")
        for n in range(1, count + 1)
    ]


def report(*findings: Finding) -> Report:
    return Report(
        tool={"name": "ditox-ci", "version": "0.1.0"},
        optimizer={"name": "onnxoptimizer", "version": "0.4.2", "passes": [], "default_passes": []},
        environment={"onnx": "1.23.2", "onnxruntime": "1.32.0", "python": "3.11"},
        shard={"index": 0, "count": 1},
        models=tuple(ModelEntry(m, "test", "0" * 64) for m in MODELS),
        findings=findings,
        coverage={"split_init": {"models_changed": 1, "models_checked": 4}},
        # what a sweep records it ran: publish closes or reopens only on what the report ran
        stats={"configs": ["nop", "default", "pass:fuse_bn_into_conv", "pass:split_init"]},
    )


def github_env(tmp: Path, api_url: str, token: str = "write-token") -> dict[str, str]:
    event = tmp / "event.json"
    event.write_text(json.dumps({"number": PR, "pull_request": {"number": PR, "head": {"sha": SHA}}}))
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_API_URL": api_url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "octo/optimizer",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_SHA": "b" * 40,
        "GITHUB_RUN_ID": "42",
        "GITHUB_WORKFLOW_REF": f"octo/optimizer/{WORKFLOW}@refs/pull/{PR}/merge",
        "GITHUB_WORKSPACE": str(tmp),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
        "INPUT_GITHUB_TOKEN": token,
        "DITOX_WRITE_INTERVAL_S": "0",
        "DITOX_BACKOFF_S": "0.05",
        "DITOX_MAX_WAIT_S": "5",
    }


def write(tmp: Path, name: str, rep: Report) -> Path:
    path = tmp / name
    write_report(rep, path)
    return path


def run_publish(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    publish.add_arguments(parser)
    args = parser.parse_args(argv)
    args.config = None
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = publish.run(args, env)
    return code, out.getvalue(), err.getvalue()


def sticky_comments(server) -> list[dict]:
    return [c for c in server.comments_on(PR) if "ditox-ci:sticky" in c["body"]]
