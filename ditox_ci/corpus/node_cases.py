"""The `onnx-node` source: the installed onnx wheel's operator test cases, unpacked only as swept.

onnx makes its cases by running their exporters (seconds of numpy for all 1,884), so listing them
that way costs as much as unpacking every one: a two-model glob, and every shard job of a PR
check, paid for all of them before the first run. The names, the module that makes each case and
what the shard planner estimates a case's cost from come from an index instead: the one shipped
for the onnx build it was made from (`data/onnx-node-index.json`), or, for another onnx, one made
on this machine by unpacking every case once. A sweep then unpacks only its shard's cases, by
importing only the modules that make them, each into a folder of the cache addressed by the
content of onnx's test-case code, once per machine.

After a bump of onnx in requirements.lock the shipped index is remade with
`python -c 'from ditox_ci.corpus.node_cases import main; main()' > ditox_ci/data/onnx-node-index.json`
(a fresh process, so every case is seen being made by its module); a stale one costs each
machine one unpacking of every case, nothing else.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import importlib
import json
import pkgutil
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ditox_ci.corpus import SOURCE_NAMES, UNPACKERS, CorpusContext, ModelRef, ModelSize, register_source
from ditox_ci.corpus.loading import node_count
from ditox_ci.corpus.sources import INDEX_FILE, intact, materialize_once, recorded_inputs_dir
from ditox_ci.errors import InternalError

SOURCE = "onnx-node"
CASES_PACKAGE = "onnx.backend.test.case.node"
CASES_CODE = Path(onnx.__file__).parent / "backend" / "test" / "case"
SHIPPED_INDEX = Path(__file__).resolve().parent.parent / "data" / "onnx-node-index.json"
# raised when the files written for a case change, so a cache never serves the older layout
# (2: a case's family is its operator's group, no longer its first node's op)
LAYOUT = 2
# A case's family is the group of the operator it tests, so the coverage picture has a handful of
# columns that say something (a column per operator would be ~190, per first node mostly
# "Constant"). The groups are the folders of onnx/defs that define each operator, the small ones
# folded together.
FAMILY_PREFIX = "node/"
_OP_GROUPS = {
    "math": "math",
    "nn": "nn",
    "rnn": "nn",
    "preview": "nn",
    "tensor": "tensor",
    "reduction": "reduction",
    "logical": "logical",
    "quantization": "quantization",
    "controlflow": "control-flow",
    "sequence": "control-flow",
    "optional": "control-flow",
}
OTHER_GROUP = "other"


@dataclass(frozen=True)
class NodeCase:
    """One case as the index lists it."""

    name: str
    family: str
    # the module below CASES_PACKAGE whose exporters make it (`abs`, `ai_onnx_ml.array_feature_extractor`);
    # "" when not known (made with all the others)
    module: str
    bytes: int
    nodes: int
    recorded_inputs: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "module": self.module,
            "bytes": self.bytes,
            "nodes": self.nodes,
            "recorded_inputs": self.recorded_inputs,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NodeCase:
        return cls(
            name=str(data["name"]),
            family=str(data["family"]),
            module=str(data["module"]),
            bytes=int(data["bytes"]),
            nodes=int(data["nodes"]),
            recorded_inputs=bool(data["recorded_inputs"]),
        )


@functools.cache
def cases_key() -> str:
    """The content address of the installed onnx's cases: its version, whether it was built with
    ONNX-ML (which adds cases), the code that makes them and our layout."""
    digest = hashlib.sha256(f"{onnx.__version__}\0{onnx.ONNX_ML}\0{LAYOUT}".encode())
    for path in sorted(CASES_CODE.rglob("*.py")):
        digest.update(path.relative_to(CASES_CODE).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def node_root(ctx: CorpusContext) -> Path:
    return ctx.cache_dir / SOURCE / cases_key()


def _quietly(make: Callable[[], None]) -> None:
    # the exporters compute expected outputs with numpy and trip over log(0), 0/0 … on purpose
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        make()


def _registered() -> list[Any]:
    """Every case the exporters imported in this process so far have made."""
    return list(importlib.import_module(CASES_PACKAGE)._NodeTestCases)


def _modules(package: str = CASES_PACKAGE) -> Iterator[str]:
    """The modules below `package` in the order onnx's collect_testcases imports them."""
    for _, name, is_package in pkgutil.iter_modules(importlib.import_module(package).__path__):
        module = f"{package}.{name}"
        if not onnx.ONNX_ML and module.startswith(f"{CASES_PACKAGE}.ai_onnx_ml"):
            continue
        yield module
        if is_package:
            yield from _modules(module)


