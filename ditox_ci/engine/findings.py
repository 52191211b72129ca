"""One judged model's findings: one per failing step, except what a cause shared by many steps shows.

Two causes are not any one pass's: a failure the nop control already shows is the optimizer's
infrastructure (one finding, culprit scope `infrastructure`), and the same failure under most
single passes but not in the control is the optimizer's shared code, the code every pass goes
through (one bug, culprit scope `shared`). Both are decided here, on the sweep's outcomes alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ditox_ci.control import NOP
from ditox_ci.engine.outcome import Outcome, failure_fingerprint
from ditox_ci.engine.plan import Step
from ditox_ci.engine.pool import JobResult
from ditox_ci.engine.reuse import failed_outcomes, passed_digests
from ditox_ci.report.effect import NO_EFFECT, WHOLE_OPTIMIZER, Effect, ModelEffect, by_family
from ditox_ci.report.evidence import Triage
from ditox_ci.report.kinds import VALUES_KIND, FindingKind, ModelStatus
from ditox_ci.report.model import Culprit, Finding, Verdicts

# evidence of a finding on a model whose nop control failed too: what the control did
CONTROL_KEY = "control"
# evidence of a finding with several verdicts: each one's message after the headline's, by kind
OTHER_VERDICTS_KEY = "other_verdicts"
# a failure is the shared code's when more than half of the single passes a model ran show it, and
# at least this many: two passes that fail alike may share a helper, or a mistake, of their own
SHARED_MIN_PASSES = 3
# what a shared-code fingerprint blames in place of pass names (no pass has spaces in its name)
SHARED_BLAME = ("the optimizer's shared code",)


def culprit_for(step: Step) -> Culprit:
    """What the sweep alone can say; multi-pass configs are narrowed by localization later."""
    if step.label == NOP:
        return Culprit("infrastructure", (), "nop-control", 0)
    if step.single_pass:
        return Culprit("pass", step.passes, "single-pass", 0)
    return Culprit("unknown", (), "not-localized: multi-pass config", 0)


def culprit_fingerprint(
    failure: Outcome, culprit: Culprit, config: str = "", rewrites: Outcome | None = None
) -> str:
    """The fingerprint of `failure` blamed on `culprit`: its passes, the shared code, or the sweep's
    `config` while it is not localized (pinpointing passes none: its culprit is final). A
    shared-code failure keys on no rewritten ops: each pass rewrites others, the cause is one."""
    if culprit.scope == "shared":
        return failure_fingerprint(failure, SHARED_BLAME, Outcome(None))
    blame = culprit.passes or ((config,) if culprit.scope == "unknown" and config else ())
    return failure_fingerprint(failure, blame, rewrites)


def _as_in_nop(outcome: Outcome, nop: Outcome | None, result: JobResult) -> bool:
    """Whether `outcome` is what the nop control already shows: the same failure, or, when ONNX
    Runtime cannot load or run the original itself, a failure of the same kind whatever its message
    says (an optimizer that loads the model in ONNX Runtime fails on the first op ONNX Runtime
    refuses, which differs with the passes run before): the original's limitation, not the
    optimizer's. A mismatch found by the runner that could judge it is never folded this way."""
    if nop is None or nop.kind is None:
        return False
    if outcome.same_failure(nop):
        return True
    original_fails = bool(result.info.runner_fallback)
    return original_fails and outcome.kind == nop.kind and outcome.kind != VALUES_KIND


@dataclass(frozen=True)
class SharedFailure:
    """A failure most of a model's single passes show alike: `seen_under` of the `passes_run`."""

    failure: Outcome
    seen_under: tuple[str, ...]
    passes_run: int

    def culprit(self) -> Culprit:
        method = (
            f"single-pass results: the same failure under {len(self.seen_under)} of {self.passes_run} "
            "single passes, not in the nop control"
        )
        return Culprit("shared", (), method, 0, self.seen_under)


