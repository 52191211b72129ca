"""Verdicts reused by content: an optimized model judged before is not run or compared again.

A verdict is a function of the original as it is judged (its bytes and the inputs drawn for it),
the optimized model's bytes, the settings that judge (samples, seed, tolerances, runner, noise
floor, comparators) and the versions of what judges (ditox-ci, onnx, ONNX Runtime). Within one
model's job a repeated result is already found by its digest (`evaluate.judge_bytes`); this module
carries verdicts across builds and runs:

- from a stored report (`--reuse-from`, a PR check's base-branch report or the previous night's):
  each model entry lists the changed results judged, by digest (`Verdicts`: those that passed,
  and those that failed with their outcome), and how its original was drawn and run, under the
  key of what judged them (`verdict_key`). A sweep with the same key gives a worker, per model, the
  outcomes judged for the same original and inputs (`Reuse`): the digests that passed, and those
  that failed with their outcome; a step whose result is one of them takes that outcome without a
  run.
- from the build under test in the same run: the base build's check of a finding takes the head's
  outcome for a result byte-identical to the head's (`triage.base_optimizer`): the same bytes fail
  the same way, on either build.

A worker whose every step is answered so never runs the original (`original.load_original`): a
reused failure takes the stored draw and runner with it, which its pinpointing and evidence read;
only a node-level divergence search runs it.

A PR check goes one step further for the passes it leaves unchanged (`triage.impact`: their source,
and the code every pass shares, are as at the PR's base). The stored report says, per model, which
configs' results were not the nop control's bytes (`Verdicts.own`) and, for those, the digest of
their result (`Verdicts.results`); every other config left the model as the control did. Such a
step is carried: it takes, without calling the optimizer, the control's outcome, as a screen's
cleared step does (engine/screen.py), or the stored outcome of its stored result, with that
result's size rebuilt from the model's stored `effect` (`Effect.applied_to`). A stored pass keeps
no evidence (its op changes are read from bytes a carried step does not have): what keys on them
runs the passes again (`pinpoint.pinpointer`). That holds when the pass acts on the head as on the
build the report swept, which the worker checks where it can: the head's control must give the
report's control bytes on the same original, or a canary must hold (below). What a pass the PR does
not change does on a model is then the stored report's, which is the point: a PR check costs what
the PR changed.

The control need not be called for that check. The configs the PR changed are called anyway, and
run first; where one of them gives the very bytes the report stored for the same config on the same
original (a canary: `Reuse.canary_control`), the head has acted on this model as the report's build
did, through the same import, pass manager and export a nop call goes through, and more: the
control is taken as the stored one and carried too. Where none does (the changed pass acts on the
model), the control is called as before.

A config the PR changed that runs a list of passes (`default`, `fixed-point`) may be carried too
(`Reuse.composed`). Where every pass of the list, run alone on the original, left it as the control
did (a pass the PR leaves unchanged: in the stored report, which this build repeats; a pass it
changed: there and in this very run, its single-pass config running first), each pass of the list
saw the original and changed nothing, so the next saw the original too, and so on: the list's call
does on this build what it did on the report's, and its result is the stored one. This is
screening's argument (engine/screen.py) the other way round, and without its blind spot: the list
is cleared from each pass alone, so no pass of it can undo another's change. A PR that changes one
pass of the default list thus calls that pass alone on every model, and the default list and the
fixed point only where a pass of theirs acts on the model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import onnx
import onnxruntime

from ditox_ci import __version__
from ditox_ci.control import NOP
from ditox_ci.engine.outcome import Outcome
from ditox_ci.report.effect import ModelEffect, Size
from ditox_ci.report.model import Verdicts


@dataclass(frozen=True)
class OriginalInfo:
    """What loading and running a model's original told: what its inputs are (`corpus.inputs_kind`),
    the runner that ran it (None: it has not run), why the runner before that one could not, and
    whether the noise floor was measured; a report keeps it as `models[].verdicts.info`."""

    inputs: str = ""
    runner: str | None = None
    runner_fallback: str | None = None
    noise_floor: str | None = None

    def runner_or_default(self) -> str:
        """The runner that judges the model: ONNX Runtime until another had to run it."""
        return self.runner or "onnxruntime"

    def to_json(self) -> dict[str, str]:
        return {key: value for key, value in asdict(self).items() if value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OriginalInfo:
        said = {key: str(data[key]) for key in ("runner", "runner_fallback", "noise_floor") if data.get(key)}
        return cls(inputs=str(data.get("inputs", "")), **said)


@dataclass(frozen=True)
class Reuse:
    """What a worker may take instead of judging, for one model: the outcomes of results judged
    before (by their digest), valid only for the original judged as `judged_as`; what running that
    original told (`info`: its runner, a fallback, the noise floor) and how its inputs were drawn
    (`draw`, Draw's JSON), which stand for it while it has not run here."""

    judged_as: str
    outcomes: Mapping[str, Outcome] = field(default_factory=dict)
    info: OriginalInfo = field(default_factory=OriginalInfo)
    draw: Mapping[str, Any] | None = None
    # the stored control's result, and the stored result of each config a sweep may carry (the
    # sweep keeps only the configs whose passes the PR leaves unchanged); what each config did to
    # the model there, which a carried result's size is rebuilt from
    control: str = ""
    carry: Mapping[str, str] = field(default_factory=dict)
    effect: ModelEffect | None = None
    # the stored result of each config the sweep calls though the report knows it (one the PR
    # changed): where this build gives the same bytes, its control is the stored one
    canaries: Mapping[str, str] = field(default_factory=dict)
    # a changed config whose every pass, alone, gave the control's bytes in the report: its stored
    # result, and the single-pass configs of its changed passes, which must give them here too
    composed: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def carrying(
        self,
        carried: Collection[str],
        canaries: Collection[str],
        lists: Mapping[str, Sequence[str]] | None = None,
    ) -> Reuse:
        """This model's reuse in a sweep that may carry the configs `carried` and calls `canaries`
        (configs the PR changed that ran with the same passes in the report): with a canary among
        them, the control is carried too, once one holds (`canary_control`). `lists` names, for a
        changed config that runs a list of passes, the single-pass config of each of its passes
        (`composed`)."""
        kept = {label: digest for label, digest in self.carry.items() if label in carried}
        checks = {label: digest for label, digest in self.carry.items() if label in canaries}
        composed = {}
        if kept and checks and self.control:
            kept[NOP] = self.control
            composed = self._composed(lists or {}, carried, canaries)
        return replace(self, carry=kept, canaries=checks, composed=composed)

    def _composed(
        self, lists: Mapping[str, Sequence[str]], carried: Collection[str], canaries: Collection[str]
    ) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The changed configs of `lists` whose every pass, alone, gave the stored control's bytes
        in the report: each with its stored result, and its changed passes' single-pass configs."""
        found = {}
        for label, singles in lists.items():
            stored = self.carry.get(label)
            changed = tuple(sorted({single for single in singles if single in canaries}))
            if label not in canaries or stored is None or not changed:
                continue
            known = all(single in carried or single in canaries for single in singles)
            if known and all(self.carry.get(single) == self.control for single in singles):
                found[label] = (stored, changed)
        return found

    @property
    def awaited(self) -> frozenset[str]:
        """The single-pass configs the composed configs wait for."""
        return frozenset(single for _, singles in self.composed.values() for single in singles)

    def canary_control(
        self, results: Mapping[str, str], judged_as: str, model: str, original: Size | None
    ) -> Outcome | None:
        """The stored control's outcome, to stand for this build's, when one of `results` (config →
        this build's result, for configs called) is the stored result of a canary on the original
        judged then (its bytes `model`); None when none is, or the report cannot rebuild the control's
        outcome (a result of its own needs its stored verdict and the model's effect)."""
        if judged_as != self.judged_as or self.carry.get(NOP) != self.control or not self.control:
            return None
        if not any(digest and self.canaries.get(label) == digest for label, digest in results.items()):
            return None
        if self.control == model:
            return Outcome(None, digest=model, changed=False)
        stored = self.outcomes.get(self.control)
        if stored is None or self.effect is None or original is None:
            return None
        size = self.effect.of(NOP).applied_to(original)
        return replace(stored, digest=self.control, changed=True, reused=True, size=size)

    def outcome(self, judged_as: str, digest: str) -> Outcome | None:
        """The outcome judged before for `digest`, when the original is the one judged then."""
        return self.outcomes.get(digest) if judged_as == self.judged_as else None

    def carried(
        self, label: str, judged_as: str, control: str, model: str, results: Mapping[str, str] | None = None
    ) -> str | None:
        """The digest of the stored result the step `label` takes without a call; None when it
        does not. The original must be the one judged then (its bytes `model` and inputs:
        `judged_as`), this build's control (called, or a canary's) must be the stored one, the step
        must be one the sweep may carry, or a composed one whose changed passes alone gave the
        control's bytes (`results`: config → this build's result, for the configs called), and the
        report must keep what its outcome is rebuilt from: the result is the control's bytes or the
        original's, or has a stored verdict and the model its stored effect."""
        same = bool(control) and control == self.control and judged_as == self.judged_as
        digest = self.carry.get(label) if same else None
        if digest is None and same and label in self.composed:
            stored, singles = self.composed[label]
            given = results or {}
            digest = stored if all(given.get(single) == control for single in singles) else None
        rebuilt = digest in self.outcomes and self.effect is not None
        if digest is None or digest in (control, model) or rebuilt:
            return digest
        return None

    def carried_outcome(
        self, label: str, digest: str, control: Outcome, original: Size, model: str
    ) -> Outcome:
        """The outcome of the step `label` carried with the stored result `digest` (`carried`'s):
        the control's bytes take its outcome, as this job's verdict; the original's own bytes
        (`model`) are left as they were; any other takes its stored verdict, reused, with the
        result's size rebuilt from `original`'s and the stored effect."""
        if digest == control.digest:  # (a frozen outcome, shared: 96,000 steps on the default corpus)
            return replace(control, reused=False) if control.reused else control
        if digest == model:
            return Outcome(None, digest=digest, changed=False)
        assert self.effect is not None, "carried without an effect to rebuild its size from"
        size = self.effect.of(label).applied_to(original)
        return replace(self.outcomes[digest], digest=digest, changed=True, reused=True, size=size)


def carried_steps(
    reuse: Reuse,
    labels: Sequence[str],
    judged_as: str,
    control: str,
    model: str,
    results: Mapping[str, str] | None = None,
) -> tuple[int, ...]:
    """The indexes of the steps, named by `labels`, a job carries (`Reuse.carried`) on the original
    `model` judged as `judged_as`, whose control gave the bytes `control` and its configs called so
    far `results`."""
    return tuple(
        i for i, label in enumerate(labels) if reuse.carried(label, judged_as, control, model, results)
    )


def _value_digest(hasher: Any, value: Any) -> None:
    if isinstance(value, np.ndarray):
        hasher.update(f"{value.dtype.str}{value.shape}".encode())
        # an object array's bytes are pointers: its strings are hashed by their text
        data = repr(value.tolist()).encode() if value.dtype.kind == "O" else value.tobytes()
        hasher.update(data)
    elif isinstance(value, (list, tuple)):
        hasher.update(f"[{len(value)}".encode())
        for item in value:
            _value_digest(hasher, item)
    elif isinstance(value, dict):
        hasher.update(f"{{{len(value)}".encode())
        for key in sorted(value, key=repr):
            hasher.update(repr(key).encode())
            _value_digest(hasher, value[key])
    else:
        _value_digest(hasher, np.asarray(value))


def judged_as(model_digest: str, feeds: Sequence[Mapping[str, Any]]) -> str:
    """The original as judged: its bytes' digest and the inputs first drawn for it (every later
    sample, re-drawn, wide or sign-structured, follows from them, the model and the runtime)."""
    hasher = hashlib.sha256(model_digest.encode())
    for feed in feeds:
        _value_digest(hasher, dict(feed))
    return hasher.hexdigest()


def verdict_key(settings: Any, comparators: Sequence[str]) -> str:
    """What judges a verdict: the judging settings (a dataclass: samples, seed, tolerances, runner,
    noise floor …), the comparators and the versions of ditox-ci and of the libraries that judge.
    Two sweeps with one key give one verdict to one (original, inputs, optimized bytes)."""
    versions = {
        "ditox-ci": __version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
    }
    described = {"settings": asdict(settings), "comparators": list(comparators), "versions": versions}
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()


def passed_digests(outcomes: Iterable[Outcome]) -> tuple[str, ...]:
    """The distinct changed results among `outcomes` that passed, sorted."""
    return tuple(sorted({o.digest for o in outcomes if o.kind is None and o.changed and o.digest}))


def failed_outcomes(outcomes: Iterable[Outcome]) -> dict[str, dict[str, Any]]:
    """The distinct changed results among `outcomes` that failed, each with its outcome's JSON."""
    failed = {o.digest: o for o in outcomes if o.kind is not None and o.changed and o.digest}
    return {digest: failed[digest].to_json() for digest in sorted(failed)}


def stored_results(verdicts: Verdicts, ran: Iterable[str]) -> dict[str, str]:
    """The stored result's digest of each config of `ran` (those the stored model ran) the report
    knows it of: the control's for those that left the model as it did, the config's own
    (`Verdicts.results`) for the others."""
    if not verdicts.control:
        return {}
    own = set(verdicts.own)
    results = {label: verdicts.control for label in ran if label != NOP and label not in own}
    return results | {label: digest for label, digest in verdicts.results.items() if label in ran}


def reuse_table(
    entries: Iterable[tuple[str, str, Verdicts, Collection[str], ModelEffect | None]],
) -> dict[str, Reuse]:
    """Per model id, what its workers may reuse, from a stored report's (id, runner, Verdicts,
    the configs the model ran, its effect)."""
    table = {}
    passed = Outcome(None, changed=True)
    for model, runner, verdicts, ran, effect in entries:
        outcomes = {digest: passed for digest in verdicts.passed}
        for digest, data in verdicts.failed.items():
            outcomes[digest] = Outcome.from_json(data, digest, changed=True)
        carry = stored_results(verdicts, ran)
        if outcomes or carry:
            info = OriginalInfo.from_json(verdicts.info or ({"runner": runner} if runner else {}))
            table[model] = Reuse(
                verdicts.judged_as, outcomes, info, verdicts.draw, verdicts.control, carry, effect
            )
    return table
