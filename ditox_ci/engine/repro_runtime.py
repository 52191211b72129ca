"""What a repro bundle's `repro.py` runs: ditox-ci's own code, copied into the bundle.

A bundle (`pinpoint/repro.py`) carries this module, `runner.py` and `interface.py` as the package
`ditox_repro/`, so `python repro.py` needs onnx, onnxruntime, numpy and the optimizer, never
ditox-ci, and runs the runner the sweep ran (ONNX Runtime with its own graph optimizations off, or
ONNX's reference implementation; element types numpy lacks fed and read as the sweep does). That
is why the imports of ours are relative: in the bundle the package has another name, and a package called
`ditox_ci` there would hide an installed ditox-ci from an optimizer module that imports it.

`repro.py` holds only the finding's values (a `Repro`) and calls `main`. Exit codes: 1 while the
bug is present (a hang included: the optimizer and ONNX Runtime on its result each get
`timeout_s`), 0 once it is fixed, 2 when this environment cannot tell (the optimizer does not
load, or the unoptimized model no longer gives expected.npz).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import importlib
import importlib.util
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes  # installed with onnx: bfloat16, float8, int4 ... which numpy lacks
import numpy as np
import onnx

from . import runner
from .interface import interface_change, rebound

BUG_PRESENT, FIXED, CANNOT_TELL = 1, 0, 2
# a noise limit is this many times the noise floor (the tensor oracle's NOISE_MARGIN, which a
# bundle cannot import: a unit test holds the two equal)
NOISE_MARGIN = 10.0
DTYPES_KEY = "__dtypes__"
# a sequence's elements and an absent optional value, which npz cannot hold as such: by key, the
# element entries of a sequence ([] for an empty one), or null for None
CONTAINERS_KEY = "__containers__"
ELEMENT_PREFIX = "__element__/"

Optimize = Callable[[onnx.ModelProto, list[str], bool], onnx.ModelProto]
# a value per name: a tensor, a sequence of tensors (a list), or None (an absent optional)
Sample = dict[str, Any]


@dataclass(frozen=True)
class Repro:
    """The finding's values, as `repro.py` spells them out."""

    passes: tuple[str, ...]
    fixed_point: bool
    optimizer: str
    rtol: float
    atol: float
    timeout_s: float
    # what judged the model: "onnxruntime", or "reference" for a model ONNX Runtime cannot run
    runner: str = "onnxruntime"
    # the finding is an invalid model, which the checker's full check (strict shape inference too)
    # shows: only then is the checker's verdict the bug
    full_check: bool = False
    # the finding's change is by design (a baseline entry accepts it) and the checker's refusal of
    # the result is the bug: nothing but the checker is judged
    only_the_checker: bool = False
    # per output name: the (rtol, atol) the sweep's oracle judged it with (by its dtype where no
    # tolerance was given); `rtol`/`atol` for an output not named
    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # per output name, per sample: the largest difference within those tolerances that the sweep's
    # calibrated oracle lets through (ten times the unoptimized model's own numerical noise there);
    # None, or an output not named: not calibrated
    noise_limits: Mapping[str, Sequence[float | None]] = field(default_factory=dict)
    # the outputs a random op draws anew on every run: only their kind, shape and dtype are judged
    drawn: Sequence[str] = ()
    # a missed optimization: per op type, how many of it the base build left; the bug is leaving
    # more (the result's values are not judged)
    missed: Mapping[str, int] = field(default_factory=dict)

    def judging(self, name: str, sample: int, calibrated: bool = True) -> Judging:
        """How output `name` of sample `sample` is judged (`calibrated`: with its noise limit)."""
        limits = self.noise_limits.get(name, ()) if calibrated else ()
        rtol, atol = self.tolerances.get(name, (self.rtol, self.atol))
        return Judging(rtol, atol, limits[sample] if sample < len(limits) else None, name not in self.drawn)


@dataclass(frozen=True)
class Judging:
    """One output's tolerances, its noise limit when calibrated, and whether its values count."""

    rtol: float
    atol: float
    noise_limit: float | None = None
    values: bool = True


