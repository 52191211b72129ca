"""Every bundle's repro.py fails (exit 1) against the planted faulty optimizer and passes (exit 0)
against the real onnxoptimizer; `ditox-ci reduce` writes such a bundle end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import localize_planted as planted
import ml_dtypes
import numpy as np
import onnx
import onnxruntime
import pytest
from wheels import MISCOMPILED_PASS, miscompiling_onnxoptimizer

from ditox_ci import PROJECT_URL
from ditox_ci.corpus.inputs import write_recorded_inputs
from ditox_ci.engine import runner
from ditox_ci.engine.divergence import first_divergence
from ditox_ci.engine.outcome import Outcome, failure_fingerprint
from ditox_ci.engine.repro_runtime import read_samples
from ditox_ci.engine.values import Feeds
from ditox_ci.github.text import Texts
from ditox_ci.optimizers.adapters.onnxruntime_adapter import passes_at
from ditox_ci.pinpoint.reduce import reduce, same_finding
from ditox_ci.pinpoint.repro import write_bundle
from ditox_ci.report.model import Culprit, Finding, read_report
from tests.helpers import FAKES, run_cli, sweep
from tests.integration.engine.test_evaluate_trusted_verdicts import gemm_model
from tests.integration.engine.test_runner_reference import _model as _double_erf_model

RTOL, ATOL = 1e-4, 1e-5
PLANTED_DIR = str(Path(planted.__file__).parent)


def run_repro(bundle: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": PLANTED_DIR}
    return subprocess.run(
        [sys.executable, str(bundle / "repro.py"), *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=bundle.parent,
    )


def make_bundle(tmp_path: Path, spec: str, passes: Sequence[str], nodes: int) -> Path:
    model, feeds = planted.chain_model(nodes=nodes, fault_at=nodes // 2), planted.feeds()

    def judge(candidate: onnx.ModelProto, candidate_feeds: Feeds) -> Outcome:
        return planted.engine_outcome(candidate, candidate_feeds, spec, passes, RTOL, ATOL)

    failure = judge(model, feeds)
    result = reduce(model, feeds, same_finding(judge, failure), 60.0)
    reduced = result.model
    expected = runner.run_all(runner.load_session(reduced.SerializeToString()), result.feeds)
    names = [v.name for v in reduced.graph.output]
    optimized = getattr(planted, spec.partition(":")[2])(reduced, passes, False)
    divergence = first_divergence(reduced, optimized, result.feeds, rtol=RTOL, atol=ATOL)
    scope = "pass" if len(passes) == 1 else "interaction"
    finding = Finding(
        fingerprint=failure_fingerprint(failure, passes),
        kind=str(failure.kind),
        model="chain.onnx",
        config="default",
        culprit=Culprit(scope, tuple(passes), "bisect+ddmin", 8),
        measured={"message": failure.message, **failure.evidence},
    )
    return write_bundle(
        tmp_path / "repro",
        finding=finding,
        model=reduced,
        original_model=model,
        feeds=result.feeds,
        expected=[dict(zip(names, s, strict=True)) for s in expected],
        optimizer_spec=spec,
        passes=passes,
        fixed_point=False,
        rtol=RTOL,
        atol=ATOL,
        divergence=divergence,
        names=result.names,
    )


@pytest.mark.parametrize(
    ("spec", "passes"),
    [
        ("localize_planted:single_pass_fault", [planted.SINGLE_CULPRIT]),
        ("localize_planted:pair_fault", list(planted.PAIR_CULPRITS)),
    ],
)
def test_bundle_repro_fails_with_the_fault_and_passes_when_fixed(
    tmp_path: Path, spec: str, passes: list[str]
) -> None:
    bundle = make_bundle(tmp_path, spec, passes, nodes=80)

    broken = run_repro(bundle)
    fixed = run_repro(bundle, "--optimizer", "onnxoptimizer")

    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "BUG PRESENT" in broken.stdout
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert len(onnx.load(str(bundle / "model.onnx")).graph.node) <= 10
    assert len(onnx.load(str(bundle / "original.onnx")).graph.node) == 80


def unreduced_bundle(tmp_path: Path, finding: Finding, spec: str, timeout_s: float = 60.0) -> Path:
    """The bundle of `finding` on a planted chain model as found, for optimizer `spec`."""
    model, feeds = planted.chain_model(nodes=12, fault_at=4), planted.feeds()
    outputs = runner.run_all(runner.load_session(model.SerializeToString()), feeds)
    names = [v.name for v in model.graph.output]
    return write_bundle(
        tmp_path / "repro",
        finding=finding,
        model=model,
        original_model=model,
        feeds=feeds,
        expected=[dict(zip(names, s, strict=True)) for s in outputs],
        optimizer_spec=spec,
        passes=finding.culprit.passes,
        fixed_point=False,
        rtol=RTOL,
        atol=ATOL,
        timeout_s=timeout_s,
    )


def test_a_hang_is_the_bug_present_not_a_repro_that_never_returns(tmp_path: Path) -> None:
    finding = Finding(
        fingerprint="feedfacefeedfacefeed",
        kind="optimizer-timeout",
        model="chain.onnx",
        config="default",
        culprit=Culprit("pass", (planted.SINGLE_CULPRIT,), "bisect+ddmin", 4),
        measured={"message": "optimizer timed out (2.0 s)"},
    )
    bundle = unreduced_bundle(tmp_path, finding, "localize_planted:hanging_fault", timeout_s=2.0)

    hung = run_repro(bundle)
    fixed = run_repro(bundle, "--optimizer", "onnxoptimizer")

    assert hung.returncode == 1, hung.stdout + hung.stderr
    assert "Timeout" in hung.stderr
    assert "passes ['eliminate_identity']" in hung.stdout, "printed before the hang, not lost"
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    missing = run_repro(bundle, "--optimizer", "no_such_module:optimize")
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "cannot tell" in missing.stdout


def test_bundle_files_pin_versions_and_read_like_a_bug_report(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, "localize_planted:single_pass_fault", ["eliminate_identity"], 60)
    assert sorted(p.name for p in bundle.iterdir()) == [
        "README.md",
        "ditox_repro",  # what repro.py runs: ditox-ci's runtime, copied
        "expected.npz",
        "finding.json",  # the finding and its optimizer call, for `ditox-ci bisect`
        "inputs.npz",
        "model.onnx",
        "optimizer_adapter.py",  # the custom adapter travels with the bundle
        "original.onnx",
        "repro.py",
        "requirements.txt",
    ]
    assert (bundle / "optimizer_adapter.py").read_text() == Path(planted.__file__).read_text()
    requirements = (bundle / "requirements.txt").read_text().splitlines()
    assert f"onnxruntime=={onnxruntime.__version__}" in requirements
    assert f"numpy=={np.__version__}" in requirements
    assert any(line.startswith("onnx==") for line in requirements)
    readme = (bundle / "README.md").read_text()
    assert "`eliminate_identity`" in readme
    assert "of 60 nodes" in readme
    assert f"Found by [ditox-ci]({PROJECT_URL})" in readme  # the project's one address, not a made-up one
    assert "python repro.py" in readme
    # the first diverging tensor is named as model.onnx names it, and its original name is listed
    assert "First diverging intermediate tensor: Y0" in readme
    assert "| `Y0` | v30\\_add |" in readme, "escaped"
    inputs = np.load(bundle / "inputs.npz")
    assert all(key.split("/")[0] in {"0", "1"} for key in inputs.files)


def test_reduce_command_writes_a_bundle_whose_repro_fails(tmp_path: Path) -> None:
    model_path = tmp_path / "chain.onnx"
    onnx.save(planted.chain_model(nodes=100, fault_at=50), str(model_path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([PLANTED_DIR, *sys.path])}
    done = run_cli(
        *("reduce", str(model_path), "--passes", planted.SINGLE_CULPRIT),
        *("--optimizer", "localize_planted:single_pass_fault"),
        *("--out", str(tmp_path / "out"), "--budget", "60"),
        env=env,
    )

    assert done.returncode == 1, done.stderr
    bundle = Path(done.stdout.strip())
    assert bundle.parent == tmp_path / "out"
    assert sorted(n.op_type for n in onnx.load(str(bundle / "model.onnx")).graph.node) == [
        "Add",
        "Mul",
    ]
    assert run_repro(bundle).returncode == 1
    assert run_repro(bundle, "--optimizer", "onnxoptimizer").returncode == 0


def test_reduce_command_writes_no_bundle_for_a_failure_that_does_not_repeat(tmp_path: Path) -> None:
    """A crash on the first call only (a heap-dependent read): the bundle written for it had a
    repro.py that said the bug was fixed, and the command printed its path as a bug's."""
    model_path = tmp_path / "flaky_relu.onnx"
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])],
        "flaky_relu",  # planted_builds crashes FLAKY_PASS on a `flaky*` model, on the calls listed
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), model_path)
    env = {**os.environ, "PYTHONPATH": str(FAKES), "PLANTED_FLAKY_CRASHES": "1"}
    env["PLANTED_FLAKY_COUNT"] = str(tmp_path / "calls")
    args = ("reduce", str(model_path), "--passes", "eliminate_deadend")
    args += ("--optimizer", "planted_base:optimize")
    done = run_cli(*args, "--out", str(tmp_path / "out"), env=env)
    assert done.returncode == 1, done.stderr
    assert (tmp_path / "calls").read_text() == "2"  # it crashed, then did not
    assert "(optimizer-crash) once, but not when judged again (not-reproducible" in done.stderr
    assert done.stdout == "" and not (tmp_path / "out").exists()


