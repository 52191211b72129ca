"""Meaningful inputs for trained models, where random tensors would be meaningless to them.

An OCR model shown uniform noise finds no text, so a changed recognition would never show; these
generators make what the models were trained on, from numpy alone and deterministically from the
seed: pages and lines of text rendered in a built-in 5x7 bitmap font, scenes of drawn shapes,
BERT-style token sequences, file bytes in Magika's feature layout, and audio-like signals (voiced
harmonics, noise, silence) for voice-activity detection.

Each generator is registered under the name a model's `ref.meta["inputs"]` gives and reads its
geometry and normalization from `ref.meta["input_spec"]` (see the README, "Meaningful inputs").
Inputs the spec does not mention are filled from the model's declaration: int64 scalars with the
sample rate (or 0), masks with ones, recurrent state with zeros.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs import Feed, InputSpecError, feedable_inputs, register_input_generator
from ditox_ci.corpus.inputs_by_use import dim_size

# 5x7 glyphs: 7 rows of 5 pixels per character, '#' = ink.
_GLYPH_ROWS = {
    "0": " ### |#   #|#  ##|# # #|##  #|#   #| ### ",
    "1": "  #  | ##  |  #  |  #  |  #  |  #  | ### ",
    "2": " ### |#   #|    #|   # |  #  | #   |#####",
    "3": "#####|   # |  #  |   # |    #|#   #| ### ",
    "4": "   # |  ## | # # |#  # |#####|   # |   # ",
    "5": "#####|#    |#### |    #|    #|#   #| ### ",
    "6": "  ## | #   |#    |#### |#   #|#   #| ### ",
    "7": "#####|    #|   # |  #  | #   | #   | #   ",
    "8": " ### |#   #|#   #| ### |#   #|#   #| ### ",
    "9": " ### |#   #|#   #| ####|    #|   # | ##  ",
    "A": " ### |#   #|#   #|#####|#   #|#   #|#   #",
    "B": "#### |#   #|#   #|#### |#   #|#   #|#### ",
    "C": " ### |#   #|#    |#    |#    |#   #| ### ",
    "D": "###  |#  # |#   #|#   #|#   #|#  # |###  ",
    "E": "#####|#    |#    |#### |#    |#    |#####",
    "F": "#####|#    |#    |#### |#    |#    |#    ",
    "G": " ### |#   #|#    |# ###|#   #|#   #| ####",
    "H": "#   #|#   #|#   #|#####|#   #|#   #|#   #",
    "I": " ### |  #  |  #  |  #  |  #  |  #  | ### ",
    "K": "#   #|#  # |# #  |##   |# #  |#  # |#   #",
    "L": "#    |#    |#    |#    |#    |#    |#####",
    "M": "#   #|## ##|# # #|#   #|#   #|#   #|#   #",
    "N": "#   #|#   #|##  #|# # #|#  ##|#   #|#   #",
    "O": " ### |#   #|#   #|#   #|#   #|#   #| ### ",
    "P": "#### |#   #|#   #|#### |#    |#    |#    ",
    "R": "#### |#   #|#   #|#### |# #  |#  # |#   #",
    "S": " ####|#    |#    | ### |    #|    #|#### ",
    "T": "#####|  #  |  #  |  #  |  #  |  #  |  #  ",
    "U": "#   #|#   #|#   #|#   #|#   #|#   #| ### ",
    "V": "#   #|#   #|#   #|#   #|#   #| # # |  #  ",
    "W": "#   #|#   #|#   #|# # #|# # #|# # #| # # ",
    "Y": "#   #|#   #| # # |  #  |  #  |  #  |  #  ",
    " ": "     |     |     |     |     |     |     ",
}
GLYPHS = {
    char: np.array([[pixel == "#" for pixel in row] for row in rows.split("|")])
    for char, rows in _GLYPH_ROWS.items()
}
ALPHABET = "".join(sorted(set(GLYPHS) - {" "}))
WORDS = ("ONNX", "GRAPH", "TEST", "MODEL", "FUSE", "PASS", "2024", "SHAPE", "BATCH", "NODE")

BERT_CLS, BERT_SEP, BERT_FIRST_WORD, BERT_VOCAB = 101, 102, 1996, 30522
MAGIKA_PADDING = 256


def render_text(text: str, scale: int) -> np.ndarray:
    """Ink mask (rows, cols) of `text` in the 5x7 font, one blank column between glyphs."""
    columns = []
    for char in text.upper():
        glyph = GLYPHS.get(char, GLYPHS[" "])
        columns.extend([glyph, np.zeros((7, 1), dtype=bool)])
    mask = np.concatenate(columns, axis=1) if columns else np.zeros((7, 0), dtype=bool)
    return np.kron(mask, np.ones((scale, scale), dtype=bool))


def _paste(canvas: np.ndarray, mask: np.ndarray, top: int, left: int, color: np.ndarray) -> None:
    rows = min(mask.shape[0], canvas.shape[0] - top)
    cols = min(mask.shape[1], canvas.shape[1] - left)
    if rows <= 0 or cols <= 0:
        return
    region = canvas[top : top + rows, left : left + cols]
    region[mask[:rows, :cols]] = color


def _phrase(rng: np.random.Generator, words: int) -> str:
    return " ".join(str(rng.choice(WORDS)) for _ in range(words))


def text_page(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """RGB uint8 page: dark text lines of varying size on a light, slightly uneven background."""
    page = np.full((height, width, 3), 235, dtype=np.uint8)
    page[:] = np.clip(page + rng.normal(0, 4, page.shape), 0, 255).astype(np.uint8)
    top = int(rng.integers(4, 16))
    while top < height - 12:
        scale = int(rng.integers(2, 4))
        mask = render_text(_phrase(rng, int(rng.integers(1, 4))), scale)
        ink = rng.integers(0, 60, 3).astype(np.uint8)
        _paste(page, mask, top, int(rng.integers(4, max(5, width // 6))), ink)
        top += mask.shape[0] + int(rng.integers(8, 24))
    return page


def text_line(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """RGB uint8 crop of one text line filling the height, as a recognizer expects it."""
    line = np.full((height, width, 3), 240, dtype=np.uint8)
    scale = max(1, (height - 8) // 7)
    text = "".join(str(rng.choice(list(ALPHABET))) for _ in range(int(rng.integers(4, 9))))
    mask = render_text(text, scale)
    _paste(line, mask, (height - mask.shape[0]) // 2, 4, np.array([20, 20, 20], dtype=np.uint8))
    return line


def shapes_scene(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """RGB uint8 scene: a gradient background with filled rectangles, discs and a caption."""
    ys, xs = np.mgrid[0:height, 0:width]
    base = rng.integers(60, 200, 3)
    scene = np.stack([base[c] + 40 * (xs / width) - 20 * (ys / height) for c in range(3)], axis=-1)
    for _ in range(int(rng.integers(3, 7))):
        color = rng.integers(0, 256, 3)
        cy, cx = rng.integers(0, height), rng.integers(0, width)
        size = int(rng.integers(min(height, width) // 10, min(height, width) // 3))
        if rng.random() < 0.5:
            inside = (np.abs(ys - cy) < size) & (np.abs(xs - cx) < size * rng.uniform(0.5, 1.5))
        else:
            inside = (ys - cy) ** 2 + (xs - cx) ** 2 < size**2
        scene[inside] = color
    image = np.clip(scene, 0, 255).astype(np.uint8)
    _paste(image, render_text(_phrase(rng, 1), 2), height - 20, 6, np.zeros(3, dtype=np.uint8))
    return image


def normalize_image(image: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    """uint8 HWC RGB → float32 batch of one, laid out and normalized as `spec` says."""
    pixels = image[..., ::-1] if spec.get("bgr", False) else image
    mean = np.asarray(spec.get("mean", (0.0,) * 3), dtype=np.float32)
    std = np.asarray(spec.get("std", (1.0,) * 3), dtype=np.float32)
    values = (pixels.astype(np.float32) * np.float32(spec.get("scale", 1 / 255)) - mean) / std
    if str(spec.get("layout", "NCHW")).upper() == "NCHW":
        values = values.transpose(2, 0, 1)
    return values[None].astype(np.float32)


def _spec(ref: ModelRef) -> dict[str, Any]:
    spec = ref.meta.get("input_spec", {})
    if not isinstance(spec, Mapping):
        raise InputSpecError(f"{ref.id}: input_spec must be a mapping, got {type(spec).__name__}")
    return dict(spec)


def _declared_shape(value: onnx.ValueInfoProto, sizes: Mapping[str, int]) -> tuple[int, ...]:
    """The input's shape with symbolic (or negative) dims taken from `sizes` (else 1)."""
    dims = value.type.tensor_type.shape.dim
    return tuple(dim_size(d, sizes.get(d.dim_param, 1)) for d in dims)


