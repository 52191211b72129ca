"""A swept model's findings and coverage, from its JobResult: one finding per failing step, but
what the nop control already shows is reported once, as infrastructure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from ditox_ci.engine.outcome import Outcome, failure_fingerprint
from ditox_ci.engine.plan import Step
from ditox_ci.engine.worker import JobResult
from ditox_ci.report.model import Culprit, Finding

# evidence of a finding on a model whose nop control failed too: what the control did
CONTROL_KEY = "control"


def culprit_for(step: Step) -> Culprit:
    """What the sweep alone can say; multi-pass configs are narrowed by localization later."""
    if step.label == "nop":
        return Culprit("infrastructure", (), "nop-control", 0)
    if step.single_pass:
        return Culprit("pass", step.passes, "single-pass", 0)
    return Culprit("unknown", (), "not-localized: multi-pass config", 0)


def finding_fingerprint(outcome: Outcome, culprit: Culprit, config: str) -> str:
    """Semantic: kind, culprit passes (the config when not localized), message, ops rewritten."""
    blame = culprit.passes or ((config,) if culprit.scope == "unknown" else ())
    return failure_fingerprint(outcome, blame)


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
    original_fails = bool(result.info.get("runner_fallback"))
    return original_fails and outcome.kind == nop.kind and outcome.kind != "output-mismatch"


def findings_for(result: JobResult, steps: Sequence[Step]) -> list[Finding]:
    """One finding per failing step, except that what the nop control already shows is reported once,
    as infrastructure, with the configs that showed it too."""
    nop = result.outcomes.get("nop")
    shared_with_nop: list[str] = []
    findings: list[Finding] = []
    for step in steps:
        outcome = result.outcomes.get(step.label)
        if outcome is None or outcome.kind is None:
            continue
        if step.label != "nop" and _as_in_nop(outcome, nop, result):
            shared_with_nop.append(step.label)
            continue
        culprit = culprit_for(step)
        evidence = dict(outcome.evidence)
        if step.label != "nop" and nop is not None and nop.kind is not None:
            # context only: the finding's kind and fingerprint come from this config's own result
            evidence[CONTROL_KEY] = f"{nop.kind}: {nop.message}"[:300]
        findings.append(
            Finding(
                fingerprint=finding_fingerprint(outcome, culprit, step.label),
                kind=outcome.kind,
                model=result.ref.id,
                config=step.label,
                culprit=culprit,
                evidence=evidence,
            )
        )
    if shared_with_nop:
        extra: dict[str, Any] = {"also_in": shared_with_nop}
        if result.info.get("runner_fallback"):  # why messages that differ were folded
            extra["original_fails"] = str(result.info["runner_fallback"])
        findings = [
            replace(f, evidence={**f.evidence, **extra}) if f.config == "nop" else f for f in findings
        ]
    return findings


def coverage_of(
    results: Iterable[JobResult], steps: Sequence[Step]
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """Per pass: models it changed beyond what the nop control changes, and models checked."""
    coverage = {s.single_pass: {"models_changed": 0, "models_checked": 0} for s in steps if s.single_pass}
    by_family: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for result in results:
        if result.status != "ok":
            continue
        nop = result.outcomes.get("nop")
        unchanged = {result.sha256, nop.digest if nop else ""}
        for step in steps:
            name = step.single_pass
            outcome = result.outcomes.get(step.label)
            if name is None or outcome is None:
                continue
            coverage[name]["models_checked"] += 1
            changed = outcome.changed and outcome.digest not in unchanged
            coverage[name]["models_changed"] += int(changed)
            by_family[name][result.ref.family or "other"] += int(changed)
    return coverage, {name: dict(families) for name, families in by_family.items()}