def write_samples(path: Path, samples: Sequence[Mapping[str, Any]]) -> None:
    """One '<sample>/<name>' entry per tensor, so names with any characters survive. npz keeps the
    bytes of ml_dtypes' element types (bfloat16, float8, int4 ...) but not their names: those go
    into a `__dtypes__` entry, by key, and `read_samples` views the bytes as them again. A
    sequence (a list) and an absent optional (None) are said in a `__containers__` entry, the
    sequence's tensors stored apart: as one array, a list of equal shapes would come back a
    tensor, and a list of unequal ones would not be stored at all."""
    arrays: dict[str, np.ndarray] = {}
    containers: dict[str, list[str] | None] = {}
    for index, sample in enumerate(samples):
        for name, value in sample.items():
            key = f"{index}/{name}"
            if value is None:
                containers[key] = None
            elif isinstance(value, (list, tuple)):
                elements = [f"{ELEMENT_PREFIX}{len(arrays) + k}" for k in range(len(value))]
                arrays.update(zip(elements, map(np.asarray, value)))
                containers[key] = elements
            else:
                arrays[key] = np.asarray(value)
    exotic = {key: array.dtype.name for key, array in arrays.items() if runner.is_ml_dtype(array.dtype)}
    if exotic:
        arrays[DTYPES_KEY] = np.array(json.dumps(exotic))
    if containers:
        arrays[CONTAINERS_KEY] = np.array(json.dumps(containers))
    np.savez(path, **arrays)  # type: ignore[arg-type]


def read_samples(path: Path) -> list[Sample]:
    """One {name: array} per sample, in order, from a file `write_samples` wrote."""
    data = np.load(path)
    dtypes = json.loads(str(data[DTYPES_KEY])) if DTYPES_KEY in data.files else {}
    containers = json.loads(str(data[CONTAINERS_KEY])) if CONTAINERS_KEY in data.files else {}

    def array(key: str) -> np.ndarray:
        value = data[key]
        return value.view(getattr(ml_dtypes, dtypes[key])) if key in dtypes else value

    grouped: dict[int, Sample] = {}
    for key in [*data.files, *containers]:
        if key in (DTYPES_KEY, CONTAINERS_KEY) or key.startswith(ELEMENT_PREFIX):
            continue
        index, _, name = key.partition("/")
        value: Any = array(key) if key not in containers else containers[key]
        if isinstance(value, list):
            value = [array(element) for element in value]
        grouped.setdefault(int(index), {})[name] = value
    return [grouped[i] for i in sorted(grouped)]


def load_optimizer(spec: str, here: Path) -> Optimize:
    """`onnxoptimizer`, `pkg.module:function`, or `file.py:function` (a file in the bundle first:
    the adapter it carries)."""
    if spec == "onnxoptimizer":
        import onnxoptimizer

        return lambda model, passes, fixed_point: onnxoptimizer.optimize(model, passes, fixed_point)
    module, _, function = spec.rpartition(":")
    if module.endswith(".py"):
        path = here / module if (here / module).is_file() else Path(module)
        loader = importlib.util.spec_from_file_location("optimizer_under_test", path)
        if loader is None or loader.loader is None:
            raise ImportError(f"no module at {path}")
        loaded = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(loaded)
        optimize: Optimize = getattr(loaded, function)
        return optimize
    optimize = getattr(importlib.import_module(module), function)
    return optimize


def wide(array: Any) -> np.ndarray:
    """float64 for comparing; ml_dtypes' types have no arithmetic of numpy's own."""
    array = np.asarray(array)
    return array.astype(np.float64) if runner.is_ml_dtype(array.dtype) else array


def close(got: Any, want: np.ndarray, judging: Judging) -> bool:
    return bool(np.allclose(wide(got), wide(want), rtol=judging.rtol, atol=judging.atol, equal_nan=True))


