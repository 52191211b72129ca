"""What keys a reusable verdict (engine/reuse.py): the original as judged, with its inputs, and the
settings and versions that judged it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ditox_ci.engine.original import Draw, EvalSettings
from ditox_ci.engine.outcome import Outcome, Verdict
from ditox_ci.engine.reuse import (
    OriginalInfo,
    carried_steps,
    failed_outcomes,
    judged_as,
    passed_digests,
    reuse_table,
    verdict_key,
)
from ditox_ci.report.effect import Effect, ModelEffect, Size
from ditox_ci.report.model import Verdicts


def _strings(*words: str) -> np.ndarray:
    return np.array(list(words), dtype=object)


def test_the_original_as_judged_is_its_bytes_and_inputs_and_strings_hash_by_their_text():
    feeds = [{"x": np.arange(6, dtype=np.float32).reshape(2, 3), "s": _strings("monday", "tuesday")}]
    same = [{"s": _strings("monday", "tuesday"), "x": np.arange(6, dtype=np.float32).reshape(2, 3)}]
    assert judged_as("a" * 64, feeds) == judged_as("a" * 64, same)  # object arrays are not pointers
    assert judged_as("a" * 64, feeds) != judged_as("b" * 64, feeds)
    other_word = [{**feeds[0], "s": _strings("monday", "friday")}]
    reshaped = [{**feeds[0], "x": np.arange(6, dtype=np.float32).reshape(3, 2)}]
    retyped = [{**feeds[0], "x": np.arange(6, dtype=np.float64).reshape(2, 3)}]
    keys = {judged_as("a" * 64, f) for f in (feeds, other_word, reshaped, retyped, feeds * 2)}
    assert len(keys) == 5


def test_a_verdict_key_changes_with_every_judging_setting_and_the_comparators():
    settings = EvalSettings()
    key = verdict_key(settings, ("tensor",))
    assert key == verdict_key(EvalSettings(), ("tensor",))
    changed = [
        replace(settings, seed=1),
        replace(settings, samples=2),
        replace(settings, calibrate=False),
        replace(settings, runner="reference"),
        replace(settings, tolerances=replace(settings.tolerances, rtol=1e-2)),
    ]
    assert key not in {verdict_key(s, ("tensor",)) for s in changed}
    assert key != verdict_key(settings, ("tensor", "topk"))


def test_changed_results_are_reusable_passed_or_failed_and_only_for_their_original():
    mismatch = Outcome(
        "output-mismatch",
        "differs",
        {"max_abs": float("nan"), "ops_removed": ("Identity",)},
        digest="c" * 64,
        changed=True,
        also=(Verdict("interface-change", "retyped"),),
    )
    outcomes = [
        Outcome(None, digest="b" * 64, changed=True),
        Outcome(None, digest="b" * 64, changed=True),  # a repeat is listed once
        Outcome(None, digest="o" * 64, changed=False),  # the original's own bytes need no verdict
        mismatch,
        Outcome("optimizer-error", "raised"),  # no result: nothing to find it by
    ]
    assert passed_digests(outcomes) == ("b" * 64,)
    failed = failed_outcomes(outcomes)
    assert list(failed) == ["c" * 64]
    draw = Draw(1, attempt=2, wide_scales={"x": 0.1}, signed=True)
    info = {"inputs": "random", "runner": "reference", "runner_fallback": "ONNX Runtime cannot load it"}
    stored = Verdicts("j" * 64, ("b" * 64,), failed, draw.to_json(), info)
    table = reuse_table([("m", "onnxruntime", stored, (), None), ("n", "", Verdicts("k" * 64), (), None)])
    assert list(table) == ["m"]  # nothing judged: nothing to reuse
    reuse = table["m"]
    assert reuse.info == OriginalInfo.from_json(info) and reuse.info.to_json() == info
    assert Draw.from_json(reuse.draw or {}) == draw
    assert reuse.outcome("j" * 64, "b" * 64) == Outcome(None, changed=True)
    again = reuse.outcome("j" * 64, "c" * 64)
    assert again is not None and (again.kinds, again.message, again.digest) == (
        mismatch.kinds,
        "differs",
        "c" * 64,
    )
    assert again.evidence["ops_removed"] == ("Identity",) and again.same_failure(mismatch)
    assert reuse.outcome("x" * 64, "b" * 64) is None  # another original, or other inputs
    assert reuse.outcome("j" * 64, "d" * 64) is None
    # an older report's entry says only which runner judged it
    (old,) = reuse_table([("m", "onnxruntime", Verdicts("j" * 64, ("b" * 64,)), (), None)]).values()
    assert (old.info, old.draw) == (OriginalInfo(runner="onnxruntime"), None)


def test_a_stored_result_is_carried_only_for_the_same_original_and_control_with_what_rebuilds_it():
    control, passed, failed, model = "c" * 64, "p" * 64, "f" * 64, "o" * 64
    failure = {"kind": "interface-change", "message": "retyped", "evidence": {"ops_removed": ["Cast"]}}
    results = {"pass:moves": passed, "pass:fails": failed, "pass:back": model, "pass:gone": "9" * 64}
    own = (*results, "pass:raised")  # an optimizer's error has no result
    stored = Verdicts("j" * 64, (passed,), {failed: failure}, control=control, own=own, results=results)
    ran = ("nop", "pass:same", *own)
    effect = ModelEffect(4, 1, 100, {"nop": Effect(0, 0, 2), "pass:moves": Effect(-1, 0, -10, {"Relu": -1})})
    reuse = reuse_table([("m", "", stored, ran, effect)])["m"]
    # every config the report knows the result of, the control's bytes or its own
    assert reuse.carry == {"pass:same": control, **results}
    labels = ("nop", "pass:same", "pass:moves", "pass:fails", "pass:back", "pass:gone", "pass:raised")
    # a digest judged in no way the report kept, or no result at all: called
    assert carried_steps(reuse, labels, "j" * 64, control, model) == (1, 2, 3, 4)
    assert carried_steps(reuse, labels, "x" * 64, control, model) == ()  # another original or inputs
    assert carried_steps(reuse, labels, "j" * 64, "d" * 64, model) == ()  # this build's control differs
    # no effect to rebuild a result's size from: only the control's and the original's bytes
    no_effect = replace(reuse, effect=None)
    assert carried_steps(no_effect, labels, "j" * 64, control, model) == (1, 4)
    nop = Outcome(None, "", {"ops_removed": []}, control, changed=True, size=Size(4, 1, 100))
    original = Size(4, 1, 98, {"Relu": 2, "Add": 2})

    def outcome(label: str) -> Outcome:
        digest = reuse.carried(label, "j" * 64, control, model)
        assert digest is not None
        return reuse.carried_outcome(label, digest, nop, original, model)

    assert outcome("pass:same") == nop
    moved = Outcome(
        None, digest=passed, changed=True, reused=True, size=Size(3, 1, 88, {"Add": 2, "Relu": 1})
    )
    assert outcome("pass:moves") == moved
    fails = outcome("pass:fails")
    assert fails.kinds == ("interface-change",) and fails.evidence["ops_removed"] == ["Cast"]
    assert fails.size == Size(4, 1, 100, {"Relu": 2, "Add": 2})  # not listed: the control's effect
    assert outcome("pass:back") == Outcome(None, digest=model, changed=False)
