"""The optimize stage: adapters that turn an optimizer spec into `optimize(model, passes, fixed_point)`.

Built-in adapters live in OPTIMIZERS; any other spec is an import path `pkg.module:function` (or
`path/to/file.py:function`) whose function has the onnxoptimizer shape. Its module may define
`get_available_passes()` and `get_fuse_and_elimination_passes()`; where it does not, the installed
onnxoptimizer's lists are used.
Imports happen lazily so a worker can put a different optimizer installation first on sys.path.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import onnx

from ditox_ci.errors import OptimizerLoadError

OptimizeFunc = Callable[[onnx.ModelProto, Sequence[str], bool], onnx.ModelProto]
OptimizeBytesFunc = Callable[[bytes, Sequence[str], bool], bytes]


@dataclass(frozen=True)
class OptimizerInfo:
    name: str
    version: str
    passes: tuple[str, ...]
    default_passes: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "version": self.version,
            "passes": list(self.passes),
            "default_passes": list(self.default_passes),
        }


@dataclass(frozen=True)
class LoadedOptimizer:
    info: OptimizerInfo
    optimize: OptimizeFunc = field(compare=False)
    # onnxoptimizer serializes its input, so it may share the caller's model; unknown callables get
    # a private copy because they may edit the model in place.
    mutates_input: bool = True
    # serialized model in, serialized model out: lets the engine see "unchanged" without parsing
    optimize_bytes: OptimizeBytesFunc | None = field(default=None, compare=False)


def _version_of(module: ModuleType, distribution: str) -> str:
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _onnxoptimizer() -> LoadedOptimizer:
    try:
        module = importlib.import_module("onnxoptimizer")
    except ImportError as exc:
        raise OptimizerLoadError(f"cannot import onnxoptimizer ({exc}); pip install onnxoptimizer") from None

    def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool) -> onnx.ModelProto:
        return module.optimize(model, list(passes), fixed_point)

    info = OptimizerInfo(
        name="onnxoptimizer",
        version=_version_of(module, "onnxoptimizer"),
        passes=tuple(module.get_available_passes()),
        default_passes=tuple(module.get_fuse_and_elimination_passes()),
    )
    native = module.onnx_opt_cpp2py_export

    def optimize_bytes(data: bytes, passes: Sequence[str], fixed_point: bool) -> bytes:
        run = native.optimize_fixedpoint if fixed_point else native.optimize
        return bytes(run(data, list(passes)))

    return LoadedOptimizer(info=info, optimize=optimize, mutates_input=False, optimize_bytes=optimize_bytes)


OPTIMIZERS: dict[str, Callable[[], LoadedOptimizer]] = {"onnxoptimizer": _onnxoptimizer}


def _import_module(module_name: str) -> ModuleType:
    """A dotted module name, or a path to a .py file (so workers need no sys.path set-up)."""
    if not module_name.endswith(".py"):
        return importlib.import_module(module_name)
    path = Path(module_name).resolve()
    spec = importlib.util.spec_from_file_location(f"ditox_optimizer_{path.stem}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ImportError(f"no Python file at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _import_path(spec: str) -> LoadedOptimizer:
    module_name, _, attr = spec.rpartition(":")
    try:
        module = _import_module(module_name)
    except Exception as exc:
        raise OptimizerLoadError(
            f"cannot import optimizer module '{module_name}' from '{spec}': {type(exc).__name__}: {exc}"
        ) from None
    func = getattr(module, attr, None)
    if not callable(func):
        raise OptimizerLoadError(
            f"optimizer '{spec}': module '{module_name}' has no callable '{attr}'; "
            "expected a function optimize(model, passes, fixed_point) -> ModelProto"
        )
    fallback = _onnxoptimizer().info
    lists = {
        name: tuple(getattr(module, name)()) if callable(getattr(module, name, None)) else default
        for name, default in (
            ("get_available_passes", fallback.passes),
            ("get_fuse_and_elimination_passes", fallback.default_passes),
        )
    }
    info = OptimizerInfo(
        name=spec,
        version=_version_of(
            module,
            Path(module_name).stem if module_name.endswith(".py") else module_name.split(".")[0],
        ),
        passes=lists["get_available_passes"],
        default_passes=lists["get_fuse_and_elimination_passes"],
    )
    return LoadedOptimizer(info=info, optimize=func)


def _check_origin(spec: str, search_path: str) -> None:
    """The optimizer's package must come from `search_path`; a copy found further down sys.path
    would be another build, and comparing a build with itself hides every regression."""
    module_name = spec.rpartition(":")[0] or spec
    if module_name.endswith(".py"):  # loaded by its path, not through sys.path
        return
    package = module_name.split(".")[0]
    module = sys.modules.get(package)
    origin = Path(getattr(module, "__file__", None) or "").resolve()
    if not origin.is_relative_to(Path(search_path).resolve()):
        raise OptimizerLoadError(
            f"'{package}' was imported from {origin.parent}, not from {search_path}: "
            f"that build does not provide the module '{package}'"
        )


def load_optimizer(spec: str, search_path: str | None = None) -> LoadedOptimizer:
    """Load the optimizer named by `spec` from `search_path` (a folder put first on sys.path)."""
    if search_path and search_path not in sys.path:
        sys.path.insert(0, search_path)
    if spec in OPTIMIZERS:
        loaded = OPTIMIZERS[spec]()
    elif ":" in spec:
        loaded = _import_path(spec)
    else:
        known = ", ".join(sorted(OPTIMIZERS))
        raise OptimizerLoadError(
            f"unknown optimizer '{spec}': use one of {known} or an import path pkg.module:function"
        )
    if search_path:
        _check_origin(spec, search_path)
    return loaded
