"""Merge: the shard reports of one sweep → the report of the whole sweep.

A merge that silently lost a shard would turn "not tested" into "no findings", so anything that
does not fit together (a missing or repeated shard, mixed shard counts, another optimizer, pass
list or schema, a (model, config) pair swept twice or never) is a MergeError, never a warning.

A costly model may be split over shards by its configs (see engine/shard.py): each shard then has an
entry for it naming the configs it ran, all of them running the `nop` control. The parts become one
entry again, and the nop findings every part reports become one finding. The models a PR check makes
for the passes it adds or changes (triage/exercise.py) are shard 0's alone and run only the control
and those passes: their entries name those configs and are whole as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NoReturn

from ditox_ci.control import NOP
from ditox_ci.errors import MergeError
from ditox_ci.report.effect import effect_totals
from ditox_ci.report.exercised import exercised_model_ids
from ditox_ci.report.header import ShardOf
from ditox_ci.report.kinds import FIXED, KNOWN, ModelStatus
from ditox_ci.report.model import Finding, ModelEntry, Report, Verdicts
from ditox_ci.report.stats import SweepStats

# What must be identical in every shard for the shards to be parts of one sweep.
_SAME_OPTIMIZER = ("name", "version", "passes", "default_passes")
# the report's environment fields that name what judged the models
JUDGED_BY = ("onnx", "onnxruntime")
# what an entry without a config list ran, in reports that do not list the sweep's configs
_ALL_CONFIGS = "*"


def _check_shards(reports: Sequence[Report]) -> None:
    counts = sorted({report.shard.count for report in reports})
    if len(counts) > 1:
        raise MergeError(
            f"shard reports come from sweeps with different shard counts {counts}; "
            "merge only the shards of one matrix run"
        )
    count = counts[0]
    indices = [report.shard.index for report in reports]
    repeated = sorted({index for index in indices if indices.count(index) > 1})
    if repeated:
        raise MergeError(
            f"shard index {', '.join(map(str, repeated))} given more than once; "
            "pass each shard's report directory exactly once"
        )
    missing = sorted(set(range(count)) - set(indices))
    if missing:
        raise MergeError(
            f"shard {', '.join(f'{index}/{count}' for index in missing)} missing: got "
            f"{len(reports)} of {count} shard reports; re-run the failed or cancelled shard job"
        )
    stray = sorted(set(indices) - set(range(count)))
    if stray:
        raise MergeError(f"shard index {stray} is outside 0…{count - 1}; the report is corrupt")


def _check_same_sweep(reports: Sequence[Report]) -> None:
    first = reports[0]
    for report in reports[1:]:
        if report.schema_version != first.schema_version:
            raise MergeError(
                f"shard {report.shard.index} has schema_version {report.schema_version}, "
                f"shard {first.shard.index} has {first.schema_version}; "
                "run every shard with the same ditox-ci version"
            )
        for key in _SAME_OPTIMIZER:
            theirs, ours = getattr(report.optimizer, key), getattr(first.optimizer, key)
            if theirs != ours:
                _other_build(report, first, f"optimizer {key}", theirs, ours)
        # a build's commit and pass list: the installed files' hashes are no test (a build made in
        # each shard job compiles its own bytecode), but two commits are two builds of one version
        # number; a shard whose description of its build is gone is not known to be the same one
        builds = [r.optimizer.build or {} for r in (report, first)]
        for key in ("version", "git_describe", "passes_sha256"):
            theirs, ours = (str(build.get(key) or "") for build in builds)
            if theirs != ours:
                _other_build(report, first, f"the build ({key})", theirs, ours)
        # the same oracle: another onnx or ONNX Runtime judges the same model differently
        for key in JUDGED_BY:
            theirs, ours = getattr(report.environment, key), getattr(first.environment, key)
            if theirs != ours:
                raise MergeError(
                    f"shard {report.shard.index} was judged by {key} {theirs!r}, shard "
                    f"{first.shard.index} by {ours!r}; every shard must run the same onnx and "
                    "ONNX Runtime (the same image or lock)"
                )


def _other_build(report: Report, first: Report, what: str, theirs: Any, ours: Any) -> NoReturn:
    raise MergeError(
        f"shard {report.shard.index} tested {what} {theirs!r}, shard {first.shard.index} "
        f"{ours!r}; every shard must test the same optimizer build"
    )


def _combine_parts(
    parts: Sequence[tuple[int, ModelEntry]], configs: Sequence[str], partial: bool = False
) -> ModelEntry:
    """The entries of one model's parts (shard index, entry) → the model's entry; refuses parts
    that share a config other than the control, or that leave one of `configs` out (unless the
    model is `partial`: an interrupted shard never finished some parts, or the model was made for
    the exercised passes and ran only those)."""
    owner: dict[str, int] = {}
    for shard, entry in parts:
        for config in entry.configs or configs or (_ALL_CONFIGS,):
            if config in owner and config != NOP:
                what = "" if config == _ALL_CONFIGS else f" (config {config})"
                raise MergeError(
                    f"model {entry.id!r}{what} was swept by shard {owner[config]} and shard "
                    f"{shard}; the shards were split from different corpora"
                )
            owner.setdefault(config, shard)
    first = parts[0][1]
    missing = [config for config in configs if config not in owner]
    if missing and not partial:
        raise MergeError(
            f"model {first.id!r} never ran config(s) {', '.join(missing[:5])} in any shard; the shards "
            "were planned differently: give every shard job the same corpus, --previous, --jobs and --screen"
        )
    if len(parts) == 1 and not missing:
        return first
    entries = [entry for _, entry in parts]
    skipped = next((entry for entry in entries if entry.status != ModelStatus.OK), None)
    prepared = next((entry for entry in entries if entry.sha256), first)
    ran = tuple(c for c in configs if c in owner) if missing else () if configs else tuple(sorted(owner))
    judged = [entry.verdicts for entry in entries if entry.verdicts is not None]
    passed = tuple(sorted({digest for verdicts in judged for digest in verdicts.passed}))
    failed = {digest: outcome for verdicts in judged for digest, outcome in verdicts.failed.items()}
    # each part's configs' effects; the control's is each part's alike
    effects = [entry.effect for entry in entries if entry.effect is not None]
    effect = (
        replace(effects[0], configs={label: e for one in effects for label, e in one.configs.items()})
        if effects and not skipped
        else None
    )
    # the part that ran the original says how it was drawn (another may have reused every verdict)
    drawn = next((verdicts for verdicts in judged if verdicts.draw is not None), next(iter(judged), None))
    # each part ran the control: the configs of every part left the model as it did, unless the
    # control's bytes differ between parts (then none is carried later)
    controls = {verdicts.control for verdicts in judged}
    control = controls.pop() if len(controls) == 1 else ""
    own = tuple(dict.fromkeys(label for verdicts in judged for label in verdicts.own)) if control else ()
    results = {label: digest for verdicts in judged for label, digest in verdicts.results.items() if control}
    failed_sorted = dict(sorted(failed.items()))
    return replace(
        prepared,
        status=skipped.status if skipped else prepared.status,
        reason=skipped.reason if skipped else prepared.reason,
        cost_s=round(sum(entry.cost_s for entry in entries), 4),
        configs=ran,
        # each part's passing results, all judged on the same original and inputs
        verdicts=(
            Verdicts(drawn.judged_as, passed, failed_sorted, drawn.draw, drawn.info, control, own, results)
            if drawn is not None and not skipped
            else None
        ),
        reused=sum(entry.reused for entry in entries),
        effect=effect,
    )


def _merge_models(
    reports: Sequence[Report], configs: Sequence[str], partial: bool = False
) -> tuple[ModelEntry, ...]:
    parts: dict[str, list[tuple[int, ModelEntry]]] = {}
    for report in reports:
        for entry in report.models:
            parts.setdefault(entry.id, []).append((report.shard.index, entry))
    made = {model for report in reports for model in exercised_model_ids(report)}
    return tuple(
        _combine_parts(parts[model], configs, partial or (model in made and len(parts[model]) == 1))
        for model in sorted(parts)
    )


def _finding_key(finding: Finding) -> tuple[str, str, str, str]:
    return (finding.fingerprint, finding.model, finding.config, finding.kind)


def _vouched_for(finding: Finding) -> set[str]:
    """What a known finding shows is still there: its fingerprint, and the baseline entry it matched."""
    known_by = finding.triage.known_by
    entry = known_by.baseline_entry if known_by else None
    return {finding.fingerprint, *([entry] if entry is not None else [])}


def _gone(finding: Finding) -> str:
    """What a fixed record says is gone: a baseline entry (`Triage.stale_entry`), else the previous
    report's fingerprint."""
    return finding.triage.stale_entry or finding.fingerprint