def _squeezed(name: str) -> str:
    """`name` lower-cased with everything but letters and digits dropped: `greater_or_equal`,
    `GreaterOrEqual` and `test_greater_or_equal_bcast` line up."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


@functools.cache
def _schemas() -> dict[str, onnx.defs.OpSchema]:
    """Every operator onnx defines, by its squeezed name (no two collide)."""
    return {_squeezed(schema.name): schema for schema in onnx.defs.get_all_schemas()}


def _named_in(text: str) -> onnx.defs.OpSchema | None:
    """The operator whose squeezed name is the longest prefix of `text`'s: `castlike` is CastLike,
    not Cast; `rangeop` is Range."""
    squeezed = _squeezed(text)
    names = [name for name in _schemas() if squeezed.startswith(name)]
    return _schemas()[max(names, key=len)] if names else None


def operator_under_test(model: onnx.ModelProto, name: str, module: str) -> tuple[str, str]:
    """(op type, domain) of the operator a case tests: the one its module is named after (onnx
    writes one module per operator: `greater_or_equal`, `ai_onnx_ml.binarizer`), else the one
    its name starts with, else its last node that is not a Constant. An expanded case holds the
    operator's function body, not the operator, so the graph comes last."""
    for text in (module.rsplit(".", 1)[-1], name.removeprefix("test_")):
        schema = _named_in(text) if text else None
        if schema is not None:
            return schema.name, schema.domain
    nodes = [node for node in model.graph.node if node.op_type != "Constant"] or list(model.graph.node)
    return (nodes[-1].op_type, nodes[-1].domain) if nodes else ("", "")


def node_family(model: onnx.ModelProto, name: str, module: str) -> str:
    """`node/<group>`: the group of onnx/defs that defines the operator the case tests."""
    op_type, domain = operator_under_test(model, name, module)
    try:
        folder = Path(onnx.defs.get_schema(op_type, domain=domain).file).parent.name
    except onnx.defs.SchemaError:  # an op onnx does not define
        folder = ""
    return FAMILY_PREFIX + _OP_GROUPS.get(folder, OTHER_GROUP)


def _cases_by_module() -> list[tuple[str, Any]]:
    """(module, case) for every case; the module is "" for cases made before this call."""
    made: list[tuple[str, Any]] = [("", case) for case in _registered()]

    def import_each() -> None:
        for module in _modules():
            before = len(_registered())
            importlib.import_module(module)
            made.extend((module.removeprefix(f"{CASES_PACKAGE}."), case) for case in _registered()[before:])

    _quietly(import_each)
    return made


def _serialize_value(value: Any, type_proto: onnx.TypeProto, name: str) -> bytes:
    """One input/output value as the proto the backend-test layout uses for its declared type."""
    if isinstance(value, onnx.TensorProto):
        return value.SerializeToString()
    kind = type_proto.WhichOneof("value")
    serializers: dict[str | None, Callable[[], Any]] = {
        "map_type": lambda: numpy_helper.from_dict(value, name),
        "sequence_type": lambda: numpy_helper.from_list(value, name),
        "optional_type": lambda: numpy_helper.from_optional(value, name),
    }
    proto = serializers.get(kind, lambda: numpy_helper.from_array(np.asarray(value), name))()
    return bytes(proto.SerializeToString())


def _write_values(
    folder: Path, prefix: str, values: Sequence[Any], infos: Sequence[onnx.ValueInfoProto]
) -> None:
    for index, (value, info) in enumerate(zip(values, infos, strict=False)):
        data = _serialize_value(value, info.type, info.name)
        (folder / f"{prefix}_{index}.pb").write_bytes(data)


def _write_case(folder: Path, case: Any, module: str) -> dict[str, Any]:
    """The case in the backend-test layout (`model.onnx`, `test_data_set_<k>/`), its index entry
    returned and written beside it as the folder's completion marker."""
    model = case.model
    (folder / "model.onnx").write_bytes(model.SerializeToString())
    for k, (inputs, outputs) in enumerate(case.data_sets or ()):
        data_dir = folder / f"test_data_set_{k}"
        data_dir.mkdir()
        _write_values(data_dir, "input", inputs, model.graph.input)
        _write_values(data_dir, "output", outputs, model.graph.output)
    entry = NodeCase(
        name=case.name,
        family=node_family(model, case.name, module),
        module=module,
        bytes=(folder / "model.onnx").stat().st_size,
        nodes=node_count(model),
        recorded_inputs=recorded_inputs_dir(folder) is not None,
    ).to_json()
    (folder / INDEX_FILE).write_text(json.dumps([entry]))
    return entry


