"""`ditox-ci publish`: classify a report and publish it to GitHub (comment, check, issues)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from ditox_ci.ci.action import write_outputs
from ditox_ci.errors import EXIT_OK, ConfigError, GitHubError, UsageError
from ditox_ci.github.context import GitHubContext
from ditox_ci.github.publisher import PublishOptions, PublishResult, publish, texts_for
from ditox_ci.log import Log
from ditox_ci.options import add_flags, load_config_file, option, resolve
from ditox_ci.report.junit import write_junit
from ditox_ci.report.kinds import FAIL_ON
from ditox_ci.report.model import Report, write_report
from ditox_ci.report.sarif import write_sarif
from ditox_ci.report.schema import read_checked_report
from ditox_ci.safewrite import written_or_input_error
from ditox_ci.triage.baseline import ENTRY_OPTIMIZER, load_baseline
from ditox_ci.triage.classify import classify

NAME = "publish"
HELP = "publish a report to GitHub: sticky PR comment, check run, one issue per bug"
DESCRIPTION = """\
Classify the findings of a report (baseline, previous report) as new / known / fixed and
publish them: one sticky pull-request comment edited in place, a check run (or a commit status
when the token cannot create check runs) and, with --file-issues, one issue per fingerprint.
Re-running is safe: everything the bot wrote is found again through hidden markers.

Reads GITHUB_API_URL, GITHUB_REPOSITORY, GITHUB_EVENT_NAME, GITHUB_EVENT_PATH, GITHUB_SHA and the
token from INPUT_GITHUB_TOKEN or GITHUB_TOKEN; options also from INPUT_<NAME> / DITOX_<NAME>.

examples:
  ditox-ci publish --report out/report.json --dry-run            # print every action
  ditox-ci publish --report fork/report.json --pr 123            # workflow_run after a fork PR
  ditox-ci publish --report out/report.json --baseline .ditox-baseline.yml \\
      --previous nightly/report.json --file-issues --close-fixed
"""


@dataclass(frozen=True)
class PublishSettings(PublishOptions):
    report: str = option("ditox-report/report.json", help="report.json to publish", metavar="FILE")
    baseline: str | None = option(None, help="known limitations (YAML)", metavar="FILE")
    previous: str | None = option(None, help="the last report (a nightly), for fixed/known", metavar="FILE")
    pr: int | None = option(
        None,
        help="the pull request to comment on when the event does not name it (workflow_run "
        "publishing a fork's report); commented only if its head is the report's commit",
        metavar="N",
    )
    sarif: str | None = option(None, help="also write the new findings as SARIF 2.1.0", metavar="FILE")
    junit: str | None = option(None, help="also write JUnit XML (model × config cases)", metavar="FILE")

    def __post_init__(self) -> None:
        if self.fail_on not in FAIL_ON:
            raise UsageError(f"--fail-on must be one of {', '.join(FAIL_ON)}, got {self.fail_on!r}")
        for name in ("max_new_issues", "max_annotations", "max_writes"):
            if getattr(self, name) < 0:
                raise UsageError(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(self, name)}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser, PublishSettings)  # publish's options and each surface's (github/surface.py)
    parser.add_argument("--config", metavar="FILE", type=Path, help="YAML config, `publish:` section")


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    flags = {k: v for k, v in vars(args).items() if k not in ("run", "config", "debug", "command")}
    settings = resolve(
        PublishSettings,
        flags=flags,
        env=env,
        config=load_config_file(args.config, "publish"),
    )
    log = Log(env)
    context = GitHubContext.from_env(env)
    log.mask(context.token)
    if settings.pr is not None and settings.pr != context.pr_number:
        if settings.pr < 1:
            raise UsageError(f"--pr must be a pull request number, got {settings.pr}")
        context = replace(context, pr_number=settings.pr, pr_unverified=True)

    # A report may come from a fork's own code: nothing acts on it before it passes the schema.
    report = read_checked_report(Path(settings.report))
    previous = read_checked_report(Path(settings.previous)) if settings.previous else None
    baseline = load_baseline(
        Path(settings.baseline) if settings.baseline else None,
        report.optimizer.name or ENTRY_OPTIMIZER,
    )
    swept, report = report, classify(report, baseline, previous)
    skips = report.skips()
    if skips.too_many:  # the Action's gate: as the sweep or merge that wrote it said
        log.error(skips.said())
    _require_a_github_context(context, settings.dry_run)
    # as root, beside what a process the optimizer left behind could reach: through no link
    _record(report, swept, Path(settings.report), log)
    # code scanning places an alert on a file of the repository, as the check its annotations
    sarif = partial(write_sarif, place=context.repository_file)
    for target, write in ((settings.sarif, sarif), (settings.junit, write_junit)):
        if target:
            try:
                write(report, Path(target))
            except OSError as exc:
                raise written_or_input_error(Path(target), exc) from None
    texts = texts_for(report, context, settings)
    # The summary goes first: it is the one output a read-only token cannot take away.
    log.summary(texts.comment(settings.comment_key, in_place=False))

    with log.group("publish to GitHub"):
        try:
            result = publish(report, context, settings, log, out=sys.stdout)
        except GitHubError as exc:
            log.summary(f"\n> ditox-ci could not publish to GitHub: {exc}\n")
            raise
    verb = "planned" if settings.dry_run else "done"
    log.info(f"   {len(result.done)} GitHub actions {verb}, {len(result.failed)} failed")
    for failure in result.failed:
        log.warning(f"GitHub: {failure}")
    if result.read_only:
        log.summary("\n> The token was read-only (fork pull request?): results are only here.\n")
    for text in result.summaries:
        log.summary(text)
    write_outputs(_outputs(result, settings), env)
    return EXIT_OK


def _record(classified: Report, swept: Report, path: Path, log: Log) -> None:
    """Write `classified` (by publish's own baseline and previous report, which the sweep may not
    have had) back to `path` when a finding differs from what the sweep wrote there (its status,
    what made it known), a dry run too (a local file, as SARIF's): the Action's
    gate and outputs, and the artifact uploaded after publish, then say what the check, comment and
    issues say."""
    if classified.findings == swept.findings:
        return
    try:
        write_report(classified, path)
    except OSError as exc:
        log.warning(
            f"cannot record the statuses published in {path} ({exc.strerror or exc}): the "
            "Action's gate and outputs read the report as the sweep wrote it"
        )


def _require_a_github_context(context: GitHubContext, dry_run: bool) -> None:
    """What publishing needs, said at once (a dry run plans against the same repository and
    commit): not a run that retries the network for a token it never had."""
    needed = (("GITHUB_REPOSITORY", context.repository), ("GITHUB_SHA", context.sha))
    missing = [name for name, value in needed if not value]
    if missing:
        raise ConfigError(
            f"publish needs the GitHub context of a workflow run; {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not set (a GitHub Actions job sets them; "
            "elsewhere set them, with GITHUB_EVENT_PATH for a pull request, to "
            f"{'plan' if dry_run else 'publish'} against that repository and commit)"
        )
    if not dry_run and not context.token:
        raise ConfigError(
            "no GitHub token: set the Action's github_token input (default: the job's token) or "
            "GITHUB_TOKEN, or use --dry-run to see what would be published"
        )


def _outputs(result: PublishResult, settings: PublishSettings) -> dict[str, str]:
    """The Action's outputs from this publish (GITHUB_OUTPUT; nothing outside a runner)."""
    return {
        **result.outputs,
        "sarif": settings.sarif or "",
        "junit": settings.junit or "",
    }