def _long_names(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every value named as a function's expansion names it (70 characters or so)."""
    prefix = "GroupNormalization_test_group_normalization_example_expanded_function_"
    graph = model.graph
    for value in [*graph.input, *graph.output, *graph.initializer]:
        value.name = prefix + value.name
    for node in graph.node:
        node.input[:] = [prefix + name for name in node.input]
        node.output[:] = [prefix + name for name in node.output]
    return model


def test_a_reduced_bundle_names_values_short_and_still_reproduces(tmp_path: Path) -> None:
    """The bundle's model, inputs and expected outputs use the issue's `X0`/`C0`/`Y0`/`t0` names;
    its README lists the original's; repro.py still says BUG PRESENT; the fingerprint (the bundle's
    folder) is the one the original model's failure gives, reduced or not."""
    model_path = tmp_path / "chain.onnx"
    onnx.save(_long_names(planted.chain_model(nodes=40, fault_at=20)), str(model_path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([PLANTED_DIR, *sys.path])}
    args = ("reduce", str(model_path), "--passes", planted.SINGLE_CULPRIT)
    args += ("--optimizer", "localize_planted:single_pass_fault", "--budget", "60")
    done = run_cli(*args, "--out", str(tmp_path / "out"), env=env)
    assert done.returncode == 1, done.stderr
    bundle = Path(done.stdout.strip())

    model = onnx.load(str(bundle / "model.onnx"))
    values = {v.name for v in [*model.graph.input, *model.graph.output, *model.graph.initializer]}
    values |= {name for node in model.graph.node for name in [*node.input, *node.output]}
    assert values == {"X0", "C0", "C1", "Y0", "t0"}, values
    assert {key.split("/", 1)[1] for key in np.load(bundle / "inputs.npz").files} == {"X0"}
    assert {key.split("/", 1)[1] for key in np.load(bundle / "expected.npz").files} == {"Y0"}
    readme = (bundle / "README.md").read_text()
    assert "| `X0` | GroupNormalization\\_test\\_group\\_normalization" in readme
    graph_text = readme.split("Reduced graph:")[1].split("Its values have short names")[0]
    assert "t0 = Mul (X0, C0)" in graph_text and "GroupNormalization" not in graph_text
    broken = run_repro(bundle)
    assert broken.returncode == 1 and "BUG PRESENT" in broken.stdout, broken.stdout + broken.stderr
    assert run_repro(bundle, "--optimizer", "onnxoptimizer").returncode == 0

    unreduced = run_cli(*args[:-1], "0.001", "--out", str(tmp_path / "unreduced"), env=env)
    assert Path(unreduced.stdout.strip()).name == bundle.name


def test_reduce_command_records_with_the_runner_that_could_run_the_model(tmp_path: Path) -> None:
    # double Erf: ONNX Runtime's CPU provider has none, so --runner auto judges it with the reference
    # implementation, which must then record the values and write the bundle too
    model_path = tmp_path / "wrong_erf.onnx"
    onnx.save(_double_erf_model("wrong_erf", "Erf"), str(model_path))
    done = run_cli(
        *("reduce", str(model_path), "--passes", "eliminate_identity"),
        *("--optimizer", f"{FAKES / 'faulty_optimizers.py'}:optimize", "--out", str(tmp_path / "out")),
    )

    assert done.returncode == 1, done.stderr
    bundle = Path(done.stdout.strip())
    assert 'runner="reference"' in (bundle / "repro.py").read_text()
    # reduced to the Add the planted fault turns into a Sub, fed with what Erf computed before it
    assert [node.op_type for node in onnx.load(str(bundle / "model.onnx")).graph.node] == ["Add"]
    assert run_repro(bundle).returncode == 1


def test_reduce_command_says_when_nothing_fails(tmp_path: Path) -> None:
    model_path = tmp_path / "chain.onnx"
    onnx.save(planted.chain_model(nodes=20, fault_at=10), str(model_path))
    done = run_cli("reduce", str(model_path), "--passes", "nop", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "nothing to reduce" in done.stderr
    assert not (tmp_path / "out").exists()


def test_an_invalid_model_bundle_reproduces_what_only_the_full_check_rejects(tmp_path: Path) -> None:
    """The sweep's checker runs with full_check (strict shape inference): a value_info that
    contradicts inference is an invalid-model finding, and its repro.py must say so too."""
    adapter = tmp_path / "contradicting.py"
    adapter.write_text(
        "from onnx import TensorProto, helper\n\n"
        "def optimize(model, passes, fixed_point):\n"
        "    out = model.__class__()\n"
        "    out.CopyFrom(model)\n"
        "    name = out.graph.node[0].output[0]\n"
        "    out.graph.value_info.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 99]))\n"
        "    return out\n"
    )
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["r"]), onnx.helper.make_node("Neg", ["r"], ["y"])],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2])],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    feeds = [{"x": np.array([[1.0, -1.0]], np.float32)}]
    finding = Finding(
        fingerprint="1" * 20, kind="invalid-model", model="m.onnx", config="default",
        culprit=Culprit("pass", ("p",), "single", 1), measured={"message": "InferenceError"},
    )
    bundle = write_bundle(
        tmp_path / "repro", finding=finding, model=model, original_model=model, feeds=feeds,
        expected=[{"y": np.array([[-1.0, 0.0]], np.float32)}], optimizer_spec=f"{adapter}:optimize",
        passes=("p",), fixed_point=False, rtol=RTOL, atol=ATOL,
    )
    done = run_repro(bundle)
    assert done.returncode == 1 and "BUG PRESENT: the optimized model is invalid" in done.stdout, (
        done.stdout + done.stderr
    )


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_a_bundle_keeps_element_types_numpy_lacks_and_still_reproduces(tmp_path: Path, dtype: str) -> None:
    """bfloat16 and float8 inputs and outputs: npz keeps their bytes, the bundle their names."""
    element_type = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(getattr(ml_dtypes, dtype)))
    nodes = [
        onnx.helper.make_node("Cast", ["x"], ["wide"], to=onnx.TensorProto.FLOAT),
        onnx.helper.make_node("Identity", ["wide"], ["i"]),
        onnx.helper.make_node("Add", ["i", "w"], ["sum"]),
        onnx.helper.make_node("Cast", ["sum"], ["y"], to=element_type),
    ]
    graph = onnx.helper.make_graph(
        nodes,
        "wrong_narrow",  # the planted optimizer flips its Add when eliminate_identity runs
        [onnx.helper.make_tensor_value_info("x", element_type, [2, 3])],
        [onnx.helper.make_tensor_value_info("y", element_type, [2, 3])],
        [onnx.numpy_helper.from_array(np.full((2, 3), 2.0, np.float32), "w")],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    feeds = [{"x": np.linspace(-1, 1, 6).reshape(2, 3).astype(getattr(ml_dtypes, dtype))}]
    [outputs] = runner.run_all(runner.load_session(model.SerializeToString()), feeds)
    finding = Finding(
        fingerprint="2" * 20, kind="output-mismatch", model="m.onnx", config="default",
        culprit=Culprit("pass", ("eliminate_identity",), "single", 1), measured={"message": "y"},
    )
    bundle = write_bundle(
        tmp_path / "repro", finding=finding, model=model, original_model=model, feeds=feeds,
        expected=[{"y": outputs[0]}], optimizer_spec=f"{FAKES / 'faulty_optimizers.py'}:optimize",
        passes=("eliminate_identity",), fixed_point=False, rtol=RTOL, atol=ATOL,
    )

    broken = run_repro(bundle)
    fixed = run_repro(bundle, "--optimizer", "onnxoptimizer")

    said = broken.stdout + broken.stderr
    assert broken.returncode == 1 and "BUG PRESENT: sample 0, output y: max abs difference" in said, said
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_repro_feeds_a_renamed_input_by_position_as_the_engine_does(tmp_path: Path) -> None:
    """A pass may rename graph inputs by design, and drop an initializer from them (IR 3 models
    list initializers as inputs): the feeds follow the inputs that need a value, by position."""
    adapter = tmp_path / "renaming.py"
    adapter.write_text(
        "def optimize(model, passes, fixed_point):\n"
        "    out = model.__class__()\n"
        "    out.CopyFrom(model)\n"
        "    del out.graph.input[0]\n"
        "    out.graph.input[0].name = 'renamed'\n"
        "    out.graph.node[0].input[0] = 'renamed'\n"
        "    out.graph.node[0].op_type = 'Sub'\n"
        "    return out\n"
    )
    weight = onnx.numpy_helper.from_array(np.full(2, 3.0, np.float32), "w")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [
            onnx.helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [2]),
            onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2]),
        ],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
        [weight],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    finding = Finding(
        fingerprint="3" * 20, kind="output-mismatch", model="m.onnx", config="default",
        culprit=Culprit("pass", ("p",), "single", 1), measured={"message": "y"},
    )
    bundle = write_bundle(
        tmp_path / "repro", finding=finding, model=model, original_model=model,
        feeds=[{"x": np.ones(2, np.float32)}], expected=[{"y": np.full(2, 4.0, np.float32)}],
        optimizer_spec=f"{adapter}:optimize", passes=("p",), fixed_point=False, rtol=RTOL, atol=ATOL,
    )
    done = run_repro(bundle)
    said = done.stdout + done.stderr
    assert done.returncode == 1 and "BUG PRESENT: sample 0, output y: max abs difference 6" in said, said