def _fill_rest(model: onnx.ModelProto, feed: Feed, spec: Mapping[str, Any]) -> Feed:
    """Inputs the generator did not make: scalars get the sample rate, masks ones, the rest zeros;
    a symbolic dim shared with a generated input (`batch`, `sequence`) takes that input's size."""
    inputs = feedable_inputs(model)
    sizes: dict[str, int] = {}
    for value in inputs:
        if value.name in feed:
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, np.shape(feed[value.name]), strict=False):
                if dim.dim_param:
                    sizes[dim.dim_param] = int(size)
    for value in inputs:
        if value.name in feed:
            continue
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        shape = _declared_shape(value, sizes)
        if not shape and np.issubdtype(dtype, np.integer):
            feed[value.name] = np.array(spec.get("sample_rate", 0), dtype=dtype)
        elif "mask" in value.name.lower():
            feed[value.name] = np.ones(shape, dtype=dtype)
        else:
            feed[value.name] = np.zeros(shape, dtype=dtype)
    return feed


def _image_input(model: onnx.ModelProto, spec: Mapping[str, Any]) -> str:
    name = spec.get("input")
    if name is not None:
        return str(name)
    for value in feedable_inputs(model):
        if value.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
            return value.name
    raise InputSpecError("the model has no float input to feed an image to")


