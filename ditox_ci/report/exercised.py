"""Passes a pull request adds or changes, and the models made for them in the PR check
(`triage.exercise`): what `report.stats["exercised"]` records, and the warning for one that fired
on nothing.

A new pass that no corpus model exercises would otherwise pass the check untested: the coverage
table shows a 0 among dozens of passes, and nothing says the PR's own pass was never run on a
model it rewrites. The warning is decided from the report's coverage, which counts the corpus and
the generated models of every shard (after a merge), so one shard's share cannot call it silent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ditox_ci.report.model import Report
from ditox_ci.report.stats import EXERCISED_KEY

# why a pass is exercised: the base build lacks it, or the PR touched its source file
WHY_NEW = "new"
WHY_CHANGED = "changed"
# the ids of the models made, among the report's models
MODEL_IDS_KEY = "model_ids"


@dataclass(frozen=True)
class ExercisedPass:
    """One pass the PR adds or changes: the generators chosen for it, and what it did to the
    generated models (every exercised pass runs on all of them): `models_changed` beyond the nop
    control, of `models_checked`; `not_run` says why it ran on none."""

    name: str
    why: str
    generators: tuple[str, ...] = ()
    models_checked: int = 0
    models_changed: int = 0
    not_run: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "why": self.why,
            "generators": list(self.generators),
            "models_checked": self.models_checked,
            "models_changed": self.models_changed,
            "not_run": self.not_run,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExercisedPass:
        return cls(
            name=str(data["name"]),
            why=str(data.get("why", WHY_NEW)),
            generators=tuple(str(name) for name in data.get("generators", ())),
            models_checked=int(data.get("models_checked", 0)),
            models_changed=int(data.get("models_changed", 0)),
            not_run=str(data.get("not_run", "")),
        )


def exercised_passes(report: Report) -> tuple[ExercisedPass, ...]:
    """The passes this PR check exercised, as the sweep recorded them (none outside a PR check)."""
    stats = report.stats.stages.get(EXERCISED_KEY) or {}
    return tuple(ExercisedPass.from_json(entry) for entry in stats.get("passes", ()))


def exercised_model_ids(report: Report) -> frozenset[str]:
    """The report's models made for the exercised passes (none in a report that predates the list)."""
    stats = report.stats.stages.get(EXERCISED_KEY) or {}
    return frozenset(str(model) for model in stats.get(MODEL_IDS_KEY, ()))


def never_fired_warnings(report: Report) -> list[str]:
    """One warning per exercised pass that changed no model at all, corpus or generated."""
    warnings = []
    for exercised in exercised_passes(report):
        if int(report.coverage.get(exercised.name, {}).get("models_changed", 0)):
            continue
        if exercised.not_run:
            how = f"it was not exercised: {exercised.not_run}"
        else:
            generators = ", ".join(exercised.generators)
            how = (
                f"it changed none of the {exercised.models_checked} generated models (its generators: "
                f"{generators}) and no corpus model"
            )
        warnings.append(
            f"{exercised.why} pass {exercised.name} never fired: {how}; this check did not test it. "
            "Add a fuzz generator for it (ditox_ci/fuzz) or a model it rewrites to the corpus"
        )
    return warnings