# runs repro.py where `import ditox_ci` fails: the bundle must not need ditox-ci installed
WITHOUT_DITOX = """
import runpy, sys
class NoDitox:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "ditox_ci":
            raise ImportError("ditox-ci is not installed here")
sys.meta_path.insert(0, NoDitox())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_bundle_runs_where_ditox_ci_is_not_installed(tmp_path: Path) -> None:
    adapter = tmp_path / "add_to_sub.py"
    adapter.write_text(
        "import onnxoptimizer\n\n"
        "def optimize(model, passes, fixed_point):\n"
        "    out = onnxoptimizer.optimize(model, list(passes), fixed_point)\n"
        "    for node in out.graph.node:\n"
        "        node.op_type = 'Sub' if node.op_type == 'Add' else node.op_type\n"
        "    return out\n"
    )
    model, feeds = planted.chain_model(nodes=6, fault_at=3), planted.feeds()
    names = [v.name for v in model.graph.output]
    outputs = runner.run_all(runner.load_session(model.SerializeToString()), feeds)
    finding = Finding(
        fingerprint="2" * 20, kind="output-mismatch", model="chain.onnx", config="default",
        culprit=Culprit("pass", ("eliminate_identity",), "single", 1), measured={"message": "differs"},
    )
    bundle = write_bundle(
        tmp_path / "repro", finding=finding, model=model, original_model=model, feeds=feeds,
        expected=[dict(zip(names, s, strict=True)) for s in outputs], optimizer_spec=f"{adapter}:optimize",
        passes=("eliminate_identity",), fixed_point=False, rtol=RTOL, atol=ATOL,
    )

    def repro(*flags: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", WITHOUT_DITOX, str(bundle / "repro.py"), *flags]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)

    broken, fixed = repro(), repro("--optimizer", "onnxoptimizer")
    assert broken.returncode == 1 and "BUG PRESENT" in broken.stdout, broken.stdout + broken.stderr
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_a_builds_own_bug_is_checked_and_bundled_with_that_build_not_the_installed_release(
    tmp_path: Path,
) -> None:
    """A wheel of main or of a pull request with a bug the release installed beside ditox-ci lacks:
    the standalone check ran that release, so the issue said the bug did not show when ditox-ci
    ran its script, and the bundle pinned the release, whose repro.py says the bug is fixed."""
    wheel = miscompiling_onnxoptimizer(tmp_path / "dist", "0.4.3.dev0")
    weight = onnx.numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["a"]), onnx.helper.make_node("Add", ["a", "w"], ["y"])],
        "identity_add",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])],
        [weight],
    )
    (tmp_path / "models").mkdir()
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "models" / "m.onnx")
    flags = ("--optimizer", str(wheel), "--models", str(tmp_path / "models"), "--jobs", "1")
    flags += ("--configs", f"nop,pass:{MISCOMPILED_PASS}", "--cache-dir", str(tmp_path / "cache"))
    code, report, err = sweep(*flags, out=tmp_path / "out")
    assert code == 1, err
    (finding,) = report["findings"]
    standalone = finding["evidence"]["standalone"]
    assert standalone["reproduces"] is True
    assert standalone["versions"]["onnxoptimizer"] == "0.4.3.dev0" and standalone["build"] == str(wheel)
    # the issue's and the script's pip lines do not pin the release of the build's version
    report_read = read_report(tmp_path / "out" / "report.json")
    (found,) = report_read.findings
    issue = Texts(report_read, "f" * 40, "ditox-report", None).issue(found)
    assert "onnxoptimizer==" not in issue and "0.4.3.dev0, not a release" in issue
    header = (tmp_path / "out" / "repro" / finding["fingerprint"] / "standalone.py").read_text()[:600]
    assert "onnxoptimizer==" not in header and f"the build that was swept: {wheel}" in header
    bundle = tmp_path / "out" / "repro" / finding["fingerprint"]
    pins = (bundle / "requirements.txt").read_text()
    assert "onnxoptimizer==" not in pins
    assert f"# onnxoptimizer 0.4.3.dev0: the build this run swept ({wheel}), not a release" in pins
    assert "onnxoptimizer 0.4.3.dev0: the build" in (bundle / "README.md").read_text()
    # repro.py shows the bug with that build installed, and not with the release
    (build,) = (tmp_path / "cache" / "builds").iterdir()
    command = [sys.executable, "repro.py"]
    for env, code in (({**os.environ, "PYTHONPATH": str(build)}, 1), (dict(os.environ), 0)):
        ran = subprocess.run(command, cwd=bundle, env=env, capture_output=True, text=True)
        said = ran.stdout + ran.stderr
        assert ran.returncode == code and ("BUG PRESENT" in said) == (code == 1), said


def test_a_bundle_keeps_a_sequence_a_sequence_and_its_repro_shows_the_bug(tmp_path: Path) -> None:
    """onnxoptimizer 0.4.2's round trip drops a sequence's type (the nop control fails the checker).
    The bundle stored the sequence input as one tensor (elements of unequal shapes: not at all,
    exit 70), and its repro.py said it could not tell: the unoptimized model refused the tensor."""
    flags = ("--models", "onnx-node:test_identity_sequence", "--configs", "nop", "--jobs", "1")
    code, report, err = sweep(*flags, out=tmp_path / "out")
    assert code == 1, err
    (finding,) = report["findings"]
    assert finding["kind"] == "invalid-model"
    bundle = tmp_path / "out" / "repro" / finding["fingerprint"]
    (sample,) = read_samples(bundle / "inputs.npz")
    assert [type(value) for value in sample.values()] == [list]
    ran = subprocess.run([sys.executable, "repro.py"], cwd=bundle, capture_output=True, text=True)
    assert ran.returncode == 1 and "BUG PRESENT: the optimized model is invalid" in ran.stdout, ran.stdout


def test_an_ort_extended_bundle_runs_where_ditox_ci_is_not_installed(tmp_path: Path) -> None:
    """The extended adapter imports the basic one: its bundle carries both, so `python repro.py`
    needs onnx, onnxruntime and numpy only, as every bundle's README says."""
    passes = (passes_at("extended")[0],)
    finding = Finding("e" * 20, "output-mismatch", "chain.onnx", "default", Culprit("pass", passes))
    bundle = unreduced_bundle(tmp_path, finding, "onnxruntime-extended")
    assert (bundle / "onnxruntime_adapter.py").is_file()
    # a `ditox_ci` that cannot be imported, first on the path: as if it were not installed
    (tmp_path / "elsewhere" / "ditox_ci").mkdir(parents=True)
    (tmp_path / "elsewhere" / "ditox_ci" / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "elsewhere")}
    ran = subprocess.run([sys.executable, "repro.py"], cwd=bundle, env=env, capture_output=True, text=True)
    assert ran.returncode == 0 and "the bug is fixed" in ran.stdout, ran.stdout + ran.stderr