def _image_generator(draw: Any) -> Any:
    def generate(model: onnx.ModelProto, ref: ModelRef, samples: int, seed: int) -> list[Feed]:
        spec = _spec(ref)
        height, width = int(spec.get("height", 224)), int(spec.get("width", 224))
        name = _image_input(model, spec)
        rng = np.random.default_rng(seed)
        feeds = []
        for _ in range(samples):
            image = normalize_image(draw(rng, height, width), spec)
            feeds.append(_fill_rest(model, {name: image}, spec))
        return feeds

    return generate


register_input_generator("text-page")(_image_generator(text_page))
register_input_generator("text-line")(_image_generator(text_line))
register_input_generator("shapes")(_image_generator(shapes_scene))


@register_input_generator("tokens")
def token_sequences(model: onnx.ModelProto, ref: ModelRef, samples: int, seed: int) -> list[Feed]:
    """BERT-style `[CLS] words… [SEP]` of `length` tokens (default 16) with a full mask."""
    spec = _spec(ref)
    length = int(spec.get("length", 16))
    vocab = int(spec.get("vocab_size", BERT_VOCAB))
    name = str(spec.get("input", "input_ids"))
    rng = np.random.default_rng(seed)
    feeds = []
    for _ in range(samples):
        words = rng.integers(min(BERT_FIRST_WORD, vocab - 1), vocab, length - 2)
        ids = np.concatenate([[BERT_CLS], words, [BERT_SEP]]).astype(np.int64)[None]
        feeds.append(_fill_rest(model, {name: ids}, spec))
    return feeds