def _also_in(first: Finding, second: Finding, configs: Sequence[str]) -> Finding:
    """One finding for what two parts of a split model both report (the nop control's): the configs
    that showed it too, from both, in config order."""
    shown = {*first.triage.also_in, *second.triage.also_in}
    if not shown:
        return first
    order = {config: index for index, config in enumerate(configs)}
    also_in = tuple(sorted(shown, key=lambda config: (order.get(config, len(order)), config)))
    return replace(first, triage=replace(first.triage, also_in=also_in))


def _merge_findings(reports: Sequence[Report], configs: Sequence[str]) -> tuple[Finding, ...]:
    """Union of the shards' findings, with `fixed` re-decided for the whole sweep.

    A shard marks a baseline entry (or a previous finding) fixed when its own models could have
    shown it and none did; another shard may still have shown it, and then it is not fixed.
    """
    found: dict[tuple[str, str, str, str], Finding] = {}
    for report in reports:
        for finding in report.findings:
            key = _finding_key(finding)
            if key not in found:
                found[key] = finding
            elif found[key].status == FIXED:  # a shard that still shows it outweighs one that does not
                found[key] = _also_in(finding, found[key], configs)
            else:
                found[key] = _also_in(found[key], finding, configs)
    present = {ref for f in found.values() if f.status == KNOWN for ref in _vouched_for(f)}
    return tuple(
        found[key]
        for key in sorted(found)
        if not (found[key].status == FIXED and _gone(found[key]) in present)
    )


