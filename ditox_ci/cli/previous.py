"""`ditox-ci previous`: download the report of a workflow's last finished run."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from ditox_ci.errors import EXIT_OK, ConfigError, GitHubUnavailable
from ditox_ci.github.client import RetryPolicy
from ditox_ci.github.context import GitHubContext
from ditox_ci.github.previous import RUNS_LISTED, RUNS_LOOKED_AT, fetch_previous
from ditox_ci.log import Log
from ditox_ci.options import resolve
from ditox_ci.report.outputs import REPORT_ARTIFACT

NAME = "previous"
HELP = "download the report.json of a workflow's last finished run (GITHUB_* env, actions: read)"
DESCRIPTION = f"""\
Find the newest finished run of WORKFLOW in this repository (GITHUB_REPOSITORY) that still has
the ARTIFACT a report job uploaded, among the runs of the repository's own code (head repository
GITHUB_REPOSITORY, not a fork) on a trusted trigger (schedule, workflow_dispatch, push), and write
its report.json to OUT. A run that failed counts (a nightly fails on the night it finds a bug, and
the next night must know that bug); a report from an interrupted sweep, or one that skipped more
than its --max-skipped, does not (the models it never judged would make their bugs new again).
The log says which run was taken and why any newer one was passed over. Pass that file as
--previous to sweep (its timings balance the shards) and publish (findings gone since are fixed;
with --close-fixed their issues are closed). No such run yet (the first night) is not an error:
nothing is written and the exit code is 0. Nor is GitHub being down (5xx, the network, a rate
limit past the wait) once the retries are spent: a warning says so, nothing is written, and the
stages run as on the first night (nothing is marked fixed, no issue closed). GitHub refusing (a
token without `actions: read`, an unknown workflow) stays an error. The token needs
`actions: read`. The retries follow publish's settings from the environment: DITOX_ATTEMPTS,
DITOX_BACKOFF_S, DITOX_MAX_WAIT_S and DITOX_TIMEOUT_S.

It looks at the {RUNS_LOOKED_AT} newest such runs, among the workflow's {RUNS_LISTED} newest finished runs.

example:
  ditox-ci previous --workflow nightly.yml --branch main --out previous
  ditox-ci sweep $(test -f previous/report.json && echo --previous previous/report.json) ...
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workflow", required=True, help="the workflow's file name, e.g. nightly.yml")
    parser.add_argument("--branch", help="only runs of this branch (default: any)")
    parser.add_argument("--artifact", default=REPORT_ARTIFACT, help="artifact name (default: %(default)s)")
    parser.add_argument("--out", default="previous", help="folder for report.json (default: %(default)s)")


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    log = Log(env)
    context = GitHubContext.from_env(env)
    log.mask(context.token)
    if not context.repository or not context.token:
        raise ConfigError("previous needs GITHUB_REPOSITORY and a token (GITHUB_TOKEN) with actions: read")
    try:
        found = fetch_previous(
            context,
            args.workflow,
            args.artifact,
            Path(args.out),
            log,
            branch=args.branch,
            own_run_id=env.get("GITHUB_RUN_ID"),
            # publish's retry settings (DITOX_ATTEMPTS, DITOX_BACKOFF_S, DITOX_MAX_WAIT_S ...)
            policy=resolve(RetryPolicy, env=env),
        )
    except GitHubUnavailable as exc:
        log.warning(
            f"{exc}; going on without a previous report: this run marks nothing fixed and closes no issue"
        )
        return EXIT_OK
    if found is None:
        what = (
            f"none of the {RUNS_LOOKED_AT} newest finished runs of {args.workflow} by this repository's own "
            f"code (among its {RUNS_LISTED} newest) has an artifact '{args.artifact}' from a whole sweep"
        )
        log.notice(f"{what}: no previous report")
    else:
        log.info(
            f"previous report: {found.report}, from run {found.run_url} ({found.conclusion}): the newest "
            f"finished run of {args.workflow} by {context.repository}'s own code on '{found.event}' with "
            "the artifact from a whole sweep"
        )
    return EXIT_OK
