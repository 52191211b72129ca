"""The optimize stage: adapters that turn an optimizer spec into `optimize(model, passes, fixed_point)`.

Built-in optimizers live in OPTIMIZERS: onnxoptimizer, and onnxsim, onnxscript and onnx-ir through
the adapter modules of `ditox_ci.optimizers.adapters` (each an optional extra). Any other spec is an
import path `pkg.module:function` (or `path/to/file.py:function`) whose function has the
onnxoptimizer shape. A module (built-in adapter or custom) may declare:

- `get_available_passes()` and `get_fuse_and_elimination_passes()`: its pass lists. Without them
  it is *opaque*: it runs only its default (called with OPAQUE_DEFAULT_PASSES) and the control
  (an empty list), and nothing is localized per pass. It never gets another optimizer's names.
- `PASS_ORDER_MATTERS = False`: the passes are a set (culprits are sets, repro text says "with").
- `FIXED_POINT`: how it honours `fixed_point`, in words, for the report.
- `normalize_output(model) -> model`: drops what it writes that is not the graph (stamped
  metadata), so an otherwise untouched model counts as unchanged.
- `DISTRIBUTIONS`: the pip distributions it imports, pinned in repro bundles.
- `NOISE_FLOOR = "reference"`: measure the original's noise against ONNX's reference runner, not
  ONNX Runtime with its own optimizations on (an adapter over ORT's optimizer must: see NOISE_FLOORS).
- `RUNTIME_LOADS_INPUT = True`: it loads its input in ONNX Runtime, so an original ONNX Runtime
  cannot load is one it cannot optimize either: a skip, never a finding of the optimizer's.
- `CANNOT_FIRE = {pass: why}`: passes it offers that change no valid model on this machine (a
  fusion registered for CUDA only, a pass that needs an option the adapter does not set), so a
  coverage that never sees them fire says why instead of counting them as missed.
Imports happen lazily so a worker can put a different optimizer installation first on sys.path.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import onnx

from ditox_ci.errors import OptimizerLoadError
from ditox_ci.log import quoted_output
from ditox_ci.registry import Registry
from ditox_ci.report.header import NOISE_FLOORS, OptimizerInfo

OptimizeFunc = Callable[[onnx.ModelProto, Sequence[str], bool], onnx.ModelProto]
OptimizeBytesFunc = Callable[[bytes, Sequence[str], bool], bytes]
NormalizeFunc = Callable[[onnx.ModelProto], onnx.ModelProto]

# the optimizer under test when none is named: the commands', the Action's and a baseline's
DEFAULT_OPTIMIZER = "onnxoptimizer"
# what an opaque optimizer's default configs hand it: "your own default", in one word
OPAQUE_DEFAULT_PASSES = ("default",)


@dataclass(frozen=True)
class LoadedOptimizer:
    info: OptimizerInfo
    optimize: OptimizeFunc = field(compare=False)
    # onnxoptimizer serializes its input, so it may share the caller's model; unknown callables get
    # a private copy because they may edit the model in place.
    mutates_input: bool = True
    # serialized model in, serialized model out: lets the engine see "unchanged" without parsing
    optimize_bytes: OptimizeBytesFunc | None = field(default=None, compare=False)
    # drops what the optimizer writes that is not the graph (stamped metadata)
    normalize: NormalizeFunc | None = field(default=None, compare=False)
    # the adapter's source file, copied into repro bundles so they run without ditox-ci, and the
    # module files it imports that must go beside it (its BUNDLED_WITH)
    adapter_file: str | None = None
    bundled_with: tuple[str, ...] = ()


def root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of `exc`'s chain: wrappers such as onnx-ir's PassError name the
    passes that ran before the failing one, so their text differs for one and the same bug."""
    seen = {id(exc)}
    while True:
        inner = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
        if inner is None or id(inner) in seen:
            return exc
        seen.add(id(inner))
        exc = inner


def optimizer_error(exc: BaseException) -> tuple[str, dict[str, str]]:
    """What the optimizer raised, keyed on its root cause: the message and its evidence (the
    outermost text too when a wrapper said something else)."""
    cause = root_cause(exc)
    message = f"{type(cause).__name__}: {cause}".strip()
    evidence = {"message": message}
    if cause is not exc:
        evidence["raised"] = f"{type(exc).__name__}: {exc}".strip()
    return message, evidence


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
        fixed_point="native: onnxoptimizer's optimize_fixedpoint",
        distributions=("onnxoptimizer",),
        sequential_passes=True,
    )
    native = module.onnx_opt_cpp2py_export

    def optimize_bytes(data: bytes, passes: Sequence[str], fixed_point: bool) -> bytes:
        run = native.optimize_fixedpoint if fixed_point else native.optimize
        return bytes(run(data, list(passes)))

    return LoadedOptimizer(info=info, optimize=optimize, mutates_input=False, optimize_bytes=optimize_bytes)


