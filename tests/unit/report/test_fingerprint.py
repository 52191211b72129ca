"""Fingerprints key on the cause: a message that names the tensor it met keys the same bug."""

from __future__ import annotations

from ditox_ci.report.fingerprint import fingerprint, normalize_message


def test_messages_differing_only_in_a_tensor_name_give_one_fingerprint():
    """onnxslim and ONNX Runtime name the initializer they met: one cause was 6 and 5 bugs."""
    messages = [
        "Initializer onnx::Conv_123 not found in graph",
        "Initializer conv1.weight_3 not found in graph",
        "Initializer '/layer.0/Add_output_0' not found in graph",
    ]
    prints = {fingerprint("optimizer-error", ("shared",), message, ()) for message in messages}
    assert len(prints) == 1
    assert normalize_message(messages[0]) == "Initializer <name> not found in graph"


def test_what_says_the_cause_is_kept():
    assert normalize_message("Could not find an implementation for Mul(14) node with name Mul_7") == (
        "Could not find an implementation for Mul(<n>) node with name <name>"
    )
    assert normalize_message("tensor(float16) vs tensor(int64)") == "tensor(float16) vs tensor(int64)"
    assert normalize_message("eliminate_nop_transpose failed") == "eliminate_nop_transpose failed"
    different = {
        fingerprint("optimizer-error", (), message, ())
        for message in ("CastLike: unsupported saturate", "Reshape: shape mismatch")
    }
    assert len(different) == 2


def test_messages_naming_different_op_types_are_different_causes():
    """onnxslim lacked a handler for CastLike and for Reshape: two causes once shared a fingerprint
    because the quoted op type was taken out like a tensor name."""
    castlike, reshape = "KeyError: 'CastLike'", "KeyError: 'Reshape'"
    assert fingerprint("optimizer-error", (), castlike, ()) != fingerprint("optimizer-error", (), reshape, ())
    assert normalize_message(castlike) == "KeyError: 'CastLike'"
    # a quoted tensor name is still a name
    assert normalize_message("KeyError: 'conv1_w'") == normalize_message("KeyError: 'fc.bias'")