_SAMPLE_FILES = (
    b"import os\n\ndef main(argv):\n    for name in sorted(os.listdir(argv[1])):\n"
    b"        print(name)\n\nif __name__ == '__main__':\n    main(__import__('sys').argv)\n",
    b'{"name": "ditox-ci", "version": "0.1.0", "models": [{"id": 1, "task": "ocr"}]}\n',
    b"<!DOCTYPE html>\n<html><head><title>Report</title></head><body><h1>Findings</h1>"
    b"<table><tr><td>pass</td><td>fuse_bn_into_conv</td></tr></table></body></html>\n",
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x02\x00\x00\x00",
    b'#include <stdio.h>\n\nint main(void) {\n    printf("hello\\n");\n    return 0;\n}\n',
    b"name,task,size\nresnet,classification,97\nyolo,detection,12\nbert,embedding,22\n",
)


def magika_features(content: bytes, beg_size: int = 1024, end_size: int = 1024) -> np.ndarray:
    """Magika v3 features: the first and last bytes with surrounding whitespace stripped, padded
    with 256 (the beginning padded at its end, the end at its start)."""
    stripped = content.strip()
    beg = list(stripped[:beg_size]) + [MAGIKA_PADDING] * max(0, beg_size - len(stripped))
    tail = list(stripped[-end_size:]) if stripped else []
    end = [MAGIKA_PADDING] * (end_size - len(tail)) + tail
    return np.asarray(beg + end, dtype=np.int32)


@register_input_generator("file-bytes")
def file_bytes(model: onnx.ModelProto, ref: ModelRef, samples: int, seed: int) -> list[Feed]:
    """Features of small files of different types (source code, JSON, HTML, PNG, C, CSV),
    lightly varied per seed so repeated samples are not identical."""
    spec = _spec(ref)
    name = str(spec.get("input", "bytes"))
    rng = np.random.default_rng(seed)
    feeds = []
    for sample in range(samples):
        content = _SAMPLE_FILES[
            (sample + int(rng.integers(0, len(_SAMPLE_FILES)))) % len(_SAMPLE_FILES)
        ]
        repeats = int(rng.integers(1, 4))
        features = magika_features(
            content * repeats, int(spec.get("beg_size", 1024)), int(spec.get("end_size", 1024))
        )
        feeds.append(_fill_rest(model, {name: features[None]}, spec))
    return feeds


def audio_signal(
    rng: np.random.Generator, samples: int, sample_rate: int, voiced: bool
) -> np.ndarray:
    """A voiced segment (harmonics of a gliding pitch under a syllable envelope, plus breath
    noise) or background noise, in [-1, 1]."""
    t = np.arange(samples) / sample_rate
    noise = rng.normal(0, 0.01, samples)
    if not voiced:
        return noise.astype(np.float32)
    pitch = rng.uniform(90, 220) * (1 + 0.1 * np.sin(2 * np.pi * rng.uniform(2, 5) * t))
    phase = 2 * np.pi * np.cumsum(pitch) / sample_rate
    harmonics = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = 0.5 * (1 - np.cos(2 * np.pi * np.minimum(t / t[-1], 1.0))) if samples > 1 else 1.0
    return (0.3 * harmonics * envelope + noise * 3).astype(np.float32)


@register_input_generator("audio")
def audio_chunks(model: onnx.ModelProto, ref: ModelRef, samples: int, seed: int) -> list[Feed]:
    """Audio chunks of `shape` (default [1, 512]); samples alternate voiced and background so a
    flipped speech decision shows. The last axis is time; leading axes are frames."""
    spec = _spec(ref)
    name = str(spec.get("input", "input"))
    shape: Sequence[int] = spec.get("shape", (1, 512))
    sample_rate = int(spec.setdefault("sample_rate", 16000))
    rng = np.random.default_rng(seed)
    feeds = []
    for sample in range(samples):
        frames = int(np.prod(shape[:-1]))
        signal = audio_signal(rng, frames * int(shape[-1]), sample_rate, voiced=sample % 2 == 0)
        feeds.append(_fill_rest(model, {name: signal.reshape(tuple(shape))}, spec))
    return feeds