@dataclass(frozen=True)
class BuiltinAdapter:
    """A built-in optimizer other than onnxoptimizer: the adapter module and the extra to install."""

    name: str
    module: str
    imports: str
    extra: str
    # the extra's pin in pyproject.toml (the Action installs its exact lock, ci.action.adapter_lock)
    requirement: str

    def installed(self) -> bool:
        try:
            return importlib.util.find_spec(self.imports) is not None
        except (ImportError, ValueError):
            return False

    def load(self) -> LoadedOptimizer:
        try:
            module = importlib.import_module(self.module)
        except ImportError as exc:
            raise OptimizerLoadError(
                f"cannot import {self.name} ({exc}); pip install 'ditox-ci[{self.extra}]'"
            ) from None
        except Exception as exc:  # an installed release the adapter does not fit (a class it lacks …)
            raise OptimizerLoadError(
                f"the {self.name} adapter does not load with the installed {self.imports} "
                f"({type(exc).__name__}: {exc}); install the release ditox-ci's extra pins: "
                f"pip install 'ditox-ci[{self.extra}]'"
            ) from None
        return _from_module(module, self.name, module.optimize)


ADAPTERS = {
    adapter.name: adapter
    for adapter in (
        BuiltinAdapter(
            "onnxsim", "ditox_ci.optimizers.adapters.onnxsim_adapter", "onnxsim", "onnxsim", "onnxsim>=0.8.1"
        ),
        BuiltinAdapter(
            "onnxscript",
            "ditox_ci.optimizers.adapters.onnxscript_adapter",
            "onnxscript",
            "onnxscript",
            "onnxscript>=0.7.2",
        ),
        BuiltinAdapter(
            "onnx-ir", "ditox_ci.optimizers.adapters.onnx_ir_adapter", "onnx_ir", "onnx-ir", "onnx-ir>=1.1.0"
        ),
        # ONNX Runtime is a dependency: its extra installs nothing more
        BuiltinAdapter(
            "onnxruntime",
            "ditox_ci.optimizers.adapters.onnxruntime_adapter",
            "onnxruntime",
            "onnxruntime",
            "onnxruntime>=1.18",
        ),
        BuiltinAdapter(
            "onnxruntime-extended",
            "ditox_ci.optimizers.adapters.onnxruntime_extended_adapter",
            "onnxruntime",
            "onnxruntime",
            "onnxruntime>=1.18",
        ),
        BuiltinAdapter(
            "onnxslim",
            "ditox_ci.optimizers.adapters.onnxslim_adapter",
            "onnxslim",
            "onnxslim",
            "onnxslim>=0.1.98",
        ),
    )
}
OPTIMIZERS: Registry[Callable[[], LoadedOptimizer]] = Registry(
    "optimizer", error=OptimizerLoadError, otherwise="an import path pkg.module:function"
)
OPTIMIZERS["onnxoptimizer"] = _onnxoptimizer
OPTIMIZERS.update({name: adapter.load for name, adapter in ADAPTERS.items()})


def installed_optimizers() -> list[str]:
    """The built-in optimizers importable here (found without importing them)."""
    found = ["onnxoptimizer"] if importlib.util.find_spec("onnxoptimizer") is not None else []
    return found + [name for name, adapter in ADAPTERS.items() if adapter.installed()]


def optimizer_help() -> str:
    """The --optimizer help: every built-in, which of them are installed, and the import path form."""
    installed = installed_optimizers()
    missing = [
        f"{name} (pip install 'ditox-ci[{adapter.extra}]')"
        for name, adapter in ADAPTERS.items()
        if name not in installed
    ]
    return (
        f"{' | '.join(OPTIMIZERS)}; a build to install and sweep: a wheel (dist/x.whl), a source "
        "checkout (.) or a pip requirement (onnxoptimizer==0.4.1, git+https://…); or "
        "pkg.module:function / file.py:function shaped like "
        f"optimize(model, passes, fixed_point); installed here: "
        f"{', '.join(installed) or 'none'}" + (f"; not installed: {', '.join(missing)}" if missing else "")
    )


def _distributions(module: ModuleType, module_name: str) -> tuple[str, ...]:
    declared = getattr(module, "DISTRIBUTIONS", None)
    if declared:
        return tuple(declared)
    top = module_name.split(".")[0]
    return tuple(importlib.metadata.packages_distributions().get(top, ()))[:1]


_PASS_NAME = re.compile(r"\S{1,200}")