def _case_writer(case: Any, module: str, folder: Path) -> list[dict[str, Any]]:
    return [_write_case(folder, case, module)]


def _unpack_all(folder: Path) -> list[dict[str, Any]]:
    """Every case, each in a folder of its own under `folder`; the index of them all."""
    entries = []
    for module, case in _cases_by_module():
        if case.model is None:
            continue
        (folder / case.name).mkdir()
        entries.append(_write_case(folder / case.name, case, module))
    return sorted(entries, key=lambda entry: entry["name"])


def node_index(ctx: CorpusContext) -> list[NodeCase]:
    """The cases of the installed onnx, by name: the shipped index when it was made from the same
    test-case code, else this machine's (made by unpacking every case, once)."""
    shipped = json.loads(SHIPPED_INDEX.read_text()) if SHIPPED_INDEX.is_file() else {}
    if shipped.get("key") == cases_key():
        entries = shipped["cases"]
    else:
        entries = materialize_once(node_root(ctx), _unpack_all)
    return [NodeCase.from_json(entry) for entry in entries]


def _made_by(modules: Collection[str]) -> dict[str, Any]:
    """The cases these modules make (and any made before in this process), by name; an unknown
    module ("") imports them all."""

    def import_them() -> None:
        every = "" in modules
        for module in [*_modules()] if every else [f"{CASES_PACKAGE}.{name}" for name in sorted(modules)]:
            importlib.import_module(module)

    _quietly(import_them)
    return {case.name: case for case in _registered()}


def unpack_cases(refs: Sequence[ModelRef], ctx: CorpusContext) -> None:
    """Write the cases of `refs` that this machine's cache lacks, importing only their modules."""
    root = node_root(ctx)
    missing = [ref.id.removeprefix(f"{SOURCE}:") for ref in refs]
    missing = [name for name in missing if not ((root / name / INDEX_FILE).is_file() and intact(root / name))]
    if not missing:
        return
    module_of = {case.name: case.module for case in node_index(ctx)}
    made = _made_by({module_of[name] for name in missing})
    for name in missing:
        if name not in made:
            raise InternalError(
                f"onnx's {CASES_PACKAGE}.{module_of[name] or '*'} made no case {name!r} although the "
                f"index for this onnx lists it; remove {root} and run again"
            )
        materialize_once(root / name, functools.partial(_case_writer, made[name], module_of[name]))


@register_source(SOURCE)
def onnx_node_source(pattern: str | None, ctx: CorpusContext) -> list[ModelRef]:
    """The installed onnx wheel's operator test cases (one node each, recorded inputs), listed
    from the index; `unpack_cases` writes their files."""
    root = node_root(ctx)
    return [
        ModelRef(
            id=f"{SOURCE}:{case.name}",
            source=SOURCE,
            path=str(root / case.name / "model.onnx"),
            inputs_dir=str(root / case.name) if case.recorded_inputs else None,
            family=case.family,
            size=ModelSize(case.bytes, case.nodes),
        )
        for case in node_index(ctx)
        if not pattern or fnmatch.fnmatchcase(case.name, pattern)
    ]


SOURCE_NAMES[SOURCE] = lambda ctx: [case.name for case in node_index(ctx)]
UNPACKERS[SOURCE] = unpack_cases


def main() -> None:
    """Print the index to ship: every case made in this fresh process, so each has its module."""
    with tempfile.TemporaryDirectory() as folder:
        entries = _unpack_all(Path(folder))
    unknown = [entry["name"] for entry in entries if not entry["module"]]
    if unknown:
        sys.exit(f"cases made before the index was: {unknown[:3]}")
    # one case a line: a bump of onnx reads as a diff of cases
    head = json.dumps({"onnx": onnx.__version__, "key": cases_key()})[:-1]
    print(head + ', "cases": [\n' + ",\n".join(json.dumps(entry) for entry in entries) + "\n]}")
