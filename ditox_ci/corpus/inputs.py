"""The inputs each model runs on: recorded ones when the model has them, else seeded random ones.

Random inputs must be the same on every machine and every run, so that a finding seen in CI is
reproduced by a developer: seeds come from hashlib over (seed, model id, sample, attempt), never
from Python's salted `hash()`. An input this module cannot make raises InputSpecError, which
skips that model only.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ditox_ci.corpus import ModelRef
from ditox_ci.corpus.inputs_by_use import GraphShapes, consumers, dim_size, draw_by_use
from ditox_ci.registry import Registry

Feed = dict[str, Any]
InputGenerator = Callable[[onnx.ModelProto, ModelRef, int, int], list[Feed]]

_DATA_SET = re.compile(r"test_data_set_(\d+)$")
_INPUT_FILE = re.compile(r"input_(\d+)\.pb$")
FLOAT_RANGE = (-2.0, 2.0)
# From attempt 1 on floats are drawn positive: NaN/Inf from random inputs mostly comes from
# log, sqrt, pow or division of negatives and zeros, which positive inputs avoid.
POSITIVE_FLOAT_RANGE = (0.25, 2.0)
STRING_ALPHABET = np.array(list("abcdefghij"))
# The wide-range sample: magnitudes log-uniform from WIDE_LOWEST up to the type's WIDE_HIGHEST,
# far enough out for a Relu6/Clip/saturation rewrite to show, not so far that float rounding of
# ordinary arithmetic reaches the default tolerances
WIDE_LOWEST = 1e-2
WIDE_HIGHEST: dict[int, float] = {
    onnx.TensorProto.FLOAT: 1e3,
    onnx.TensorProto.DOUBLE: 1e3,
    onnx.TensorProto.FLOAT16: 1e2,
    onnx.TensorProto.BFLOAT16: 1e2,
}

_FLOAT_TYPES: dict[int, type[np.generic]] = {
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.DOUBLE: np.float64,
}
_INT_TYPES: dict[int, type[np.integer]] = {
    onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.INT16: np.int16,
    onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.UINT8: np.uint8,
    onnx.TensorProto.UINT16: np.uint16,
    onnx.TensorProto.UINT32: np.uint32,
    onnx.TensorProto.UINT64: np.uint64,
}

# element types numpy lacks, drawn as float32 / integers and converted to their ml_dtypes type
_LOW_PRECISION_FLOAT_TYPES = {
    onnx.TensorProto.BFLOAT16,
    onnx.TensorProto.FLOAT8E4M3FN,
    onnx.TensorProto.FLOAT8E4M3FNUZ,
    onnx.TensorProto.FLOAT8E5M2,
    onnx.TensorProto.FLOAT8E5M2FNUZ,
    onnx.TensorProto.FLOAT8E8M0,
    onnx.TensorProto.FLOAT4E2M1,
}
# (lowest, highest) value
_NARROW_INT_TYPES: dict[int, tuple[int, int]] = {
    onnx.TensorProto.INT4: (-8, 7),
    onnx.TensorProto.UINT4: (0, 15),
    onnx.TensorProto.INT2: (-2, 1),
    onnx.TensorProto.UINT2: (0, 3),
}


class InputSpecError(Exception):
    """The model declares an input this module cannot make or read; the model is skipped."""


INPUT_GENERATORS: Registry[InputGenerator] = Registry("input generator", error=InputSpecError)


def register_input_generator(name: str) -> Callable[[InputGenerator], InputGenerator]:
    """Register a task-specific generator, chosen by a model whose `ref.meta["inputs"]` is `name`.

    It is called as `generator(model, ref, samples, seed)` and returns `samples` feeds; `seed`
    already mixes in the model id and the attempt, so a re-draw gets a different seed.
    """

    return INPUT_GENERATORS.register(name)


def derive_seed(seed: int, model_id: str, sample: int, attempt: int) -> int:
    """A 64-bit seed that depends only on its arguments, identical across machines and runs."""
    text = f"{seed}\0{model_id}\0{sample}\0{attempt}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _data_sets(ref: ModelRef) -> list[Path]:
    if not ref.inputs_dir:
        return []
    folders = [
        (int(match.group(1)), path)
        for path in Path(ref.inputs_dir).glob("test_data_set_*")
        if (match := _DATA_SET.match(path.name)) and path.is_dir()
    ]
    return [path for _, path in sorted(folders) if any(path.glob("input_*.pb"))]


def has_recorded_inputs(ref: ModelRef) -> bool:
    """Whether `ref` has backend-test data sets (`test_data_set_*/input_*.pb`) to run on."""
    return bool(_data_sets(ref))


def feedable_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that need a value: those backed by an initializer have a default."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    return [info for info in model.graph.input if info.name not in initializers]


def _read_value(data: bytes, type_proto: onnx.TypeProto, where: str) -> Any:
    kind = type_proto.WhichOneof("value")
    try:
        if kind == "sequence_type":
            sequence = onnx.SequenceProto()
            sequence.ParseFromString(data)
            return numpy_helper.to_list(sequence)
        if kind == "optional_type":
            optional = onnx.OptionalProto()
            optional.ParseFromString(data)
            # an empty optional is None: ONNX Runtime refuses it, the reference runner takes it
            return numpy_helper.to_optional(optional)
        if kind == "tensor_type":
            tensor = onnx.TensorProto()
            tensor.ParseFromString(data)
            return numpy_helper.to_array(tensor)
    except InputSpecError:
        raise
    except Exception as exc:
        raise InputSpecError(f"{where}: unreadable recorded input: {exc}") from None
    raise InputSpecError(f"{where}: recorded input of type {kind} cannot be fed to ONNX Runtime")


def _recorded_bytes(path: Path) -> bytes:
    """A recorded input's file; one that is a folder, a dangling link or unreadable (a pull
    request can add any of them beside a model) skips the model, saying which."""
    try:
        return path.read_bytes()
    except OSError as exc:
        where = f"{path.parent.name}/{path.name}"
        raise InputSpecError(f"{where}: unreadable recorded input: {exc.strerror or exc}") from None


def recorded_feeds(model: onnx.ModelProto, ref: ModelRef, samples: int) -> list[Feed]:
    """One feed per recorded data set (up to `samples`), bound to graph inputs by position."""
    inputs = feedable_inputs(model)
    feeds = []
    for folder in _data_sets(ref)[:samples]:
        files = sorted(
            (int(match.group(1)), path)
            for path in folder.glob("input_*.pb")
            if (match := _INPUT_FILE.match(path.name))
        )
        if len(files) > len(inputs):
            raise InputSpecError(
                f"{folder.name} has {len(files)} inputs but the model takes {len(inputs)}"
            )
        feeds.append(
            {
                info.name: _read_value(_recorded_bytes(path), info.type, f"{folder.name}/{path.name}")
                for info, (_, path) in zip(inputs, files, strict=False)
            }
        )
    return feeds


def write_recorded_inputs(folder: Path, model: onnx.ModelProto, feeds: Sequence[Feed]) -> None:
    """What `recorded_feeds` reads back: `model.onnx` and one `test_data_set_<k>/input_<i>.pb` per
    feed (ONNX backend-test layout), bound by position to the inputs that need a value."""
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / "model.onnx"))
    inputs = feedable_inputs(model)
    for index, feed in enumerate(feeds):
        data_set = folder / f"test_data_set_{index}"
        data_set.mkdir(exist_ok=True)
        for position, info in enumerate(inputs):
            value = _value_bytes(feed[info.name], info.type, info.name)
            (data_set / f"input_{position}.pb").write_bytes(value)


def _value_bytes(value: Any, type_proto: onnx.TypeProto, name: str) -> bytes:
    """`value` as the proto `_read_value` reads back for `type_proto`: a sequence or an optional
    as its own proto, not a tensor whose element type nobody can read."""
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        return numpy_helper.from_list(list(value), name).SerializeToString()
    if kind == "optional_type":
        return numpy_helper.from_optional(value, name).SerializeToString()
    return numpy_helper.from_array(np.asarray(value), name).SerializeToString()


def _shape(type_proto: onnx.TypeProto.Tensor, dynamic_dim: int) -> tuple[int, ...]:
    # A tensor without a declared shape is taken as 1-D: the smallest guess most ops accept.
    if not type_proto.HasField("shape"):
        return (dynamic_dim,)
    return tuple(dim_size(dim, dynamic_dim) for dim in type_proto.shape.dim)


def _random_tensor(
    tensor_type: onnx.TypeProto.Tensor,
    rng: np.random.Generator,
    dynamic_dim: int,
    attempt: int,
    where: str,
) -> np.ndarray:
    shape = _shape(tensor_type, dynamic_dim)
    elem = tensor_type.elem_type
    if elem in _FLOAT_TYPES:
        low, high = POSITIVE_FLOAT_RANGE if attempt > 0 else FLOAT_RANGE
        return rng.uniform(low, high, size=shape).astype(_FLOAT_TYPES[elem])
    if elem == onnx.TensorProto.UINT8:  # pixels and quantized values: the whole range
        return rng.integers(0, 256, size=shape).astype(np.uint8)
    if elem in _INT_TYPES:
        # Non-negative and below every dynamic dimension, so integers used as indices, axes or
        # counts stay valid; signed types would make negative indices and division by zero likelier.
        return rng.integers(0, max(dynamic_dim, 2), size=shape).astype(_INT_TYPES[elem])
    if elem == onnx.TensorProto.BOOL:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if elem == onnx.TensorProto.STRING:
        letters = rng.choice(STRING_ALPHABET, size=(*shape, 3))
        return np.array(["".join(word) for word in letters.reshape(-1, 3)], dtype=object).reshape(
            shape
        )
    if elem in _LOW_PRECISION_FLOAT_TYPES:
        low, high = POSITIVE_FLOAT_RANGE if attempt > 0 else FLOAT_RANGE
        return rng.uniform(low, high, size=shape).astype(helper.tensor_dtype_to_np_dtype(elem))
    if elem in _NARROW_INT_TYPES:
        lowest, highest = _NARROW_INT_TYPES[elem]
        return rng.integers(lowest, highest + 1, size=shape).astype(helper.tensor_dtype_to_np_dtype(elem))
    type_name = onnx.TensorProto.DataType.Name(elem)
    raise InputSpecError(f"{where}: cannot make random {type_name} inputs")


def _random_value(
    type_proto: onnx.TypeProto,
    rng: np.random.Generator,
    dynamic_dim: int,
    attempt: int,
    where: str,
) -> Any:
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return _random_tensor(type_proto.tensor_type, rng, dynamic_dim, attempt, where)
    if kind == "sequence_type":
        element = type_proto.sequence_type.elem_type
        return [
            _random_value(element, rng, dynamic_dim, attempt, where) for _ in range(dynamic_dim)
        ]
    if kind == "optional_type":
        return _random_value(type_proto.optional_type.elem_type, rng, dynamic_dim, attempt, where)
    raise InputSpecError(f"{where}: cannot make random inputs of type {kind or 'unknown'}")


def random_feeds(
    model: onnx.ModelProto,
    ref: ModelRef,
    samples: int,
    seed: int,
    dynamic_dim: int = 2,
    attempt: int = 0,
) -> list[Feed]:
    """`samples` feeds drawn from the declared types and shapes; unknown dims → `dynamic_dim`.
    Integer inputs are drawn for what consumes them (see inputs_by_use) where a consumer says."""
    inputs = feedable_inputs(model)
    uses = consumers(model)
    graph: GraphShapes | None = None
    feeds = []
    for sample in range(samples):
        rng = np.random.default_rng(derive_seed(seed, ref.id, sample, attempt))
        feed: Feed = {}
        for info in inputs:
            tensor, value = info.type.tensor_type, None
            if info.type.HasField("tensor_type") and tensor.elem_type in _INT_TYPES and info.name in uses:
                graph = graph or GraphShapes.of(model, dynamic_dim)
                shape = _shape(tensor, dynamic_dim)
                value = draw_by_use(shape, _INT_TYPES[tensor.elem_type], uses[info.name], graph, rng)
            feed[info.name] = (
                value if value is not None else _random_value(info.type, rng, dynamic_dim, attempt, info.name)
            )
        feeds.append(feed)
    return feeds


def wide_inputs(model: onnx.ModelProto, feed: Feed) -> list[str]:
    """The inputs of `feed` the wide-range sample widens: float tensors with elements."""
    names = []
    for info in feedable_inputs(model):
        elem = info.type.tensor_type.elem_type if info.type.HasField("tensor_type") else 0
        value = feed.get(info.name)
        if elem in WIDE_HIGHEST and isinstance(value, np.ndarray) and value.size:
            names.append(info.name)
    return names


def wide_feed(
    model: onnx.ModelProto, feed: Feed, seed: int, model_id: str, scales: Mapping[str, float] | None = None
) -> Feed | None:
    """`feed` with every float tensor input redrawn at wide magnitudes (log-uniform from
    WIDE_LOWEST up to WIDE_HIGHEST of its type × its entry in `scales`, default 1, either sign),
    other inputs kept: a sample that leaves the small range, where clips, saturations and bounded
    activations act. None when the model has no such input. Each input has its own draw, the same
    at every scale, so scaling one back changes no other."""
    names = wide_inputs(model, feed)
    if not names:
        return None
    wide = dict(feed)
    for name in names:
        value = feed[name]
        elem = next(i.type.tensor_type.elem_type for i in model.graph.input if i.name == name)
        rng = np.random.default_rng(derive_seed(seed, f"{model_id}\0{name}", -2, 0))
        highest = max(WIDE_HIGHEST[elem] * (scales or {}).get(name, 1.0), WIDE_LOWEST * 10)
        position = rng.uniform(0.0, 1.0, size=value.shape)
        magnitudes = np.exp(np.log(WIDE_LOWEST) + position * (np.log(highest) - np.log(WIDE_LOWEST)))
        wide[name] = (magnitudes * rng.choice([-1.0, 1.0], size=value.shape)).astype(value.dtype)
    return wide


# The sign-structured sample: every float input all negative, at a few levels so that values tie. A
# rewrite whose precondition holds only for some signs (a zero Pad folded into a MaxPool, whose own
# padding is -inf, differs only where a window sees no positive value) or that breaks ties
# differently shows on it, while a random sample puts a positive value into nearly every window.
# One sample, not three: an all-positive one is what a re-draw already makes, and zeros mostly
# make NaN/Inf (division, log), which the original's finite check would refuse.
SIGNED_LEVELS = (-0.5, -1.0, -1.5, -2.0)


def signed_feed(model: onnx.ModelProto, feed: Feed, seed: int, model_id: str) -> Feed | None:
    """`feed` with every float tensor input redrawn from SIGNED_LEVELS (the sign-structured sample),
    other inputs kept; None when the model has no such input."""
    names = wide_inputs(model, feed)
    if not names:
        return None
    signed = dict(feed)
    for name in names:
        rng = np.random.default_rng(derive_seed(seed, f"{model_id}\0{name}", -3, 0))
        signed[name] = rng.choice(SIGNED_LEVELS, size=feed[name].shape).astype(feed[name].dtype)
    return signed


def inputs_kind(ref: ModelRef) -> str:
    """Where `make_feeds` takes `ref`'s inputs from, by the same precedence: `generator:<name>`,
    `recorded` or `random`."""
    if "inputs" in ref.meta:
        return f"generator:{ref.meta['inputs']}"
    return "recorded" if has_recorded_inputs(ref) else "random"


def make_feeds(
    model: onnx.ModelProto,
    ref: ModelRef,
    samples: int,
    seed: int,
    dynamic_dim: int = 2,
    attempt: int = 0,
) -> list[Feed]:
    """The feeds `ref` runs on: its registered generator, its recorded inputs, or random ones.

    Recorded inputs are what the model's authors meant and do not change with `attempt`; random
    inputs are re-drawn for each `attempt` (the engine re-draws after NaN/Inf).
    """
    if "inputs" in ref.meta:
        name = str(ref.meta["inputs"])
        generator = INPUT_GENERATORS.lookup(name)
        mixed_seed = derive_seed(seed, ref.id, -1, attempt)
        try:
            return generator(model, ref, samples, mixed_seed)
        except InputSpecError:
            raise
        except Exception as exc:  # the generator's trouble (a missing font, a model it does not fit)
            raise InputSpecError(f"input generator {name!r} failed: {type(exc).__name__}: {exc}") from None
    if has_recorded_inputs(ref):
        return recorded_feeds(model, ref, samples)
    return random_feeds(model, ref, samples, seed, dynamic_dim, attempt)
