"""A GitHub runner for the example workflows, with the Action's real image.

Each job of an example is replayed step by step, as GitHub would run it:

- `ditox/action@v1` runs the image with podman the way GitHub runs a docker action: workspace,
  home, workflow and file-command folders mounted at `/github/...` and owned by the runner's uid
  (1001, not the container's root), `--workdir /github/workspace`, every action.yml input as
  `INPUT_<NAME>` (its default unless the step's `with:` sets it), `GITHUB_*` and `RUNNER_*`;
- `run:` steps run in bash in the workspace, with `GITHUB_OUTPUT`;
- `actions/upload-artifact` and `actions/download-artifact` copy folders between jobs and runs
  (`name:`, `pattern:`, `run-id:`), as the artifact service would;
- `actions/checkout` lays out the checkout the test gives; one with git history keeps only its last
  commit (a clone `--depth 1`, actions/checkout's default) unless the step sets `fetch-depth: 0`.

`${{ … }}` expressions and `if:` conditions are evaluated from a table: one the table does not
know fails the test, so an edited example cannot slip past. Jobs that build the optimizer's wheels
with cibuildwheel are the only ones not replayed; the test puts PyPI's wheels of the same project
in their artifacts. The one input added to the examples' own `with:` is `models`, a small corpus
in place of the default one, so that the replay fits in CI's time.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import ROOT, parse_github_output

RUNNER_UID = 1001
TOKEN = "ghs_imagetestTOKEN0123456789abcdefghij"
RUNTIME_TOKEN = "ACTIONS_RUNTIME_TOKEN_imagetest_secret"
REPOSITORY = "onnx/optimizer"
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}")


def workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "examples" / name).read_text(encoding="utf-8"))


def chown_tree(folder: Path, uid: int = RUNNER_UID) -> None:
    for path in [folder, *folder.rglob("*")]:
        os.lchown(path, uid, uid)


def fetched(workspace: Path, depth: str) -> None:
    """What actions/checkout leaves of a checkout with history: its last `depth` commits (a shallow
    clone), all of them for depth 0."""
    if depth == "0" or not (workspace / ".git").is_dir():
        return
    full = workspace.with_name(f"{workspace.name}.full")
    workspace.rename(full)
    with tempfile.NamedTemporaryFile("w", suffix=".gitconfig") as config:
        # the checkout is the runner's, not ours: git's upload-pack takes safe.directory only from
        # the global config, not from -c
        config.write("[safe]\n\tdirectory = *\n")
        config.flush()
        env = {"PATH": os.environ["PATH"], "GIT_CONFIG_GLOBAL": config.name}
        clone = ["git", "clone", "-q", "--depth", depth, f"file://{full}", str(workspace)]
        subprocess.run(clone, check=True, capture_output=True, env=env)
    shutil.rmtree(full)
    chown_tree(workspace)


def not_the_runners(folder: Path) -> list[str]:
    """Files in `folder` that the runner's later steps could not clean up or change."""
    return [str(p) for p in [folder, *folder.rglob("*")] if p.lstat().st_uid != RUNNER_UID]


@dataclass
class Event:
    """What triggered the run: its name, payload, commit and ref."""

    name: str
    payload: dict[str, Any]
    sha: str
    ref: str
    ref_name: str


@dataclass
class StepResult:
    code: int
    outputs: dict[str, str]
    log: str
    summary: str


@dataclass
class JobRun:
    """A replayed job: its workspace and each step's result, by id (or by index)."""

    workspace: Path
    results: dict[str, StepResult] = field(default_factory=dict)
    failed: bool = False
    # the folder an upload-pages-artifact step took, when one ran
    pages: Path | None = None

    def action_results(self) -> list[StepResult]:
        return [r for key, r in self.results.items() if key.startswith("ditox:")]


