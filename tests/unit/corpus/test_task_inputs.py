"""Task input generators: deterministic, shaped and normalized as each model's spec says."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import INPUT_GENERATORS
from ditox_ci.corpus.task_inputs import GLYPHS, magika_features, normalize_image, render_text


def _model(*inputs: onnx.ValueInfoProto) -> onnx.ModelProto:
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Constant", [], ["y"], value_float=0.0)
    return helper.make_model(helper.make_graph([node], "g", list(inputs), [out]))


def _ref(inputs: str, spec: dict) -> ModelRef:
    return ModelRef(
        id=f"t:{inputs}", source="t", path="", meta={"inputs": inputs, "input_spec": spec}
    )


def test_glyphs_are_5x7_and_text_renders_at_scale() -> None:
    assert all(glyph.shape == (7, 5) for glyph in GLYPHS.values())
    mask = render_text("AB", 3)
    assert mask.shape == (21, 36)
    assert mask.any() and not render_text("  ", 2).any()


def test_image_generators_are_deterministic_and_normalized() -> None:
    model = _model(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"]))
    spec = {"input": "x", "height": 48, "width": 96, "mean": [0.5] * 3, "std": [0.5] * 3}
    for name in ("text-line", "text-page", "shapes"):
        first = INPUT_GENERATORS[name](model, _ref(name, spec), 2, 7)
        again = INPUT_GENERATORS[name](model, _ref(name, spec), 2, 7)
        other = INPUT_GENERATORS[name](model, _ref(name, spec), 2, 8)
        assert first[0]["x"].shape == (1, 3, 48, 96) and first[0]["x"].dtype == np.float32
        assert np.array_equal(first[1]["x"], again[1]["x"])
        assert not np.array_equal(first[0]["x"], other[0]["x"])
        assert first[0]["x"].min() >= -1.0 and first[0]["x"].max() <= 1.0
        assert first[0]["x"].std() > 0.01  # there is ink, not a blank canvas


def test_nhwc_bgr_layout() -> None:
    image = np.zeros((2, 3, 3), dtype=np.uint8)
    image[..., 0] = 255  # red
    out = normalize_image(image, {"layout": "NHWC", "bgr": True, "scale": 1.0, "mean": [1, 2, 3]})
    assert out.shape == (1, 2, 3, 3)
    assert out[0, 0, 0].tolist() == [-1.0, -2.0, 252.0]


def test_tokens_fill_mask_and_type_ids_with_matching_shapes() -> None:
    model = _model(
        *(
            helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
            for n in ("input_ids", "attention_mask", "token_type_ids")
        )
    )
    (feed,) = INPUT_GENERATORS["tokens"](model, _ref("tokens", {"length": 10}), 1, 3)
    assert feed["input_ids"].shape == feed["attention_mask"].shape == (1, 10)
    assert feed["input_ids"][0, 0] == 101 and feed["input_ids"][0, -1] == 102
    assert feed["attention_mask"].all() and not feed["token_type_ids"].any()


def test_audio_chunks_fill_state_and_sample_rate() -> None:
    model = _model(
        helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, None]),
        helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, None, 128]),
        helper.make_tensor_value_info("sr", TensorProto.INT64, []),
    )
    feeds = INPUT_GENERATORS["audio"](model, _ref("audio", {"shape": [1, 512]}), 2, 5)
    voiced, background = feeds[0]["input"], feeds[1]["input"]
    assert voiced.shape == (1, 512) and feeds[0]["state"].shape == (2, 1, 128)
    assert int(feeds[0]["sr"]) == 16000
    assert np.abs(voiced).max() > 5 * np.abs(background).max()


def test_magika_features_strip_and_pad() -> None:
    features = magika_features(b"  abc \n", beg_size=5, end_size=4)
    assert features.tolist() == [97, 98, 99, 256, 256, 256, 97, 98, 99]
    model = _model(helper.make_tensor_value_info("bytes", TensorProto.INT32, ["n", 2048]))
    (feed,) = INPUT_GENERATORS["file-bytes"](model, _ref("file-bytes", {}), 1, 0)
    assert feed["bytes"].shape == (1, 2048) and feed["bytes"].dtype == np.int32
    assert feed["bytes"].min() >= 0 and feed["bytes"].max() <= 256