@contextlib.contextmanager
def watchdog(timeout_s: float) -> Iterator[None]:
    """Exit 1 (with a 'Timeout' traceback on stderr) if the block hangs: the bug may be a hang,
    and native code that hangs holding the GIL stops Python-level timers but not this one."""
    sys.stdout.flush()  # the watchdog's exit skips Python's buffers
    # the process's stderr, fd 2: a test may have swapped sys.stderr for an object without one
    faulthandler.dump_traceback_later(timeout_s, exit=True, file=2)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def _bug(message: str) -> int:
    print(f"BUG PRESENT: {message}")
    return BUG_PRESENT


def _kind(value: Any) -> str:
    if value is None:
        return "no value"
    if isinstance(value, list):
        return f"a sequence of {len(value)}"
    array = np.asarray(value)
    return f"{array.dtype}{list(array.shape)}"


def _differs(got: Any, want: Any, judging: Judging) -> str:
    """How `got` differs from `want` (a tensor, a sequence of tensors, or None) beyond the
    tolerances, or beyond the noise limit within them; "" when it does not."""
    if got is None or want is None or isinstance(got, list) or isinstance(want, list):
        if type(got) is not type(want) or (isinstance(want, list) and len(got) != len(want)):
            return f"{_kind(got)} instead of {_kind(want)}"
        for k, (element, wanted) in enumerate(zip(got, want) if isinstance(want, list) else ()):
            difference = _differs(element, wanted, judging)
            if difference:
                return f"element {k}: {difference}"
        return ""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{_kind(got)} instead of {_kind(want)}"
    if not judging.values:
        return ""
    if want.dtype.kind not in "fc" and "float" not in want.dtype.name:  # integers, bools: exact
        differing = int(np.count_nonzero(got != want))
        return f"{differing} of {want.size} elements differ" if differing else ""
    if not close(got, want, judging):
        worst = np.nanmax(np.abs(wide(got).astype(np.float64) - wide(want).astype(np.float64)))
        return f"max abs difference {worst:.6g} beyond rtol={judging.rtol} atol={judging.atol}"
    if judging.noise_limit is None or want.size == 0:
        return ""
    a, b = wide(want).astype(np.float64), wide(got).astype(np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    worst = float(np.abs(a[both] - b[both]).max()) if both.any() else 0.0
    if worst <= judging.noise_limit:
        return ""
    return (
        f"max abs difference {worst:.6g}, within rtol={judging.rtol} atol={judging.atol} but "
        f"{worst / judging.noise_limit * NOISE_MARGIN:.0f} times the unoptimized model's own numerical "
        f"noise, where the sweep lets through {NOISE_MARGIN:.0f} times it ({judging.noise_limit:.6g})"
    )


def _original_here(
    model: onnx.ModelProto, repro: Repro, inputs: list[Sample], expected: list[Sample]
) -> tuple[list[Sample], str]:
    """What the unoptimized model gives here, per sample by output name, and "" when that is
    expected.npz within the tolerances (else why this environment cannot tell). The optimized
    model is judged against it, as the sweep judged it against the original's run beside it: a
    runtime that rounds otherwise moves both alike."""
    names = [output.name for output in model.graph.output]
    try:
        outputs = runner.run_all(runner.load_session(model.SerializeToString(), runner=repro.runner), inputs)
    except (runner.RuntimeLoadError, runner.RuntimeRunError) as exc:
        return [], f"the unoptimized model does not run here ({exc})"
    here = [dict(zip(names, sample)) for sample in outputs]
    for index, (sample, want) in enumerate(zip(here, expected)):
        for name, got in sample.items():
            if _differs(got, want[name], repro.judging(name, index, calibrated=False)):
                return here, f"the unoptimized model no longer gives expected.npz ({name})"
    return here, ""


def _judge(
    model: onnx.ModelProto,
    optimized: onnx.ModelProto,
    repro: Repro,
    inputs: list[Sample],
    expected: list[Sample],
) -> int:
    """The optimized model against what the unoptimized one gave here (`expected`), as the sweep
    judged it: the checker's verdict is the finding's only when that is the finding (`full_check`:
    an invalid model; the sweep holds it back behind every other failure, and a result the nop
    control makes invalid too is not this finding's), then the interface, then the outputs."""
    if repro.full_check or repro.only_the_checker:
        with watchdog(repro.timeout_s):
            try:
                onnx.checker.check_model(optimized, full_check=True)
            except Exception as exc:
                return _bug(f"the optimized model is invalid: {exc}")
    if repro.only_the_checker:
        print(
            "OK: ONNX's checker accepts the optimized model (its other change is by design); "
            "the bug is fixed"
        )
        return FIXED
    names = [output.name for output in model.graph.output]
    # inputs and outputs are matched by position: a pass may rename them by design
    change = interface_change(model, optimized)
    if change is not None:
        return _bug(f"the interface changed: {change}")
    fed = rebound(inputs, model, optimized)
    with watchdog(repro.timeout_s):
        try:
            candidate = runner.load_session(optimized.SerializeToString(), runner=repro.runner)
            outputs_per_sample = runner.run_all(candidate, fed)
        except runner.RuntimeLoadError as exc:
            return _bug(f"ONNX Runtime cannot load the optimized model: {exc}")
        except runner.RuntimeRunError as exc:
            return _bug(f"ONNX Runtime fails on the optimized model: {exc}")
    for index, (outputs, want) in enumerate(zip(outputs_per_sample, expected)):
        for name, got in zip(names, outputs):
            difference = _differs(got, want[name], repro.judging(name, index))
            if difference:
                return _bug(f"sample {index}, output {name}: {difference}")
    print("OK: the optimized model gives what the unoptimized one gives (expected.npz); the bug is fixed")
    return FIXED


def _op_counts(graph: onnx.GraphProto, counts: dict[str, int]) -> dict[str, int]:
    """Each op type's nodes in `graph` and its subgraphs (`domain::Op` outside the default domain)."""
    for node in graph.node:
        name = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
        counts[name] = counts.get(name, 0) + 1
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                _op_counts(sub, counts)
    return counts


def _missed(optimized: onnx.ModelProto, repro: Repro) -> int:
    """A missed optimization is present while the result leaves more of an op type than the base
    build did."""
    left = _op_counts(optimized.graph, {})
    kept = {op: left.get(op, 0) for op, base in repro.missed.items() if left.get(op, 0) > base}
    if kept:
        said = ", ".join(
            f"{op} ×{n} (the base build left {repro.missed[op]})" for op, n in sorted(kept.items())
        )
        return _bug(f"the optimizer leaves {said}: it no longer rewrites what the base build did")
    print("OK: the optimizer rewrites what the base build did; the missed optimization is fixed")
    return FIXED


def check(repro: Repro, here: Path, optimizer_spec: str) -> int:
    """Optimize `here`/model.onnx as the finding did, run it and compare with expected.npz."""
    model = onnx.load(str(here / "model.onnx"))
    inputs = read_samples(here / "inputs.npz")
    expected, why_not = _original_here(model, repro, inputs, read_samples(here / "expected.npz"))
    if why_not:
        print(f"cannot tell: {why_not}")
        return CANNOT_TELL
    print(f"optimizer {optimizer_spec}, passes {list(repro.passes)}, fixed_point={repro.fixed_point}")
    try:
        optimizer = load_optimizer(optimizer_spec, here)
    except Exception as exc:  # whatever the optimizer's import raises, this environment cannot tell
        print(f"cannot tell: the optimizer {optimizer_spec} does not load ({type(exc).__name__}: {exc})")
        return CANNOT_TELL
    with watchdog(repro.timeout_s):
        try:
            optimized = optimizer(model, list(repro.passes), repro.fixed_point)
        except Exception as exc:
            return _bug(f"the optimizer raised {type(exc).__name__}: {exc}")
    if repro.missed:
        return _missed(optimized, repro)
    return _judge(model, optimized, repro, inputs, expected)


def main(repro: Repro, here: Path, doc: str | None, argv: Sequence[str] | None = None) -> int:
    """`repro.py`'s command line: `--optimizer` runs another build or function on the finding."""
    parser = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    parser.add_argument("--optimizer", default=repro.optimizer, help="onnxoptimizer or pkg.module:function")
    args = parser.parse_args(argv)
    return check(repro, here, args.optimizer)
