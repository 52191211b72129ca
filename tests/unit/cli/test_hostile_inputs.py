"""Files and values someone else wrote are input, never a reason for a traceback, exit 70 or
unbounded work: crafted reports, baselines and config files, and non-finite or negative numbers
(threat model items 4 and 6), each through the real CLI in process."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from ditox_ci.__main__ import main
from ditox_ci.ci.inputs import read_inputs
from ditox_ci.errors import ConfigError, InputError, InternalError, UsageError
from ditox_ci.optimizers import load_optimizer
from ditox_ci.report.model import MAX_REPORT_BYTES, write_report
from ditox_ci.safeload import MAX_JSON_DEPTH, MAX_JSON_ELEMENTS, parse_json, parse_yaml
from ditox_ci.sweep.plan import plan_sweep
from ditox_ci.sweep.setup import SweepOptions
from tests.helpers import minimal_report
from tests.integration.action_models import write_models

# Nine levels of aliases, each doubling: 2**9 × 9 strings from a few hundred bytes; real billion
# laughs go further, which a loader that expands aliases at all cannot survive.
BILLION_LAUGHS = "a: &a [lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8)
)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The exit code and the error line; anything else on stderr is progress, never a traceback."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("ditox-ci:")]
    assert len(errors) <= 1, err
    return int(exited.value.code or 0), "".join(errors)


def _good_report(path: Path) -> Path:
    """A report each tampering below edits: its `stats` an empty object, `"stats": {}`."""
    write_report(minimal_report(), path)
    path.write_text(json.dumps({**json.loads(path.read_text()), "stats": {}}))
    return path


@pytest.mark.parametrize(
    ("tamper", "says"),
    [
        (lambda text: text.replace('"stats": {}', '"stats": {"wall_s": 1e999}'), "too large for a float"),
        (lambda text: text.replace('"stats": {}', '"stats": {"runs": ' + "9" * 5000 + "}"), "5000 digits"),
        (
            lambda text: text.replace('"stats": {}', '"stats": ' + "[" * 100_000 + "]" * 100_000),
            f"deeper than {MAX_JSON_DEPTH}",
        ),
        (
            lambda text: text.replace('"stats": {}', '"stats": ' + "[" * 200 + "]" * 200),
            f"deeper than {MAX_JSON_DEPTH}",
        ),
        (lambda text: text.replace('"stats": {}', '"stats": {"\\ud800": "x"}'), "lone UTF-16 surrogate"),
        (lambda text: text.replace('"stats": {}', '"stats": {"note": ["\\udcff"]}'), "lone UTF-16 surrogate"),
        (lambda text: text.replace('"stats": {}', '"stats": {}, "junk": {}'), "junk"),
        (
            lambda text: text.replace('"stats": {}', '"stats": {"x": [' + "{}," * MAX_JSON_ELEMENTS + "{}]}"),
            f"more than {MAX_JSON_ELEMENTS} JSON values",
        ),
        (lambda text: text + " " * MAX_REPORT_BYTES, f"more than {MAX_REPORT_BYTES} bytes"),
    ],
    ids=[
        "1e999",
        "huge-integer",
        "nested-past-recursion",
        "nested-200",
        "surrogate-key",
        "surrogate-value",
        "unknown-top-level-key",
        "too-many-values",
        "too-many-bytes",
    ],
)
def test_a_crafted_report_is_an_input_error_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tamper: object, says: str
) -> None:
    report = _good_report(tmp_path / "report.json")
    report.write_text(tamper(report.read_text()))  # type: ignore[operator]
    for argv in (
        ["publish", "--report", str(report), "--dry-run"],
        ["merge", str(tmp_path), "--out", str(tmp_path / "merged")],
        ["baseline", "update", "--report", str(report), "--baseline", str(tmp_path / "b.yml")],
    ):
        code, err = _cli(argv, capsys)
        assert code == InputError.exit_code, (argv, err)
        assert says in err, err


def test_a_report_may_still_hold_the_nan_and_infinity_its_writer_puts_there(tmp_path: Path) -> None:
    data = parse_json('{"max_abs": NaN, "max_rel": Infinity, "n": -12}', "report r", InputError)
    assert data["max_rel"] == float("inf") and data["n"] == -12
    assert parse_json('"\\ud83d\\ude00"', "report r", InputError) == "\U0001f600"  # a pair is one character


def test_a_baseline_with_aliases_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _good_report(tmp_path / "report.json")
    baseline = tmp_path / "baseline.yml"
    baseline.write_text("entries: []\n" + BILLION_LAUGHS)
    started = time.monotonic()
    code, err = _cli(["publish", "--report", str(report), "--baseline", str(baseline), "--dry-run"], capsys)
    assert code == ConfigError.exit_code, err
    assert "YAML aliases (*a) are not accepted" in err and "line 3" in err
    assert time.monotonic() - started < 5


def test_a_config_file_with_aliases_or_merge_keys_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "ditox.yml"
    config.write_text("defaults: &d {jobs: 1}\nsweep:\n  <<: *d\n")
    code, err = _cli(["sweep", "--config", str(config), "--models", str(tmp_path / "none")], capsys)
    assert code == ConfigError.exit_code, err
    assert "YAML aliases (*d)" in err


def test_deep_yaml_is_an_error_not_a_crash() -> None:
    with pytest.raises(ConfigError, match="nests too deeply"):
        parse_yaml("[" * 50_000 + "]" * 50_000, "baseline b.yml", ConfigError)


def test_anchors_without_aliases_and_plain_yaml_still_load() -> None:
    assert parse_yaml("a: &x 1\nb: [2, 3]\n", "config c", ConfigError) == {"a": 1, "b": [2, 3]}


def test_event_payloads_go_through_the_same_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"number": 1}).replace("1", "1e999"))
    report = _good_report(tmp_path / "report.json")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GITHUB_EVENT_PATH", str(event))
        patch.setenv("GITHUB_EVENT_NAME", "pull_request")
        code, err = _cli(["publish", "--report", str(report), "--dry-run"], capsys)
    assert code == InputError.exit_code and "GITHUB_EVENT_PATH" in err, err


@pytest.mark.parametrize(
    "flags",
    [
        ["--timeout", "nan"],
        ["--timeout", "inf"],
        ["--timeout", "-1"],
        ["--rtol", "nan"],
        ["--atol", "-0.5"],
        ["--reduce-budget", "inf"],
    ],
)
def test_non_finite_or_negative_numbers_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    code, err = _cli(["sweep", "--models", str(tmp_path), "--out", str(tmp_path / "out"), *flags], capsys)
    assert code == UsageError.exit_code, err
    assert f"{flags[0]} must be a finite number >= 0" in err
    assert not (tmp_path / "out").exists()


def test_a_non_finite_number_from_the_environment_or_a_config_file_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "ditox.yml"
    config.write_text("sweep:\n  rtol: .nan\n")
    code, err = _cli(["sweep", "--config", str(config), "--models", str(tmp_path)], capsys)
    assert code == ConfigError.exit_code and "'rtol' must be a finite number" in err, err
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DITOX_TIMEOUT", "NaN")
        code, err = _cli(["sweep", "--models", str(tmp_path)], capsys)
    assert code == ConfigError.exit_code and "DITOX_TIMEOUT" in err, err
    with pytest.raises(ConfigError, match="INPUT_TIMEOUT"):
        read_inputs({"INPUT_TIMEOUT": "nan"})


@pytest.mark.parametrize("command", ["sweep", "merge"])
def test_an_unwritable_out_is_an_input_error_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    _good_report(tmp_path / "shard" / "report.json")
    models = tmp_path / "models"
    models.mkdir()
    argv = {
        "sweep": ["sweep", "--models", str(models), "--out", "/proc/ditox-out"],
        "merge": ["merge", str(tmp_path / "shard"), "--out", "/proc/ditox-out"],
    }[command]
    code, err = _cli(argv, capsys)
    assert code == InputError.exit_code, err
    assert "--out /proc/ditox-out: cannot write there" in err


def test_a_previous_runs_output_inside_the_corpus_folder_is_not_swept(tmp_path: Path) -> None:
    corpus = tmp_path / "models"
    write_models(corpus)
    out = corpus / "ditox-report"
    bundle = out / "repro" / "0123456789abcdef"
    bundle.mkdir(parents=True)
    shutil.copy(corpus / "relu.onnx", bundle / "model.onnx")
    options = SweepOptions(models=(str(corpus),), configs=("default",), out=str(out), jobs=1)
    _, jobs = plan_sweep(options, load_optimizer(options.optimizer).info)
    ids = sorted(job.ref.id for job in jobs)
    assert ids == sorted(path.name for path in corpus.glob("*.onnx")), ids


def test_a_hub_manifest_from_outside_is_read_with_the_same_bounds() -> None:
    from ditox_ci.corpus.hub import parse_manifest

    with pytest.raises(InputError, match=r"hub manifest https://hub\.invalid/m\.json nests deeper"):
        parse_manifest(b"[" * 10_000 + b"]" * 10_000, "https://hub.invalid/m.json")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["fuzz", "--budget", "nan", "--limit", "1"], "--budget must be a positive number"),
        (["sweep", "--memory-limit", "-1"], "--memory-limit must be positive"),
        # numpy refuses a negative seed: it was an internal error (exit 70) after the set-up
        (["fuzz", "--seed", "-1", "--limit", "1", "--no-sweep"], "--seed must be 0 or more"),
        (["fuzz", "--limit", "0"], "--limit must be 1 or more models, got 0"),
        # named by its flag: it said --max-wait-s, which no command takes
        (["publish", "--max-wait", "nan"], "argument --max-wait: must be a finite number of seconds"),
    ],
)
def test_a_budget_or_memory_limit_it_could_never_reach_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    code, err = _cli([*argv, "--out", str(tmp_path / "out")], capsys)
    assert code == UsageError.exit_code and says in err, err


def test_fuzz_refuses_a_shard_from_any_source_and_an_out_folder_it_cannot_write_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard's report is judged by a merge (a DITOX_SHARD one exited 0 on no model at all); an
    unwritable --out was an internal error once the optimizer was installed and a model written."""
    monkeypatch.setenv("DITOX_SHARD", "1/2")
    code, err = _cli(["fuzz", "--limit", "1", "--out", str(tmp_path / "out")], capsys)
    assert code == ConfigError.exit_code and err.startswith("ditox-ci: error: environment DITOX_SHARD:"), err
    monkeypatch.delenv("DITOX_SHARD")
    code, err = _cli(["fuzz", "--limit", "1", "--out", "/proc/no-such-folder"], capsys)
    assert code == InputError.exit_code and "cannot write there" in err, err


