"""What a publish surface is: one kind of GitHub object the bot writes (a comment, a check, issues).

In the style of Polygraphy's BaseRunner, a surface declares what the publisher and the CLI need of
it and fills in `publish`: its options (a frozen dataclass that `PublishOptions` derives from, each
field declared with `ditox_ci.options.option`: its default and the help of its `--flag`), the option
that turns it on, the permission it needs, the Action output that names what it wrote, and any
text it adds to the step summary. The publisher
runs every registered surface (`SURFACES`) the same way, in the order `PublishOptions` names their
options among its bases; a new surface is its module, its options among those bases, its row in
the Action's table (`ci/inputs.py`), its template, and its inputs and output in action.yml.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar

from ditox_ci.github.client import GitHubClient
from ditox_ci.github.context import GitHubContext
from ditox_ci.github.text import Texts
from ditox_ci.log import Log
from ditox_ci.options import option
from ditox_ci.registry import Registry
from ditox_ci.report.kinds import FAIL_ON
from ditox_ci.report.model import Report


@dataclass(frozen=True)
class SurfaceOptions:
    """What every surface may read besides its own options."""

    # a report from a run we cannot vouch for (a fork's artifact): a neutral "unverified" check,
    # and no issue is opened, reopened or closed from it
    untrusted: bool = option(
        False,
        help="the report comes from a run whose code is not trusted (a fork's artifact): a neutral "
        "'unverified' check, and no issue is opened, reopened or closed",
    )
    # which findings close the gate (report.kinds.FAIL_ON): the check's conclusion follows the
    # job's, and the comment says whether known findings block
    fail_on: str = option(
        "new",
        help="which findings fail the check, as the Action's `fail_on` fails the job: new, any (new "
        "or known), never (the check is then neutral where it would fail)",
        choices=tuple(FAIL_ON),
    )


class Surface(ABC):
    """One kind of GitHub object. A subclass sets the class attributes and fills in `publish`."""

    # what the step is called in messages: "could not <step>", "the token may not <step>"
    step: ClassVar[str]
    # the boolean option that turns it on; its `--no-` flag turns it off
    switch: ClassVar[str]
    # what it needs in the workflow's `permissions:` block
    permission: ClassVar[str]
    # the Action output that names what it wrote (empty: none)
    url_output: ClassVar[str] = ""
    options: ClassVar[type[SurfaceOptions]]

    def __init__(self, client: GitHubClient, context: GitHubContext, options: Any, failed: list[str]) -> None:
        self.client = client
        self.context = context
        self.failed = failed  # the publish's list of failures
        self.url = ""

    @property
    def turn_off(self) -> str:
        return f"--no-{self.switch.replace('_', '-')}"

    def wanted(self, options: Any, log: Log) -> bool:
        """Whether this run publishes it: its switch is on and the event has what it needs."""
        return bool(getattr(options, self.switch))

    @abstractmethod
    def publish(self, report: Report, texts: Texts) -> None: ...

    def outputs(self) -> dict[str, str]:
        """The Action outputs it sets, whether it ran or not."""
        return {self.url_output: self.url} if self.url_output else {}

    def summary(self) -> str:
        """What it adds to the step summary after publishing (Markdown; empty: nothing)."""
        return ""


SURFACES: Registry[type[Surface]] = Registry("publish surface")


def numbers(values: list[int]) -> str:
    """A list of issue numbers as an Action output (a JSON array, for fromJSON)."""
    return json.dumps(values)


def surface_options() -> Iterator[Field[Any]]:
    """Every option the registered surfaces declare, once each, in registration order."""
    seen: set[str] = {item.name for item in fields(SurfaceOptions)}
    for surface in SURFACES.values():
        for item in fields(surface.options):
            if item.name not in seen:
                seen.add(item.name)
                yield item