def shared_failure(result: JobResult, steps: Sequence[Step]) -> SharedFailure | None:
    """The failure most of the model's single passes show alike; None when no failure is shown by
    more than half of the single passes it ran (and by SHARED_MIN_PASSES at least)."""
    singles = [step for step in steps if step.single_pass and step.label in result.outcomes]
    groups: list[tuple[Outcome, list[str]]] = []
    for step in singles:
        outcome = result.outcomes[step.label]
        if outcome.kind is None:
            continue
        group = next((g for g in groups if outcome.same_failure(g[0])), None)
        if group is None:
            groups.append((outcome, [step.passes[0]]))
        else:
            group[1].append(step.passes[0])
    largest = max(groups, key=lambda group: len(group[1]), default=None)
    if largest is None or len(largest[1]) < SHARED_MIN_PASSES or 2 * len(largest[1]) <= len(singles):
        return None
    return SharedFailure(largest[0], tuple(largest[1]), len(singles))


def findings_for(result: JobResult, steps: Sequence[Step]) -> list[Finding]:
    """One finding per failing step, except that what the nop control already shows is reported once,
    as infrastructure, with the configs that showed it too; that the failure most single passes
    show alike (`shared_failure`) is blamed on the shared code in every config that shows it; and
    that a multi-pass config's warning one of its passes shows alone is blamed on that pass
    (`_warned_alone`), so one cause is one warning.

    A finding's verdicts are its result's less those the nop control shows alike (`Outcome.beyond`):
    its kind is the most severe of what the config itself did, and a baseline entry must name each
    of them. Its fingerprint keys on every verdict the result shows, whatever the control did."""
    nop = result.outcomes.get(NOP)
    shared = shared_failure(result, steps)
    shared_with_nop: list[str] = []
    findings: list[Finding] = []
    for step in steps:
        outcome = result.outcomes.get(step.label)
        if outcome is None or outcome.kind is None:
            continue
        own = outcome if step.label == NOP else outcome.beyond(nop)
        if step.label != NOP and (own.kind is None or _as_in_nop(outcome, nop, result)):
            shared_with_nop.append(step.label)
            continue
        headline = own.kind
        assert headline is not None  # the nop control's failure is its own; a config's beyond it, checked
        culprit = culprit_for(step)
        rewrites = None
        if shared is not None and step.label != NOP and outcome.same_failure(shared.failure):
            culprit = shared.culprit()
        elif headline is FindingKind.WARNING and not step.single_pass:
            alone = _warned_alone(outcome, step, result, steps)
            if alone is not None:
                culprit, rewrites = Culprit("pass", (alone[0],), WARNED_ALONE, 0), alone[1]
        measured = dict(own.evidence)
        tier = measured.pop("tier", None)
        if own.also:  # what each verdict after the headline said (the evidence's message is the headline's)
            measured[OTHER_VERDICTS_KEY] = {verdict.kind: verdict.message[:300] for verdict in own.also}
        if step.label != NOP and nop is not None and nop.kind is not None:
            # context only: the finding's kind and fingerprint come from this config's own result
            measured[CONTROL_KEY] = f"{nop.kind}: {nop.message}"[:300]
        findings.append(
            Finding(
                fingerprint=culprit_fingerprint(outcome, culprit, step.label, rewrites),
                kind=headline,
                model=result.ref.id,
                config=step.label,
                culprit=culprit,
                measured=measured,
                verdicts=own.kinds,
                tier=tier if FindingKind.OUTPUT_MISMATCH.value in own.kinds else None,
            )
        )
    if shared_with_nop:
        fallback = result.info.runner_fallback
        # and why failures whose messages differ were folded
        folded = Triage(also_in=tuple(shared_with_nop), original_fails=str(fallback) if fallback else None)
        findings = [replace(f, triage=folded) if f.config == NOP else f for f in findings]
    return findings


# a multi-pass config's warning blamed on a pass that shows it alone
WARNED_ALONE = "single-pass results: the same warning under the pass alone"