def test_a_bug_in_a_fuzz_generator_is_exit_70_once_what_was_made_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ditox_ci.fuzz.base import GENERATORS, Generator

    def buggy(builder, near_miss):
        raise ValueError("a generator's own bug")

    monkeypatch.setitem(GENERATORS, "buggy", Generator("buggy", "test", buggy))
    out = tmp_path / "out"
    argv = ["fuzz", "--passes", "buggy,eliminate_identity", "--limit", "4", "--no-sweep", "--out", str(out)]
    code, err = _cli(argv, capsys)
    assert code == InternalError.exit_code, err
    assert "own generator code failed on 2 seed(s), e.g. buggy seed 0: ValueError" in err
    assert sorted(folder.name for folder in (out / "corpus").iterdir()) == [
        "eliminate_identity-0", "eliminate_identity-1"
    ]


MISSING = InputError.exit_code


@pytest.mark.parametrize(
    ("argv", "exit_code", "says"),
    [
        # a folder missing from the working directory: it was "unknown model source", exit 2
        (["corpus", "list", "--models", "models"], MISSING, "model source 'models' does not exist"),
        # a source's name mistyped before its glob: it was a missing path, exit 4, naming no source
        (["corpus", "list", "--models", "onnx-dat:light/*"], UsageError.exit_code, "source 'onnx-dat'"),
        # a cache that takes no file: it was an internal error (exit 70) wherever the first write came
        (["corpus", "list", "--models", "onnx-data", "--cache-dir", "{file}/c"], MISSING, "{file}/c: cannot"),
        (["sweep", "--cache-dir", "{file}/c", "--out", "out"], MISSING, "{file}/c: cannot"),
    ],
)
def test_a_missing_folder_a_mistyped_source_and_an_unusable_cache_are_said_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    argv: list[str], exit_code: int, says: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    fill = {"file": str(tmp_path / "a-file")}
    code, err = _cli([arg.format(**fill) for arg in argv], capsys)
    assert code == exit_code and says.format(**fill) in err, err


def test_reduce_checks_its_cache_folder_before_installing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """reduce takes its cache only from the environment; a file there was found only when a wheel or
    checkout was installed into it, as exit 70."""
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("DITOX_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    code, err = _cli(["reduce", str(tmp_path / "m.onnx"), "--passes", "eliminate_identity"], capsys)
    assert code == InputError.exit_code and "--cache-dir" in err and "cannot write there" in err, err