def _float64_add_model(name: str) -> onnx.ModelProto:
    """y = x + c in float64: a drift of 1e-4 in c is within float32's tolerances, not float64's."""
    constant = onnx.numpy_helper.from_array(np.linspace(1.0, 2.0, 6).reshape(2, 3), "c")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["x", "c"], ["y"])],
        name,
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [2, 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, [2, 3])],
        [constant],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    ("optimizer", "says"),
    [
        # within the fixed tolerances, 300 times the model's own noise: the calibrated oracle's bug
        ("optimize_scaled_weight", "times the unoptimized model's own numerical noise"),
        # beyond float64's tolerances, within float32's, which repro.py took for every output
        ("optimize_nudged_add", "beyond rtol=1e-06 atol=1e-08"),
    ],
)
def test_a_bundle_judges_each_output_as_the_sweep_did(tmp_path: Path, optimizer: str, says: str) -> None:
    """repro.py compared every output with float32's tolerances and no noise floor: for a
    calibrated finding, or one on a float64 output, it said the bug was fixed while it was there."""
    model = tmp_path / "models" / "m"
    if optimizer == "optimize_scaled_weight":
        x = np.random.default_rng(1).integers(-3, 4, (4, 16)).astype(np.int32)
        write_recorded_inputs(model, gemm_model("gemm"), [{"x": x}])
    else:
        model.parent.mkdir()
        onnx.save(_float64_add_model("add64"), tmp_path / "models" / "m.onnx")
    flags = (
        "--models",
        str(tmp_path / "models"),
        "--optimizer",
        f"{FAKES / 'faulty_optimizers.py'}:{optimizer}",
    )
    code, report, err = sweep(
        *flags, "--configs", "pass:eliminate_deadend", "--jobs", "1", out=tmp_path / "out"
    )
    assert code == 1, err
    (finding,) = report["findings"]
    bundle = tmp_path / "out" / "repro" / finding["fingerprint"]
    broken = subprocess.run([sys.executable, "repro.py"], cwd=bundle, capture_output=True, text=True)
    assert broken.returncode == 1 and "BUG PRESENT" in broken.stdout and says in broken.stdout, broken.stdout
    fixed = run_repro(bundle, "--optimizer", "onnxoptimizer")
    assert fixed.returncode == 0 and "the bug is fixed" in fixed.stdout, fixed.stdout + fixed.stderr


