"""Repro bundles: everything an upstream maintainer needs to see a finding with one command.

`repro/<fingerprint>/` holds the reduced `model.onnx` (and `original.onnx`), `inputs.npz`,
`expected.npz`, `requirements.txt` with the exact versions seen, a standalone `repro.py` (exits 1
while the bug is present, a hang included, and dies by the signal of a crash; 0 once fixed) and a
`README.md` written like a good bug report; `finding.json` says the finding and the optimizer call
that shows it, for `ditox-ci bisect`.
`repro.py` only spells out the finding's values: what it runs is ditox-ci's own runtime
(`engine/repro_runtime.py` and the `engine/runner.py` and `engine/interface.py` it uses), copied
beside it as `ditox_repro/`.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ditox_ci.compare.calibration import floating, noise_limit
from ditox_ci.compare.tensor import dtype_of
from ditox_ci.engine import interface, repro_runtime, runner
from ditox_ci.engine.divergence import Divergence
from ditox_ci.engine.noise import PlainRun
from ditox_ci.engine.original import EvalSettings, original_noise
from ditox_ci.engine.plan import Step
from ditox_ci.engine.repro_runtime import write_samples
from ditox_ci.engine.values import Feeds
from ditox_ci.errors import OptimizerLoadError
from ditox_ci.optimizers import LoadedOptimizer, load_optimizer
from ditox_ci.optimizers.install import Installation
from ditox_ci.optimizers.spec import parse_spec
from ditox_ci.report.model import Finding
from ditox_ci.report.templates import render

BASE_REQUIREMENTS = ("onnx", "onnxruntime", "numpy")
GRAPH_TEXT_LIMIT = 6000
EVIDENCE_NUMBERS = ("output", "sample", "max_abs", "max_rel", "signal")


ADAPTER_FILE = "optimizer_adapter.py"
BUNDLE_RECORD = "finding.json"
# the package repro.py imports: ditox-ci's runtime under a name of its own (repro_runtime.py says why)
RUNTIME_PACKAGE = "ditox_repro"
RUNTIME_MODULES = (runner, interface, repro_runtime)


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


@dataclass(frozen=True)
class BuildUnderTest:
    """Where the sweep's workers loaded the optimizer from, when ditox-ci installed it: `path`, the
    folder first on their sys.path; `unreleased`, the --optimizer it came from when that is a
    wheel, a checkout or a URL (a build, not the release of its version, which a reader must
    install instead of the pin)."""

    path: str | None = None
    unreleased: str = ""


# the optimizer as this environment has it installed
AS_INSTALLED = BuildUnderTest()


def build_under_test(installation: Installation) -> BuildUnderTest:
    unreleased = installation.path is not None and not parse_spec(installation.spec).a_release
    return BuildUnderTest(installation.path, installation.spec if unreleased else "")


def requirements(
    optimizer_spec: str, loaded: LoadedOptimizer | None = None, build: BuildUnderTest = AS_INSTALLED
) -> str:
    """Pinned lines for the runtime stack and every distribution the optimizer imports, as
    installed for the sweep (`loaded`: the optimizer, when the caller has loaded it already); the
    optimizer of an unreleased build as a comment that says to install that build."""
    lines = []
    optimizer = _distributions(optimizer_spec, loaded or _loaded(optimizer_spec))
    for name in dict.fromkeys((*BASE_REQUIREMENTS, *optimizer)):
        version = installed_version(name, build.path if name in optimizer else None)
        if not version:
            lines.append(f"# {name}: not installed as a distribution")
        elif name in optimizer and build.unreleased:
            lines.append(
                f"# {name} {version}: the build this run swept ({build.unreleased}), not a release: "
                "install that build, not the release of its version"
            )
        else:
            lines.append(f"{name}=={version}")
    if not optimizer:
        lines.append(f"# optimizer {optimizer_spec}: not an installed distribution, bring it along")
    return "\n".join(lines) + "\n"


def installed_version(distribution: str, path: str | None = None) -> str:
    """The version installed in folder `path` (a build ditox-ci installed), else in this
    environment; "" where a custom adapter declares a distribution that is not installed (it may
    import its optimizer from a checkout)."""
    if path is not None:
        found = next(iter(importlib.metadata.distributions(name=distribution, path=[path])), None)
        if found is not None:
            return found.version
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
    for module in loaded.bundled_with:  # what the adapter imports, beside it as it imports it
        shutil.copyfile(module, bundle / Path(module).name)
    return f"{ADAPTER_FILE}:{function}"


@dataclass(frozen=True)
class JudgedAs:
    """How the sweep's oracle judges each output of a bundle's model, for repro.py to judge it the
    same way (`repro_runtime.Repro`): its tolerances, its noise limit per sample when the oracle
    is calibrated, and the outputs a random op draws (only their shape and dtype count)."""

    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    noise_limits: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)
    drawn: tuple[str, ...] = ()


def judged_as_the_sweep(model: onnx.ModelProto, plain: PlainRun, settings: EvalSettings) -> JudgedAs:
    """Each output's tolerances (by the expected value's dtype where none was given) and, when
    `settings` calibrate, its noise limits, measured on `model` run plainly (`plain`) as a
    worker's `prepare` measures them."""
    noise, _ = original_noise(model, plain, settings)
    tolerances: dict[str, tuple[float, float]] = {}
    limits: dict[str, tuple[float | None, ...]] = {}
    drawn = []
    for position, value in enumerate(model.graph.output):
        values = [sample[position] for sample in plain.outputs]
        # its dtype: the first sample's that has one (a sample's value may be None or [])
        dtype = next((d for d in map(dtype_of, values) if d is not None), None)
        if floating(dtype):  # others compare exactly
            tolerances[value.name] = settings.tolerances.of_dtype(dtype)
        noises = [row[position] if position < len(row) else None for row in noise]
        if any(level == math.inf for level in noises):
            drawn.append(value.name)
            continue
        atol = settings.tolerances.of_dtype(dtype, widened=False)[1]  # as noise_check takes it
        per_sample = tuple(noise_limit(v, level, atol) for v, level in zip(values, noises))
        if any(limit is not None for limit in per_sample):
            limits[value.name] = per_sample
    return JudgedAs(tolerances, limits, tuple(drawn))


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
    build: BuildUnderTest = AS_INSTALLED,
    judged: JudgedAs | None = None,
    only_the_checker: bool = False,
    missed: Mapping[str, int] | None = None,
) -> Path:
    """Write `directory/<fingerprint>/` and return it (replacing an older bundle of that finding).

    `model` is the reduced model, `feeds` its inputs per sample, `expected` the unoptimized
    model's outputs per sample by output name; `rtol`/`atol` compare an output `judged` does not
    name (`judged_as_the_sweep`: each output's tolerances and noise limits); `timeout_s` is how
    long repro.py lets the optimizer (and ONNX Runtime on its result) run before it calls a hang
    the bug; `names` maps the names the finding's message uses to the short ones reduction gave
    `model` (README lists them); `only_the_checker`: the finding's change is by design and the
    checker refusing its result is the bug (repro.py judges that alone); `missed`: a missed
    optimization's op types, each with how many the base build left (repro.py counts them alone)."""
    bundle = directory / finding.fingerprint
    if bundle.exists():
        shutil.rmtree(bundle)
    bundle.mkdir(parents=True)
    onnx.save(model, str(bundle / "model.onnx"))
    onnx.save(original_model, str(bundle / "original.onnx"))
    write_samples(bundle / "inputs.npz", feeds)
    write_samples(bundle / "expected.npz", expected)
    copy_runtime(bundle)
    # what `ditox-ci bisect` judges the bundle with: the finding, and the optimizer call that shows it
    bisect_record = {"finding": finding.to_json(), "passes": list(passes), "fixed_point": fixed_point}
    (bundle / BUNDLE_RECORD).write_text(json.dumps(bisect_record, indent=1), encoding="utf-8")
    # loaded once: each load imports the optimizer's module under quoted output
    loaded = _loaded(optimizer_spec)
    (bundle / "requirements.txt").write_text(requirements(optimizer_spec, loaded, build))
    optimizer = _distributions(optimizer_spec, loaded)
    context: dict[str, Any] = {
        "finding": finding,
        "passes": list(passes),
        "fixed_point": fixed_point,
        "optimizer_spec": bundled_spec(bundle, optimizer_spec, loaded),
        "optimizer_name": optimizer_spec,
        "passes_ordered": loaded is None or loaded.info.order_matters,
        "optimizer_version": installed_version(optimizer[0], build.path) if optimizer else "",
        "unreleased": build.unreleased,
        "rtol": rtol,
        "atol": atol,
        "judged": judged or JudgedAs(),
        "only_the_checker": only_the_checker,
        "missed": dict(missed or {}),
        "timeout_s": timeout_s,
        "runner": runner,
    }
    (bundle / "repro.py").write_text(render("repro.py.j2", **context), encoding="utf-8")
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
        ),
        encoding="utf-8",
    )
    return bundle


