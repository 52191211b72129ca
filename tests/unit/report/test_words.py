"""The first sentence of a bug report in the model's own terms, and the evidence in words."""

from __future__ import annotations

import dataclasses

from ditox_ci.report.model import Culprit, Finding
from ditox_ci.report.standalone import small_values
from ditox_ci.report.words import evidence_rows, rounded, what_happened

BEFORE = """<ir_version: 10, opset_import: ["" : 21]>
g (float[3,4,2,2] X0, int64[5] C0, int64[3] C1) => (float[3,2,8] Y0) {
   t0 = Reshape (X0, C0)
   Y0 = Reshape (t0, C1)
}"""
AFTER = BEFORE.replace("Y0 = Reshape (t0, C1)", "Y0 = Reshape (X0, C1)")
RECORD = {
    "model": BEFORE,
    "optimized": AFTER,
    "inputs": {
        "X0": {"dtype": "float32", "shape": [3, 4, 2, 2], "seed": 0, "low": -1.0, "high": 1.0},
        "C0": {"dtype": "int64", "shape": [5], "values": [3, 2, 2, 2, 2]},
        "C1": {"dtype": "int64", "shape": [3], "values": [0, 0, -1]},
    },
    "outcome": [
        {"output": "Y0", "same": False, "expected": ["float32", [3, 2, 8]], "actual": ["float32", [3, 4, 4]]}
    ],
}
FINDING = Finding(
    "f" * 20,
    "output-mismatch",
    "m",
    "default",
    Culprit("pass", ("eliminate_consecutive_idempotent_ops",)),
    measured={"message": "output 'y' differs: max_abs=1.392"},
)


def test_the_sentence_names_the_rewrite_the_operator_rule_and_the_output():
    assert what_happened(FINDING, RECORD) == (
        "`eliminate_consecutive_idempotent_ops` rewrote `Reshape(Reshape(X0, [3, 2, 2, 2, 2]), [0, 0, -1])` "
        "into `Reshape(X0, [0, 0, -1])`; a `0` in Reshape's shape copies its input's dim at that position, "
        "so output `Y0` became float32[3, 4, 4] instead of float32[3, 2, 8]."
    )


def test_a_shape_without_zeros_gets_no_hint_and_equal_shapes_say_the_values_differ():
    record = {
        **RECORD,
        "inputs": {**RECORD["inputs"], "C1": {"dtype": "int64", "shape": [3], "values": [3, 2, 8]}},
        "outcome": [
            {
                "output": "Y0",
                "same": False,
                "expected": ["float32", [3, 2, 8]],
                "actual": ["float32", [3, 2, 8]],
            }
        ],
    }
    sentence = what_happened(FINDING, record)
    assert "copies" not in sentence
    assert sentence.endswith("so output `Y0` (float32[3, 2, 8]) computes different values.")


def test_without_a_record_the_sentence_is_the_kind_and_the_message_escaped():
    hostile = dataclasses.replace(
        FINDING,
        culprit=Culprit("pass", ("p`@team",)),
        measured={"message": "<b>@team</b> np.float32(1.6451218)"},
    )
    sentence = what_happened(hostile, None)
    assert sentence.startswith("Under `p'@\u200bteam`, the optimized model computes different values")
    assert "<b>" not in sentence and "@team" not in sentence and "1.645" in sentence


def test_numbers_keep_four_significant_digits_and_keys_read_as_words():
    assert rounded(0.5112818515584004) == "0.5113" and rounded("np.float32(1.6451218)") == "1.645"
    assert rounded(536117.8787797013) == "5.361e+05" and rounded([0, 0, 1]) == "[0, 0, 1]"
    rows = dict(
        evidence_rows(
            {
                "noise_ratio": 536117.87,
                "mismatch_fraction": 1.0,
                "standalone": {},
                "message": "m",
                "custom_key": 2,
            }
        )
    )
    assert rows == {
        "difference over the noise floor": "5.361e+05",
        "share of elements beyond tolerance": "100%",
        "custom_key": "2",
    }


def test_a_result_the_checker_refuses_too_is_said_beside_the_change():
    """rewrite_input_dtype retypes inputs by design; the Cast it writes without the default domain's
    opset is the bug, and the sentence said only the by-design retyping."""
    retyped = dataclasses.replace(
        FINDING,
        kind="interface-change",
        culprit=Culprit("pass", ("rewrite_input_dtype",)),
        measured={
            "message": "graph input #1 ('T') element type changed: INT64 -> INT32",
            "checker": "ValidationError: No opset import for domain ''\n\n==> Context: Bad node spec",
        },
    )
    sentence = what_happened(retyped, None)
    assert sentence.endswith("INT32. The optimized model also fails ONNX's checker: ValidationError: No "
                             "opset import for domain ''.")
    invalid = dataclasses.replace(retyped, kind="invalid-model")  # its message is the checker's already
    assert "also fails" not in what_happened(invalid, None)


def test_a_scalar_constant_reads_as_a_scalar_not_a_list():
    """eliminate_shape_gather's bug: a Gather of one index folded into a rank-0 constant that the
    Squeeze after it cannot take; `[2]` showed a valid 1-D tensor and hid it."""
    before = """<ir_version: 10, opset_import: ["" : 15]>
g (float[2,3] X0) => (int64 Y0) <int64[1] C0 = {0}> {
   t0 = Shape (X0)
   t1 = Gather <axis: int = 0> (t0, C0)
   Y0 = Squeeze (t1, C0)
}"""
    after = """<ir_version: 10, opset_import: ["" : 15]>
g (float[2,3] X0) => (int64 Y0) <int64[1] C0 = {0}, int64 t1 = {2}> {
   Y0 = Squeeze (t1, C0)
}"""
    record = {"model": before, "optimized": after, "inputs": {}}
    invalid = dataclasses.replace(
        FINDING, kind="invalid-model", measured={"message": "ShapeInferenceError: Unexpected axis value: 0"}
    )
    sentence = what_happened(invalid, record)
    assert "into `Squeeze(2, [0])`" in sentence, sentence
    # the rewrite alone does not say what is wrong with it
    refused = "The optimized model fails ONNX's checker: ShapeInferenceError: Unexpected axis value: 0."
    assert sentence.endswith(refused)
    # a rank-0 input with its value inline: one value, not a list
    assert small_values({"dtype": "bool", "shape": [], "values": [True]}) is True
    assert small_values({"dtype": "int64", "shape": [1], "values": [3]}) == [3]
