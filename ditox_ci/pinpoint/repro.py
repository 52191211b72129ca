"""Repro bundles: everything an upstream maintainer needs to see a finding with one command.

`repro/<fingerprint>/` holds the reduced `model.onnx` (and `original.onnx`), `inputs.npz`,
`expected.npz`, `requirements.txt` with the exact versions seen, a standalone `repro.py` (exits 1
while the bug is present, a hang included, 0 once fixed) and a `README.md` written like a good bug report.
`repro.py` only spells out the finding's values: what it runs is ditox-ci's own runtime
(`engine/repro_runtime.py` and the `engine/runner.py` it uses), copied beside it as `ditox_repro/`.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ditox_ci.engine import repro_runtime, runner
from ditox_ci.engine.divergence import Divergence
from ditox_ci.engine.repro_runtime import write_samples
from ditox_ci.errors import OptimizerLoadError
from ditox_ci.optimizers import LoadedOptimizer, load_optimizer
from ditox_ci.report.model import Finding
from ditox_ci.report.templates import render

BASE_REQUIREMENTS = ("onnx", "onnxruntime", "numpy")
GRAPH_TEXT_LIMIT = 6000
EVIDENCE_NUMBERS = ("output", "sample", "max_abs", "max_rel", "signal")


ADAPTER_FILE = "optimizer_adapter.py"
# the package repro.py imports: ditox-ci's runtime under a name of its own (repro_runtime.py says why)
RUNTIME_PACKAGE = "ditox_repro"
RUNTIME_MODULES = (runner, repro_runtime)


def copy_runtime(bundle: Path) -> None:
    """Put the modules repro.py runs into `bundle`/ditox_repro/, as they are in this ditox-ci."""
    package = bundle / RUNTIME_PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text('"""ditox-ci\'s runtime, copied here for repro.py."""\n')
    for module in RUNTIME_MODULES:
        source = Path(str(module.__file__))
        shutil.copyfile(source, package / source.name)


def _loaded(optimizer_spec: str) -> LoadedOptimizer | None:
    try:
        return load_optimizer(optimizer_spec)
    except OptimizerLoadError:
        return None


def _distributions(optimizer_spec: str, loaded: LoadedOptimizer | None) -> tuple[str, ...]:
    """The distributions the optimizer imports: its declared ones, else its top package's."""
    if loaded is not None and loaded.info.distributions:
        return loaded.info.distributions
    module = optimizer_spec.partition(":")[0].split(".")[0]
    return tuple(importlib.metadata.packages_distributions().get(module, ()))[:1]


def requirements(optimizer_spec: str, loaded: LoadedOptimizer | None = None) -> str:
    """Pinned lines for the runtime stack and every distribution the optimizer imports, as
    installed right now (`loaded`: the optimizer, when the caller has loaded it already)."""
    lines = []
    optimizer = _distributions(optimizer_spec, loaded or _loaded(optimizer_spec))
    for name in dict.fromkeys((*BASE_REQUIREMENTS, *optimizer)):
        version = _installed_version(name)
        lines.append(f"{name}=={version}" if version else f"# {name}: not installed as a distribution")
    if not optimizer:
        lines.append(f"# optimizer {optimizer_spec}: not an installed distribution, bring it along")
    return "\n".join(lines) + "\n"


def _installed_version(distribution: str) -> str:
    """The installed version, or "" where a custom adapter declares a distribution that is not
    installed (it may import its optimizer from a checkout)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""


def bundled_spec(bundle: Path, optimizer_spec: str, loaded: LoadedOptimizer | None) -> str:
    """Copy the optimizer's adapter module (a built-in's, or a custom file or module) into the
    bundle and return the spec that loads it from there; onnxoptimizer itself needs no adapter."""
    if loaded is None or loaded.adapter_file is None:
        return optimizer_spec
    function = optimizer_spec.rpartition(":")[2] if ":" in optimizer_spec else "optimize"
    shutil.copyfile(loaded.adapter_file, bundle / ADAPTER_FILE)
    return f"{ADAPTER_FILE}:{function}"


def _graph_text(model: onnx.ModelProto) -> str:
    try:
        text = onnx.printer.to_text(model.graph)
    except Exception:  # the printer rejects some valid graphs; the op list still informs
        text = "\n".join(
            f"{n.op_type}({', '.join(n.input)}) -> {', '.join(n.output)}" for n in model.graph.node
        )
    return text if len(text) <= GRAPH_TEXT_LIMIT else text[:GRAPH_TEXT_LIMIT] + "\n…"


def write_bundle(
    directory: Path,
    *,
    finding: Finding,
    model: onnx.ModelProto,
    original_model: onnx.ModelProto,
    feeds: Sequence[Mapping[str, np.ndarray]],
    expected: Sequence[Mapping[str, np.ndarray]],
    optimizer_spec: str,
    passes: Sequence[str],
    fixed_point: bool,
    rtol: float,
    atol: float,
    divergence: Divergence | None = None,
    timeout_s: float = 60.0,
    runner: str = "onnxruntime",
    names: Mapping[str, str] | None = None,
) -> Path:
    """Write `directory/<fingerprint>/` and return it (replacing an older bundle of that finding).

    `model` is the reduced model, `feeds` its inputs per sample, `expected` the unoptimized
    model's outputs per sample by output name; `timeout_s` is how long repro.py lets the optimizer
    (and ONNX Runtime on its result) run before it calls a hang the bug; `names` maps the names
    the finding's message uses to the short ones reduction gave `model` (README lists them)."""
    bundle = directory / finding.fingerprint
    if bundle.exists():
        shutil.rmtree(bundle)
    bundle.mkdir(parents=True)
    onnx.save(model, str(bundle / "model.onnx"))
    onnx.save(original_model, str(bundle / "original.onnx"))
    write_samples(bundle / "inputs.npz", feeds)
    write_samples(bundle / "expected.npz", expected)
    copy_runtime(bundle)
    # loaded once: each load imports the optimizer's module under quoted output
    loaded = _loaded(optimizer_spec)
    (bundle / "requirements.txt").write_text(requirements(optimizer_spec, loaded))
    optimizer = _distributions(optimizer_spec, loaded)
    context: dict[str, Any] = {
        "finding": finding,
        "passes": list(passes),
        "fixed_point": fixed_point,
        "optimizer_spec": bundled_spec(bundle, optimizer_spec, loaded),
        "optimizer_name": optimizer_spec,
        "passes_ordered": loaded is None or loaded.info.order_matters,
        "optimizer_version": _installed_version(optimizer[0]) if optimizer else "",
        "rtol": rtol,
        "atol": atol,
        "timeout_s": timeout_s,
        "runner": runner,
    }
    (bundle / "repro.py").write_text(render("repro.py.j2", **context))
    culprit = finding.culprit
    (bundle / "README.md").write_text(
        render(
            "repro_README.md.j2",
            **context,
            culprit_text=", ".join(culprit.passes)
            or ("the optimizer's shared code" if culprit.scope == "shared" else f"{culprit.scope} fault"),
            message=finding.message,
            numbers=[(k, finding.measured[k]) for k in EVIDENCE_NUMBERS if k in finding.measured],
            divergence=divergence,
            nodes_before=len(original_model.graph.node),
            nodes_after=len(model.graph.node),
            graph_text=_graph_text(model),
            renamed=[(new, old) for old, new in (names or {}).items()],
        )
    )
    return bundle