def _pass_names(name: str, function: str, call: Callable[[], Any]) -> tuple[str, ...]:
    """What an optimizer's pass-list function returns, as pass names; its failure is the
    optimizer's (exit 5), not ditox-ci's."""
    said = f"optimizer '{name}': {function}()"
    try:
        names = call()
    except Exception as exc:
        raise OptimizerLoadError(f"{said} raised {type(exc).__name__}: {exc}") from None
    if not isinstance(names, (list, tuple)) or not all(isinstance(item, str) for item in names):
        raise OptimizerLoadError(f"{said} must return a list of pass names, got {names!r:.200}")
    # as report.json's schema takes them (publish checks every report against it)
    odd = [item for item in names if not _PASS_NAME.fullmatch(item)]
    if odd:
        raise OptimizerLoadError(f"{said}: {odd[0]!r:.80} is no pass name (1-200 characters, no space)")
    return tuple(names)


def _cannot_fire(module: ModuleType, name: str, passes: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The module's CANNOT_FIRE for the passes it offers, in their order."""
    declared = getattr(module, "CANNOT_FIRE", {})
    if not isinstance(declared, dict) or not all(isinstance(v, str) for v in (*declared, *declared.values())):
        raise OptimizerLoadError(
            f"optimizer '{name}': CANNOT_FIRE must map pass names to why, got {declared!r:.200}"
        )
    return tuple((pass_name, declared[pass_name]) for pass_name in passes if pass_name in declared)


def _from_module(module: ModuleType, name: str, func: OptimizeFunc) -> LoadedOptimizer:
    """An optimizer from its adapter module's declarations (see the module docstring)."""
    available = getattr(module, "get_available_passes", None)
    default = getattr(module, "get_fuse_and_elimination_passes", None)
    opaque = not callable(available)
    # an opaque optimizer's default is its whole call
    passes: tuple[str, ...] = ()
    defaults: tuple[str, ...] = OPAQUE_DEFAULT_PASSES
    if callable(available):
        passes = defaults = _pass_names(name, "get_available_passes", available)
        if callable(default):
            defaults = _pass_names(name, "get_fuse_and_elimination_passes", default)
    distributions = _distributions(module, module.__name__)
    normalize = getattr(module, "normalize_output", None)
    source = getattr(module, "__file__", None)
    noise_floor = str(getattr(module, "NOISE_FLOOR", NOISE_FLOORS[0]))
    if noise_floor not in NOISE_FLOORS:
        raise OptimizerLoadError(
            f"optimizer '{name}': NOISE_FLOOR = '{noise_floor}' is none of {', '.join(NOISE_FLOORS)}"
        )
    info = OptimizerInfo(
        name=name,
        version=_version_of(module, distributions[0] if distributions else name),
        passes=passes,
        default_passes=defaults,
        order_matters=bool(getattr(module, "PASS_ORDER_MATTERS", True)),
        fixed_point=str(getattr(module, "FIXED_POINT", OptimizerInfo.fixed_point)),
        opaque=opaque,
        distributions=distributions,
        noise_floor=noise_floor,
        runtime_loads_input=bool(getattr(module, "RUNTIME_LOADS_INPUT", False)),
        cannot_fire=_cannot_fire(module, name, passes),
    )
    return LoadedOptimizer(
        info=info,
        optimize=func,
        normalize=normalize if callable(normalize) else None,
        # a package's __init__ does not stand alone; a module file does
        adapter_file=source if source and not source.endswith("__init__.py") else None,
        bundled_with=tuple(map(str, getattr(module, "BUNDLED_WITH", ()))),
    )


def _import_module(module_name: str) -> ModuleType:
    """A dotted module name, or a path to a .py file (so workers need no sys.path set-up)."""
    if not module_name.endswith(".py"):
        return importlib.import_module(module_name)
    path = Path(module_name).resolve()
    if path in _FILE_MODULES:  # executed once per process, like any imported module
        return _FILE_MODULES[path]
    spec = importlib.util.spec_from_file_location(f"ditox_optimizer_{path.stem}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ImportError(f"no Python file at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _FILE_MODULES[path] = module
    return module


_FILE_MODULES: dict[Path, ModuleType] = {}


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
    return _from_module(module, spec, func)


def _check_origin(spec: str, search_path: str) -> None:
    """The optimizer's package must come from `search_path`; a copy found further down sys.path
    would be another build, and comparing a build with itself hides every regression."""
    module_name = ADAPTERS[spec].imports if spec in ADAPTERS else spec.rpartition(":")[0] or spec
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
    if spec not in OPTIMIZERS and ":" not in spec:
        raise OPTIMIZERS.unknown(spec)
    # importing it runs the build under test's code, which may print anything: quoted, never raw
    with quoted_output(f"optimizer {spec}"):
        loaded = OPTIMIZERS[spec]() if spec in OPTIMIZERS else _import_path(spec)
    if search_path:
        _check_origin(spec, search_path)
    return loaded