FIXED_OPSET = '''
import onnx, onnxoptimizer


def optimize(model, passes, fixed_point=False):
    """onnxoptimizer with the fix: the default domain imported where the result uses it."""
    out = onnxoptimizer.optimize(model, passes, fixed_point)
    if not any(op.domain in ("", "ai.onnx") for op in out.opset_import):
        out.opset_import.append(onnx.helper.make_opsetid("", 17))
    return out
'''


def test_a_by_design_change_the_checker_refuses_reproduces_the_refusal_alone(tmp_path: Path) -> None:
    """rewrite_input_dtype narrows int64 inputs by design (the default baseline says so); on a model
    that imports only the training domain the Cast it adds has no opset: that is the bug. Its
    repro.py judged the retyping, which stays after a fix: it said BUG PRESENT for ever."""
    flags = ("--models", "onnx-node:test_adagrad", "--configs", "nop,pass:rewrite_input_dtype", "--jobs", "1")
    code, report, err = sweep(*flags, out=tmp_path / "out")
    assert code == 1, err
    (finding,) = report["findings"]
    assert (finding["kind"], finding["verdicts"]) == (
        "invalid-model",
        ["invalid-model", "runtime-load-error", "interface-change"],
    )
    assert "No opset import" in finding["evidence"]["checker"]
    bundle = tmp_path / "out" / finding["repro"]
    present = subprocess.run([sys.executable, "repro.py"], cwd=bundle, capture_output=True, text=True)
    assert present.returncode == 1 and "BUG PRESENT: the optimized model is invalid" in present.stdout
    (tmp_path / "fixed_opset.py").write_text(FIXED_OPSET)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    command = [sys.executable, "repro.py", "--optimizer", "fixed_opset:optimize"]
    fixed = subprocess.run(command, cwd=bundle, capture_output=True, text=True, env=env)
    assert fixed.returncode == 0 and "the bug is fixed" in fixed.stdout, fixed.stdout + fixed.stderr


