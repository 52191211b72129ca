"""The standalone repro of a reduced finding (see `ditox_ci.report.standalone`), checked once.

The model's values get short canonical names first (`ditox_ci.report.canonical`): the issue's
text, script, diagram and upstream test all read `X0`, `C0`, `Y0`. The script is run the way a
reader of the issue would run it, in a child process (it runs the optimizer, which may crash or
hang): whether it prints BUG PRESENT is recorded, and the same child prints the graph after the
culprit passes for the before/after diagram and what each output became (`outcome`: dtype and
shape before and after, and whether the values agree) for the issue's first sentence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ditox_ci.compare.calibration import floating
from ditox_ci.compare.tensor import Tolerances
from ditox_ci.pinpoint.repro import AS_INSTALLED, BuildUnderTest, installed_version
from ditox_ci.report.canonical import canonical
from ditox_ci.report.kinds import FindingKind
from ditox_ci.report.model import Finding
from ditox_ci.report.standalone import MODEL_TEXT_LIMIT, STANDALONE_OPTIMIZER, script, standalone_record

SCRIPT_NAME = "standalone.py"
_OPTIMIZED_MARK = "--- ditox-ci: optimized model ---"
_OUTCOME_MARK = "--- ditox-ci: outcome ---"
# runs the script's own functions, as `python standalone.py` would, then prints the optimized graph
# and, per output, its dtype[shape] before and after and whether the values agree
_CHECK = f"""
import json, runpy, sys
import numpy as np
import onnx.printer
namespace = runpy.run_path(sys.argv[1], run_name="ditox_standalone")
code = namespace["main"]()
print({_OPTIMIZED_MARK!r})
try:
    model, feeds = namespace["build_model"](), namespace["make_feeds"]()
    optimized = namespace["optimize"](model)
    print(onnx.printer.to_text(optimized))
    expected, got = namespace["run"](model, feeds), namespace["run"](optimized, feeds)
    rtol, atol = namespace["RTOL"], namespace["ATOL"]
    outcome = []
    for value, want, have in zip(model.graph.output, expected, got):
        want, have = np.asarray(want), np.asarray(have)
        same = want.shape == have.shape and want.dtype == have.dtype and bool(
            np.allclose(have, want, rtol=rtol, atol=atol, equal_nan=True)
        )
        outcome.append(dict(
            output=value.name, same=same,
            expected=[str(want.dtype), list(want.shape)], actual=[str(have.dtype), list(have.shape)],
        ))
    print({_OUTCOME_MARK!r})
    print(json.dumps(outcome))
except Exception:
    pass
sys.exit(code)
"""


def _with_build(env: Mapping[str, str], build_path: str | None) -> dict[str, str]:
    """`env` with the build's folder first on PYTHONPATH, as a worker puts it first on sys.path."""
    if build_path is None:
        return dict(env)
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [build_path, env.get("PYTHONPATH")]))}


def _versions(build_path: str | None) -> dict[str, str]:
    versions = {}
    for name in ("onnx", "onnxruntime", STANDALONE_OPTIMIZER):
        version = installed_version(name, build_path if name == STANDALONE_OPTIMIZER else None)
        if version:
            versions[name] = version
    return versions


def one_tolerance(model: onnx.ModelProto, tolerances: Tolerances) -> tuple[float, float]:
    """The (rtol, atol) the script compares every output with: each float output's as the sweep's
    oracle judges it (by its element type where none was given), the loosest where they differ
    (an integer output compares exactly under any tolerance np.allclose takes)."""
    pairs = []
    for value in model.graph.output:
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))
        except KeyError:  # not a tensor, or no element type declared
            continue
        if floating(dtype):
            pairs.append(tolerances.of_dtype(dtype))
    if not pairs:
        return tolerances.scalar()
    return max(rtol for rtol, _ in pairs), max(atol for _, atol in pairs)


def checked_standalone(
    finding: Finding,
    model: onnx.ModelProto,
    feeds: Sequence[Mapping[str, np.ndarray]],
    passes: Sequence[str],
    fixed_point: bool,
    optimizer_spec: str,
    tolerances: Tolerances,
    bundle: Path,
    timeout_s: float,
    build: BuildUnderTest = AS_INSTALLED,
    only_the_checker: bool = False,
) -> dict[str, Any] | None:
    """The standalone record of `finding` (reduced `model`, the sample of `feeds` it failed on), with
    `reproduces` and `optimized` filled by running the script with the build the sweep's workers
    loaded (`build.path` first on its path, as theirs; `build`, in the record, when that build
    is not a release the script's pip line could name); also written to the bundle."""
    if optimizer_spec != STANDALONE_OPTIMIZER or not feeds:
        return None
    # the sample the finding was seen on (a wide-range sample may show what the first does not)
    sample = finding.measured.get("sample", 0)
    feed = feeds[sample] if isinstance(sample, int) and 0 <= sample < len(feeds) else feeds[0]
    model, feed, renamed = canonical(model, feed)
    rtol, atol = one_tolerance(model, tolerances)
    record = standalone_record(model, feed, list(passes), fixed_point, rtol, atol, _versions(build.path))
    if record is None:
        return None
    # names the bundle's model does not use (its reduction kept the original ones): the issue maps them
    names = {new: old for old, new in renamed.items() if old != new}
    if names:
        record["names"] = names
    if build.unreleased:
        record["build"] = build.unreleased
    if only_the_checker:  # the change is by design; the checker refusing the result is the bug
        record["only_the_checker"] = True
    path = bundle / SCRIPT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script(record, finding), encoding="utf-8")
    try:
        done = subprocess.run(
            # by its name in its own folder, as a reader of the issue runs it
            [sys.executable, "-c", _CHECK, SCRIPT_NAME],
            # what the optimizer prints natively need not be UTF-8: it must not cost the finding
            capture_output=True,
            text=True,
            errors="replace",
            timeout=max(1.0, timeout_s),
            cwd=bundle,
            env=_with_build(os.environ, build.path),
        )
    except subprocess.TimeoutExpired:
        return {**record, "reproduces": None}
    said, _, optimized = done.stdout.partition(_OPTIMIZED_MARK)
    optimized, _, outcome = optimized.partition(_OUTCOME_MARK)
    # a crash kills the interpreter before it can say anything: death by a signal is the bug
    crashed = FindingKind.named(finding.kind).crashes_process and done.returncode < 0
    record["reproduces"] = crashed or (done.returncode == 1 and "BUG PRESENT" in said)
    optimized = optimized.strip()
    if optimized and len(optimized) <= MODEL_TEXT_LIMIT:
        record["optimized"] = optimized
    try:
        record["outcome"] = json.loads(outcome) if outcome.strip() else []
    except ValueError:  # the optimizer wrote to stdout too: the outcome is only missing
        record["outcome"] = []
    return record