def write_repro(
    out_dir: Path,
    finding: Finding,
    reduced: onnx.ModelProto,
    original: onnx.ModelProto,
    feeds: Feeds,
    step: Step,
    optimizer_spec: str,
    settings: EvalSettings,
    timeout_s: float,
    divergence: Divergence | None = None,
    runner_name: str = "onnxruntime",
    names: Mapping[str, str] | None = None,
    build: BuildUnderTest = AS_INSTALLED,
    only_the_checker: bool = False,
    missed: Mapping[str, int] | None = None,
) -> Path:
    """The bundle of `finding` under `out_dir`, with the reduced model's expected outputs and each
    output judged as the sweep's oracle (`settings`) judges it (`names`: the original's names of
    its values, when reduction renamed them; `build`: where the workers loaded the optimizer from).

    Runs `runner_name` (the runner that judged the model), and ONNX Runtime with its own
    optimizations for the noise limits, in the calling process: only call it on a model a worker
    already ran (the original of a sweep, or a candidate a worker judged as still failing).
    """
    data = reduced.SerializeToString()
    outputs = runner.run_all(runner.load_session(data, settings.threads, runner_name), feeds)
    output_names = [v.name for v in reduced.graph.output]
    rtol, atol = settings.tolerances.scalar()
    return write_bundle(
        out_dir,
        finding=finding,
        model=reduced,
        original_model=original,
        feeds=feeds,
        expected=[dict(zip(output_names, sample, strict=True)) for sample in outputs],
        optimizer_spec=optimizer_spec,
        passes=step.passes,
        fixed_point=step.fixed_point,
        rtol=rtol,
        atol=atol,
        divergence=divergence,
        timeout_s=timeout_s,
        runner=runner_name,
        names=names or {},
        build=build,
        judged=judged_as_the_sweep(
            reduced, PlainRun(data, feeds, outputs, settings.threads, runner_name), settings
        ),
        only_the_checker=only_the_checker,
        missed=missed,
    )