def _merge_coverage(reports: Sequence[Report]) -> dict[str, dict[str, int]]:
    coverage: dict[str, dict[str, int]] = {}
    for report in reports:
        for pass_name, counts in report.coverage.items():
            total = coverage.setdefault(pass_name, {})
            for name, value in counts.items():
                total[name] = total.get(name, 0) + int(value)
    return {pass_name: coverage[pass_name] for pass_name in sorted(coverage)}


def _configs(reports: Sequence[Report], stats: Sequence[SweepStats]) -> tuple[str, ...]:
    """Every config the sweep ran, the same list in every shard; () for reports that predate it."""
    first = stats[0].configs
    for report, own in zip(reports[1:], stats[1:], strict=True):
        if own.configs != first:
            raise MergeError(
                f"shard {report.shard.index} ran other configs than shard "
                f"{reports[0].shard.index}; run every shard with the same --configs and --passes"
            )
    return first


def merge_reports(reports: Sequence[Report]) -> Report:
    """One report for the whole sweep, independent of the order the shards are given in."""
    if not reports:
        raise MergeError("no shard reports to merge; pass the report directories of every shard")
    ordered = sorted(reports, key=lambda report: report.shard.index)
    _check_shards(ordered)
    _check_same_sweep(ordered)
    first = ordered[0]
    shard_stats = [report.stats for report in ordered]
    configs = _configs(ordered, shard_stats)
    # an interrupted shard (SIGTERM, a cancelled job) reported only what finished: the merge says
    # so, and publishing treats it as incomplete
    stopped = [(report, own) for report, own in zip(ordered, shard_stats, strict=True) if own.interrupted]
    models = _merge_models(ordered, configs, partial=bool(stopped))
    planned = None
    if stopped:
        # what finished, plus what each interrupted shard planned and never finished (the shards'
        # own counts would add up the interrupted ones' plans alone, beside every shard's models)
        unfinished = sum(
            own.models_planned - len(report.models)
            for report, own in stopped
            if own.models_planned is not None  # a stream plans nothing
        )
        planned = len(models) + max(0, unfinished)
    # a model split over shards counts once; a shard whose models name no runner (an older report)
    # adds its own counts
    runners = Counter(entry.runner for entry in models if entry.status == ModelStatus.OK and entry.runner)
    for report, own in zip(ordered, shard_stats, strict=True):
        if not any(entry.runner for entry in report.models):
            runners.update(own.runners)
    stats = SweepStats.merge(
        shard_stats,
        models_total=len(models),
        models_skipped=sum(1 for entry in models if entry.status != ModelStatus.OK),
        runners=runners,
        models_planned=planned,
        effect=effect_totals(entry.effect for entry in models if entry.effect is not None),
    )
    if stopped:
        indexes = tuple(report.shard.index for report, _ in stopped)
        stats = replace(stats, interrupted_shards=indexes)
    return Report(
        tool=first.tool,
        optimizer=first.optimizer,
        environment=first.environment,
        shard=ShardOf(),
        models=models,
        findings=_merge_findings(ordered, configs),
        coverage=_merge_coverage(ordered),
        stats=stats,
        schema_version=first.schema_version,
    )