FIXED_POINT_TIDIES = '''
import onnx
from onnx import numpy_helper


def get_available_passes():
    return ["corrupt"]


def get_fuse_and_elimination_passes():
    return ["corrupt"]


def optimize(model, passes, fixed_point):
    """`corrupt` doubles the constant (a miscompilation); fixed-point also drops the Identity."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    constant = model.graph.initializer[0]
    constant.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(constant) * 2, constant.name))
    if fixed_point:
        (identity,) = [node for node in model.graph.node if node.op_type == "Identity"]
        model.graph.node.remove(identity)
        for node in model.graph.node:
            node.input[:] = [identity.input[0] if name == identity.output[0] else name for name in node.input]
    return model
'''


def test_reduce_fingerprints_a_bug_by_what_its_passes_alone_rewrite_fixed_point_or_not(
    tmp_path: Path,
) -> None:
    """The sweep's fingerprint counts the op types the culprit passes alone remove and add; under
    --fixed-point, reduce counted what the fixed-point run did, so its bundle was another bug's."""
    (tmp_path / "tidy_opt.py").write_text(FIXED_POINT_TIDIES)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["i"]), onnx.helper.make_node("Add", ["i", "c"], ["y"])],
        "tidy",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])],
        [onnx.numpy_helper.from_array(np.ones(3, np.float32), "c")],
    )
    model_path = tmp_path / "tidy.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), model_path)
    bundles = []
    for extra in ((), ("--fixed-point",)):
        args = ("reduce", str(model_path), "--passes", "corrupt")
        args += ("--optimizer", f"{tmp_path}/tidy_opt.py:optimize")
        done = run_cli(*args, *extra, "--out", str(tmp_path / f"out{len(extra)}"))
        assert done.returncode == 1, done.stderr
        bundles.append(Path(done.stdout.strip()).name)
    assert bundles[0] == bundles[1]