@dataclass
class Runner:
    image: str
    root: Path
    api_url: str
    # the corpus the Action's sweeps run on, in place of the default one
    models: str
    artifacts: dict[int, dict[str, Path]] = field(default_factory=dict)
    runs: int = 0
    containers: int = 0
    # containers started with background=True, by job folder name
    background: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def new_run(self) -> int:
        self.runs += 1
        return 4000 + self.runs

    def upload(self, run_id: int, name: str, source: Path) -> Path:
        stored = self.root / "artifacts" / str(run_id) / name
        shutil.rmtree(stored, ignore_errors=True)
        shutil.copytree(source, stored)
        self.artifacts.setdefault(run_id, {})[name] = stored
        return stored

    def job(
        self,
        workflow_name: str,
        job_name: str,
        event: Event,
        run_id: int,
        checkout: Callable[[Path], None],
        matrix: dict[str, Any] | None = None,
        values: dict[str, str] | None = None,
    ) -> JobRun:
        """Replay one job (one matrix leg); `values` adds expression values (e.g. a run id)."""
        spec = workflow(workflow_name)["jobs"][job_name]
        matrix = matrix or {}
        label = "-".join([job_name, *map(str, matrix.values())])
        base = self.root / f"run{run_id}-{label}"
        shutil.rmtree(base, ignore_errors=True)
        run = JobRun(base / "workspace")
        for folder in ("workspace", "home", "workflow", "file_commands"):
            (base / folder).mkdir(parents=True)
        (base / "workflow" / "event.json").write_text(json.dumps(event.payload))
        context = _Context(event, matrix, spec.get("strategy", {}).get("matrix", {}), values or {})
        for index, step in enumerate(spec["steps"]):
            key = step.get("id") or str(index)
            condition = str(step.get("if", "success()"))
            if not context.condition(condition, run):
                continue
            uses = str(step.get("uses", ""))
            inputs = {k: context.fill(str(v), run) for k, v in (step.get("with") or {}).items()}
            if uses.startswith("actions/checkout@"):
                checkout(run.workspace)
                fetched(run.workspace, inputs.get("fetch-depth", "1"))
            elif uses.startswith("actions/upload-artifact@"):
                self._upload(run, run_id, inputs)
            elif uses.startswith("actions/download-artifact@"):
                self._download(run, run_id, inputs)
            elif uses.startswith("ditox/action@"):
                result = self.action(base, workflow_name, event, run_id, inputs)
                run.results[f"ditox:{key}"] = run.results[key] = result
                run.failed |= result.code != 0
            elif "run" in step:
                script = context.fill(step["run"], run)
                run.results[key] = self._shell(base, script, step.get("env", {}), context, run)
                run.failed |= run.results[key].code != 0
            elif uses.startswith("actions/upload-pages-artifact@"):
                site = run.workspace / inputs["path"]
                assert (site / "index.html").is_file(), f"{workflow_name} {job_name}: no index.html in {site}"
                run.pages = site
            elif uses.startswith("github/codeql-action/upload-sarif@"):
                sarif = json.loads((run.workspace / inputs["sarif_file"]).read_text())
                assert sarif["version"] == "2.1.0", inputs
            else:
                raise AssertionError(f"{workflow_name} {job_name}: the replay does not know step {step}")
        return run

    def _upload(self, run: JobRun, run_id: int, inputs: dict[str, str]) -> None:
        staged = run.workspace.parent / "upload" / inputs["name"]
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        matches = sorted(glob.glob(str(run.workspace / inputs["path"])))
        if not matches:  # upload-artifact's default (if-no-files-found: warn): no artifact
            return
        for match in map(Path, matches):
            if match.is_dir():
                shutil.copytree(match, staged, dirs_exist_ok=True)
            else:
                shutil.copy2(match, staged / match.name)
        self.upload(run_id, inputs["name"], staged)

    def _download(self, run: JobRun, run_id: int, inputs: dict[str, str]) -> None:
        stored = self.artifacts.get(int(inputs.get("run-id") or run_id), {})
        target = run.workspace / inputs.get("path", ".")
        if "pattern" in inputs:  # each artifact into a folder named after it
            pattern = re.compile(inputs["pattern"].replace("*", ".*") + r"\Z")
            for name, folder in stored.items():
                if pattern.match(name):
                    shutil.copytree(folder, target / name)
        else:
            shutil.copytree(stored[inputs["name"]], target, dirs_exist_ok=True)

    def _shell(
        self, base: Path, script: str, env: dict[str, str], context: _Context, run: JobRun
    ) -> StepResult:
        output = base / "file_commands" / "run_output"
        output.write_text("")
        filled = {name: context.fill(str(value), run) for name, value in env.items()}
        chown_tree(base)
        # as the runner's user, who owns the workspace (git refuses a repository of another user)
        done = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=run.workspace,
            env={
                "PATH": os.environ["PATH"],
                "HOME": str(base / "home"),
                "GITHUB_OUTPUT": str(output),
                **context.variables(),
                **filled,
            },
            capture_output=True,
            text=True,
            timeout=120,
            user=RUNNER_UID,
            group=RUNNER_UID,
            extra_groups=[],
        )
        outputs = parse_github_output(output.read_text())
        return StepResult(done.returncode, outputs, done.stdout + done.stderr, "")

    def action(
        self,
        base: Path,
        workflow_name: str,
        event: Event,
        run_id: int,
        inputs: dict[str, str],
        podman_flags: tuple[str, ...] = (),
        background: bool = False,
    ) -> StepResult:
        """The Action's container, run as GitHub runs it; inputs as the step's `with:` gives them."""
        commands = base / "file_commands"
        for name in ("set_output", "step_summary", "set_env", "add_path", "save_state"):
            (commands / name).write_text("")
        if "models" not in inputs and inputs.get("mode", "all") in ("sweep", "all"):
            inputs = {**inputs, "models": self.models}
        env_file = base / "env"
        env_file.write_text(
            "".join(f"{k}={v}\n" for k, v in self.environment(workflow_name, event, run_id, inputs).items())
        )
        chown_tree(base)
        self.containers += 1
        command = [
            "podman", "run", "--rm", "--name", f"ditox-{base.name}", "--network", "host",
            "--workdir", "/github/workspace",
            "-v", f"{base / 'workspace'}:/github/workspace",
            "-v", f"{base / 'home'}:/github/home",
            "-v", f"{base / 'workflow'}:/github/workflow",
            "-v", f"{commands}:/github/file_commands",
            "--env-file", str(env_file), *podman_flags, self.image,
        ]  # fmt: skip
        log = base / "action.log"
        with log.open("w") as handle:
            process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT)
            if background:
                self.background[base.name] = process
                return StepResult(-1, {}, "", "")
            code = process.wait(timeout=1800)
        return StepResult(
            code,
            parse_github_output((commands / "set_output").read_text()),
            log.read_text(errors="replace"),
            (commands / "step_summary").read_text(),
        )

    def environment(
        self, workflow_name: str, event: Event, run_id: int, inputs: dict[str, str]
    ) -> dict[str, str]:
        """What GitHub's runner passes a docker action: GITHUB_*, RUNNER_*, credentials, INPUT_*."""
        action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
        unknown = set(inputs) - set(action["inputs"])
        assert not unknown, f"inputs action.yml does not declare: {unknown}"
        env = {
            "HOME": "/github/home",
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_JOB": "ditox",
            "GITHUB_REPOSITORY": REPOSITORY,
            "GITHUB_REPOSITORY_OWNER": REPOSITORY.split("/")[0],
            "GITHUB_EVENT_NAME": event.name,
            "GITHUB_EVENT_PATH": "/github/workflow/event.json",
            "GITHUB_SHA": event.sha,
            "GITHUB_REF": event.ref,
            "GITHUB_REF_NAME": event.ref_name,
            "GITHUB_RUN_ID": str(run_id),
            "GITHUB_RUN_NUMBER": "1",
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_WORKFLOW": workflow(workflow_name)["name"],
            "GITHUB_WORKFLOW_REF": f"{REPOSITORY}/.github/workflows/{workflow_name}@{event.ref}",
            "GITHUB_WORKSPACE": "/github/workspace",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_API_URL": self.api_url,
            "GITHUB_ACTION": "__ditox_action",
            "GITHUB_ACTION_REPOSITORY": "ditox/action",
            "GITHUB_ACTION_REF": "v1",
            "GITHUB_OUTPUT": "/github/file_commands/set_output",
            "GITHUB_STEP_SUMMARY": "/github/file_commands/step_summary",
            "GITHUB_ENV": "/github/file_commands/set_env",
            "GITHUB_PATH": "/github/file_commands/add_path",
            "GITHUB_STATE": "/github/file_commands/save_state",
            "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64",
            "RUNNER_TEMP": "/home/runner/work/_temp",
            "ACTIONS_RUNTIME_TOKEN": RUNTIME_TOKEN,
            "ACTIONS_RUNTIME_URL": "http://127.0.0.1:9/runtime/",
        }
        for name, spec in action["inputs"].items():
            value = inputs.get(name, str(spec.get("default", "")))
            env[f"INPUT_{name.upper()}"] = TOKEN if "github.token" in value else value
        return env