def _warned_alone(
    warning: Outcome, step: Step, result: JobResult, steps: Sequence[Step]
) -> tuple[str, Outcome] | None:
    """The first of `step`'s passes whose single-pass config showed the same warning on the model,
    with that config's outcome: the cause a multi-pass config's warning shares with it (warnings
    are not localized)."""
    alone = {s.single_pass: s.label for s in steps if s.single_pass}
    for name in step.passes:
        shown = result.outcomes.get(alone.get(name, ""))
        if shown is not None and shown.same_failure(warning):
            return name, shown
    return None


@dataclass(frozen=True)
class Coverage:
    """What the single passes did to the judged models: per pass, models it changed beyond what the
    nop control changes and models it was checked on (`{"models_changed", "models_checked"}`); and
    the same two counts per pass and model family, so a picture can give each family's share."""

    per_pass: dict[str, dict[str, int]]
    changed_by_family: dict[str, dict[str, int]]
    checked_by_family: dict[str, dict[str, int]]


def coverage_of(results: Iterable[JobResult], steps: Sequence[Step]) -> Coverage:
    """The coverage of `steps`' single passes over the models of `results` that were judged."""
    per_pass = {s.single_pass: {"models_changed": 0, "models_checked": 0} for s in steps if s.single_pass}
    changed: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    checked: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for result in results:
        if result.status != ModelStatus.OK:
            continue
        nop = result.outcomes.get(NOP)
        unchanged = {result.sha256, nop.digest if nop else ""}
        family = result.ref.family or "other"
        for step in steps:
            name = step.single_pass
            outcome = result.outcomes.get(step.label)
            if name is None or outcome is None:
                continue
            was_changed = int(outcome.changed and outcome.digest not in unchanged)
            per_pass[name]["models_checked"] += 1
            per_pass[name]["models_changed"] += was_changed
            checked[name][family] += 1
            changed[name][family] += was_changed
    return Coverage(
        per_pass,
        {name: dict(families) for name, families in changed.items()},
        {name: dict(families) for name, families in checked.items()},
    )


def family_effects(results: Iterable[JobResult]) -> dict[str, dict[str, int]]:
    """The default config's node reduction per model family (`report.effect.by_family`)."""
    return by_family(
        (result.ref.family or "other", effect)
        for result in results
        if WHOLE_OPTIMIZER in result.outcomes and (effect := effect_of(result)) is not None
    )


def verdicts_of(result: JobResult) -> Verdicts:
    """What a later sweep may reuse of the model's results (engine/reuse.py; a report's
    `models[].verdicts`): the verdicts, and which configs' results were not the control's bytes,
    with their digests."""
    outcomes = result.outcomes.values()
    draw = result.draw.to_json() if result.draw is not None else None
    passed, failed = passed_digests(outcomes), failed_outcomes(outcomes)
    nop = result.outcomes.get(NOP)
    control = nop.digest if nop is not None else ""
    if not control:
        return Verdicts(result.judged_as, passed, failed, draw, result.info.to_json())
    own = {label: o.digest for label, o in result.outcomes.items() if label != NOP and o.digest != control}
    results = {label: digest for label, digest in own.items() if digest}
    return Verdicts(
        result.judged_as, passed, failed, draw, result.info.to_json(), control, tuple(own), results
    )


def effect_of(result: JobResult) -> ModelEffect | None:
    """What each config did to the model (report/effect.py): for those whose result changed it,
    but not those whose change is the `nop` control's alike (`ModelEffect.of` reads them as the
    control's); a config that left the model as it was while the control did not says so. None
    for a model not judged."""
    original = result.size
    if original is None or result.status != ModelStatus.OK:
        return None
    configs = {
        label: Effect.between(original, outcome.size)
        for label, outcome in result.outcomes.items()
        if outcome.changed and outcome.size is not None
    }
    control = configs.get(NOP)
    if control is not None:
        configs = {label: effect for label, effect in configs.items() if label == NOP or effect != control}
        configs |= {
            label: NO_EFFECT
            for label, outcome in result.outcomes.items()
            if not outcome.changed and outcome.kind is None and label != NOP
        }
    return ModelEffect(original.nodes, original.initializers, original.bytes, dict(sorted(configs.items())))
