"""The check run (or, for a token that may not create one, a commit status) of the report's commit."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from github.CheckRun import CheckRun
from github.GithubObject import NotSet

from ditox_ci.github.client import GitHubClient, WriteDenied
from ditox_ci.github.context import GitHubContext
from ditox_ci.github.surface import SURFACES, Surface, SurfaceOptions
from ditox_ci.github.text import CHECK_SUMMARY_LIMIT, Texts
from ditox_ci.log import Log
from ditox_ci.options import option
from ditox_ci.report.bugs import Bug, group_bugs, headline
from ditox_ci.report.kinds import KNOWN, NEW
from ditox_ci.report.model import Report

T = TypeVar("T")
ANNOTATIONS_PER_REQUEST = 50  # GitHub's limit per check-run create/update call
# the newest runs of the check's name on the commit a lost create is looked for among (a re-run of
# the same publish, and those of other jobs of the workflow, are the others)
LOOKUP_RUNS = 20
# An untrusted report's check never carries the gate's name: branch protection counts `neutral`
# as passing, so a fork's neutral `ditox-ci` would satisfy a required `ditox-ci` check
UNVERIFIED_SUFFIX = " (unverified)"
# A commit status has no neutral state; `pending` neither passes nor fails (`success` would pass)
def unverified_name(check_name: str) -> str:
    return check_name if check_name.endswith(UNVERIFIED_SUFFIX) else check_name + UNVERIFIED_SUFFIX


@dataclass(frozen=True)
class CheckOptions(SurfaceOptions):
    check: bool = option(True, help="check run / commit status")
    check_name: str = option("ditox-ci", help="the check run's (or commit status') name")
    max_annotations: int = option(50, help="annotations per check", metavar="N")


@SURFACES.register("check")
class Check(Surface):
    """Reports the check of `context.sha`; `url` is the check run's once known."""

    step = "report the check"
    switch = "check"
    permission = "checks: write (or statuses: write)"
    url_output = "check_url"
    options = CheckOptions

    def __init__(
        self, client: GitHubClient, context: GitHubContext, options: CheckOptions, failed: list[str]
    ) -> None:
        super().__init__(client, context, options, failed)
        self.check_name = unverified_name(options.check_name) if options.untrusted else options.check_name
        self.max_annotations = options.max_annotations
        self.untrusted = options.untrusted
        self.fail_on = options.fail_on

    def wanted(self, options: CheckOptions, log: Log) -> bool:
        return options.check and bool(self.context.sha)

    def publish(self, report: Report, texts: Texts) -> None:
        new = [bug for bug in group_bugs(report.findings, report.gate_tiers) if bug.status == NEW]
        # the job's gate (`fail_on`); under `never` the check shows what `new` would fail on, and
        # informs: it never fails, as the job does not
        informs = self.fail_on == "never"
        failing, skips = report.failures("new" if informs else self.fail_on), report.skips()
        # each status grouped apart: one fingerprint may be known on one model and new on another
        by_status = {
            s: group_bugs([f for f in failing if f.status == s], report.gate_tiers) for s in (NEW, KNOWN)
        }
        title = "; ".join(headline(bugs, status) for status, bugs in by_status.items() if bugs)
        title = title or "no new bugs"
        if skips.too_many:  # it closes the gate like a new bug: the check says so
            title = f"{title}; {skips.said()}"
        # (conclusion, commit status): an untrusted report's check is neutral and its status
        # pending, which never passes; under `never` a closed gate is neutral, a success status
        if not (failing or skips.too_many):
            conclusion, state = "success", "success"
        elif informs:
            conclusion, state = "neutral", "success"
        else:
            conclusion, state = "failure", "failure"
        # one annotation per bug, on a file of this repository: the culprit pass's source when the
        # workspace is the optimizer's checkout, else the workflow that ran the check
        places = [self.context.repository_file(report, bug.first) for bug in new]
        annotations = [_annotation(bug, place) for bug, place in zip(new, places) if place]
        annotations = annotations[: max(0, self.max_annotations)]
        # the summary leaves room for the notes below it
        summary = replace(texts, limit=CHECK_SUMMARY_LIMIT - 2000).check_summary()
        if len(new) > len(annotations) and all(places):
            summary += (
                f"\n\n{len(new) - len(annotations)} more new bugs are not annotated here (at most "
                f"{self.max_annotations} per check): {texts.pointer}\n"
            )
        if self.untrusted:
            conclusion, state, title = "neutral", "pending", f"unverified: {title}"
        try:
            self._check_run(conclusion, title, summary, annotations)
        except WriteDenied as exc:
            # Tokens without `checks: write` (and GitHub Apps without the permission) can still
            # set a commit status, which branch protection treats the same way.
            self.client.log.warning(f"cannot create a check run ({exc}); setting a commit status instead")
            self._status(state, title)

    def _status(self, state: str, title: str) -> None:
        client, context = self.client, self.context
        client.write(
            f"set commit status {self.check_name}={state} on {context.sha[:12]}",
            lambda: client.repo.get_commit(context.sha).create_status(
                state=state,
                description=title[:140],
                context=self.check_name,
                **({"target_url": context.run_url} if context.run_url else {}),
            ),
        )

    def _check_run(
        self, conclusion: str, title: str, summary: str, annotations: list[dict[str, Any]]
    ) -> None:
        """One check run whose annotations are exactly this report's. GitHub only ever adds
        annotations to a run, so a report whose annotations differ gets a new run (GitHub shows,
        and branch protection reads, the newest run of a name)."""
        client = self.client
        sha = self.context.sha
        name = self.check_name
        # this publish's own mark on the run it creates: a create whose answer was lost is looked up
        # by it, never by its name, which an older run of the commit also has (it kept `success`)
        mark = f"ditox-ci:{uuid.uuid4().hex}"

        def runs() -> Iterator[CheckRun]:
            return iter(client.repo.get_commit(sha).get_check_runs(check_name=name))

        def find() -> CheckRun | None:
            return None if client.offline else next(runs(), None)

        def created() -> CheckRun | None:
            if client.offline:
                return None
            newest = itertools.islice(runs(), LOOKUP_RUNS)
            return next((run for run in newest if run.external_id == mark), None)

        def annotated(run: CheckRun) -> list[tuple[Any, ...]]:
            return [_annotation_key(_listed_annotation(a)) for a in run.get_annotations()]

        existing = client.read(f"find check run {name} on {sha[:12]}", find)
        wanted = [_annotation_key(a) for a in annotations]
        same = existing is not None and client.read(
            f"read the annotations of {name}", partial(annotated, existing)
        ) == wanted
        if not same:
            existing = None
        output = {"title": title, "summary": summary}
        if existing is not None:
            self.url = existing.html_url
            current = (existing.conclusion, existing.output.title, existing.output.summary)
            if current == (conclusion, title, summary):
                client.log.info(f"   GitHub: check run {name} is up to date")
                return
            client.write(
                f"update check run {name} ({conclusion})",
                lambda: existing.edit(status="completed", conclusion=conclusion, output=output),
            )
            return
        batches = list(_batches(annotations, ANNOTATIONS_PER_REQUEST)) or [[]]
        run = client.write(
            f"create check run {name} ({conclusion}) with {len(batches[0])} annotations",
            lambda: client.repo.create_check_run(
                name=name,
                head_sha=sha,
                status="completed",
                conclusion=conclusion,
                output={**output, "annotations": batches[0]},
                details_url=self.context.run_url or NotSet,
                external_id=mark,
            ),
            lookup=created,
        )
        self.url = run.html_url if run is not None else ""
        for batch in batches[1:]:
            if run is None:  # a dry run created nothing to add to
                print(f"[dry-run] would add {len(batch)} annotations", file=client.out)
                continue
            client.write(
                f"add {len(batch)} annotations to check run {name}",
                partial(run.edit, output={**output, "annotations": batch}),
            )


def _batches(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _annotation(bug: Bug, path: str) -> dict[str, Any]:
    """Annotation text is plain text (GitHub does not render Markdown there)."""
    finding = bug.example
    passes = " + ".join(finding.culprit.passes) or finding.config
    message = finding.message[:2000]
    seen = f" and {len(bug.findings) - 1} more (model, config) pairs" if len(bug.findings) > 1 else ""
    return {
        "path": path.lstrip("/")[:1000],
        "start_line": 1,
        "end_line": 1,
        "annotation_level": "failure" if bug.gates else "warning",
        "title": f"{finding.kind} in {passes}"[:255],
        "message": f"{finding.model} ({finding.config}){seen}: {message}\nfingerprint {finding.fingerprint}",
    }


def _listed_annotation(annotation: Any) -> dict[str, Any]:
    """A listed annotation (PyGithub object) as the dict it was created from."""
    names = ("path", "start_line", "end_line", "annotation_level", "title", "message")
    return {name: getattr(annotation, name) for name in names}


def _annotation_key(annotation: dict[str, Any]) -> tuple[Any, ...]:
    return (
        annotation["path"],
        annotation["start_line"],
        annotation["annotation_level"],
        annotation["title"],
        annotation["message"],
    )