@dataclass
class _Context:
    event: Event
    matrix: dict[str, Any]
    matrix_spec: dict[str, Any]
    values: dict[str, str]

    def variables(self) -> dict[str, str]:
        event = self.event
        return {"GITHUB_SHA": event.sha, "GITHUB_REF": event.ref, "GITHUB_REF_NAME": event.ref_name}

    def value(self, expression: str, run: JobRun) -> str:
        expression = expression.strip()
        step = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expression)
        if step:
            result = run.results.get(step.group(1))
            return result.outputs.get(step.group(2), "") if result else ""
        if expression.startswith("matrix."):
            return str(self.matrix[expression[len("matrix.") :]])
        if expression in ("strategy.job-index", "strategy.job-total"):
            (axis,) = self.matrix_spec.values()
            (name,) = self.matrix
            index = axis.index(self.matrix[name])
            return str(index if expression.endswith("index") else len(axis))
        base_ref = self.event.payload.get("pull_request", {}).get("base", {}).get("ref", "")
        known = {"github.ref_name": self.event.ref_name, "github.base_ref": base_ref, "github.token": TOKEN}
        known |= self.values
        assert expression in known, f"the replay does not know the expression {expression!r}"
        return known[expression]

    def fill(self, text: str, run: JobRun) -> str:
        return _EXPRESSION.sub(lambda match: self.value(match.group(1), run), text)

    def condition(self, condition: str, run: JobRun) -> bool:
        condition = _EXPRESSION.sub(lambda match: match.group(1).strip(), condition).strip()
        if condition in ("always()", "!cancelled()"):
            return True
        if condition == "success()":
            return not run.failed
        return all(self._term(term, run) for term in condition.split(" && "))

    def _term(self, term: str, run: JobRun) -> bool:
        """One `&&` term of a condition: `!cancelled()`, or a step's output compared with ''
        or with a string."""
        if term == "!cancelled()":
            return True
        output = re.fullmatch(r"(steps\.\w+\.outputs\.[\w-]+) != '([^']*)'", term)
        if output:
            return str(self.value(output.group(1), run) or "") != output.group(2)
        raise AssertionError(f"the replay does not know the condition term {term!r}")
