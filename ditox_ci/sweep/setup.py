"""What a command that runs models is told, resolved once, and handed down whole.

`RunOptions` are the options every command that runs models through the worker pool takes (sweep,
fuzz, reduce); `SweepOptions` and `ReduceOptions` add their own. Each option is declared here
once (`ditox_ci.options.option`: its default, choices and help), and the commands' flags are made
from the declarations. The options resolver (`ditox_ci.options.resolve`) fills them; they check
their values when built. A sweep is then set up once (`sweep_setup`): the optimizer installed and
loaded, the baseline and the previous report read, the timeout decided. Nothing below re-reads a
flag, re-loads a file or re-applies a default: the sweep, pinpointing and `finish` take the
`SweepSetup`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.calibration import NOISE_MARGIN
from ditox_ci.compare.tensor import DTYPE_TOLERANCES, Tolerances
from ditox_ci.corpus import DEFAULT_SOURCES, default_cache_dir
from ditox_ci.engine.evaluate import EvalSettings
from ditox_ci.engine.forkserver import warm_up
from ditox_ci.engine.plan import DEFAULT_CONFIGS
from ditox_ci.engine.pool import (
    DEFAULT_MEMORY_LIMIT_MB,
    WorkerConfig,
    allowance_per_model_mb,
    available_memory_mb,
)
from ditox_ci.engine.reuse import Reuse, reuse_table
from ditox_ci.engine.runner import RUNNER_CHOICES
from ditox_ci.engine.screen import SCREEN_MIN_MB
from ditox_ci.engine.shard import Shard
from ditox_ci.errors import UsageError
from ditox_ci.log import Log
from ditox_ci.optimizers import DEFAULT_OPTIMIZER, optimizer_help
from ditox_ci.optimizers.install import Installation, optimizer_build
from ditox_ci.options import ON_OFF, check_choices, option
from ditox_ci.pinpoint.pinpointer import LOCALIZE_MODES
from ditox_ci.report import Report, read_report
from ditox_ci.report.header import OptimizerInfo
from ditox_ci.report.kinds import TIERS
from ditox_ci.report.outputs import prepare_out_dir
from ditox_ci.report.schema import read_checked_report
from ditox_ci.triage.baseline import Baseline, check_entry_passes, load_baseline
from ditox_ci.triage.impact import Impact, impact_of

# what the sweep's own process keeps of the machine's free memory (the report, the results so far)
PARENT_SHARE_MB = 1024
# the options that name a file or folder
PATH_OPTIONS = (
    "out", "baseline", "previous", "reuse_from", "cache_dir", "report", "checkout", "find_links", "out_json"
)


def _by_dtype(which: int) -> str:
    """A tolerance's default for each output's dtype, as --rtol's and --atol's help say it."""
    dtypes = ("float32", "float16", "bfloat16", "float64")
    return ", ".join(f"{DTYPE_TOLERANCES[dtype][which]:g} for {dtype}" for dtype in dtypes)


@dataclass(frozen=True)
class RunOptions:
    """The options of every command that runs models in the worker pool."""

    optimizer: str = option(DEFAULT_OPTIMIZER, help=optimizer_help)
    samples: int = option(
        1,
        help="random input samples per model, plus a wide-range and a sign-structured one where the "
        "inputs are random or recorded",
    )
    seed: int = option(0, help="seed for random inputs")
    rtol: float | None = option(None, help="relative tolerance for every output", default_text=_by_dtype(0))
    atol: float | None = option(None, help="absolute tolerance for every output", default_text=_by_dtype(1))
    timeout: float = option(60.0, help="seconds one optimizer or runtime call may take")
    # None: DEFAULT_MEMORY_LIMIT_MB, and the workers may reserve together what the machine has free
    # when that is more than --jobs × the limit (see worker_config)
    memory_limit: int | None = option(
        None,
        help="MiB each worker may use, and × --jobs what they may use together; not given, 4 workers fit "
        "a 16 GB runner, and together they may use what the machine has free if that is more",
        default_text=str(DEFAULT_MEMORY_LIMIT_MB),
    )
    jobs: int = option(0, help="worker processes", default_text="all cores")
    calibrate: bool = option(
        True,
        help=f"on: a float output also fails when its error is more than {NOISE_MARGIN:g} times the "
        "model's own noise floor (what ONNX Runtime's own optimizations move it by), within "
        "--rtol/--atol; off: the fixed tolerances alone",
        choices=ON_OFF,
    )
    dynamic_dim: int = option(2, help="size for symbolic dimensions")
    runner: str = option(
        "auto",
        help="what runs original and optimized: auto uses ONNX Runtime, and ONNX's reference "
        "implementation for a model whose original ONNX Runtime cannot load or run",
        choices=RUNNER_CHOICES,
    )
    comparator: str | None = option(
        None, help="task comparator run after the tensor oracle (e.g. classification)"
    )
    # engine/screen.py
    screen: bool = option(
        True,
        help=f"on: a model of {SCREEN_MIN_MB:g} MiB or more has its single passes run as one "
        "onnxoptimizer call first, and only the passes that call cannot clear run on their own (the "
        "same verdicts in a third to a half of the time); off: every single pass on its own. Every "
        "shard job of a sweep must say the same",
        choices=ON_OFF,
    )
    cache_dir: str = option(
        help="where named sources materialize models and builds are installed",
        default_factory=lambda: str(default_cache_dir(os.environ)),
        default_text="$DITOX_CACHE_DIR, else $DITOX_CACHE, else ~/.cache/ditox-ci",
    )

    def __post_init__(self) -> None:
        # every path the command writes, reads or runs is made absolute here, once: the workers, the
        # optimizer and the standalone script run in other working directories (a relative --out
        # once made the script's path double, and every issue said the bug did not reproduce)
        for name in PATH_OPTIONS:
            value = getattr(self, name, None)
            if value:
                object.__setattr__(self, name, os.path.abspath(os.path.expanduser(value)))
        if self.jobs is not None and self.jobs < 0:
            raise UsageError(f"--jobs must be 0 (every core) or more, got {self.jobs}")
        for name in ("samples", "dynamic_dim", "memory_limit"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        Tolerances(self.rtol, self.atol)  # refuses a tolerance that is NaN, negative or infinite
        if not self.timeout > 0:
            raise UsageError(f"--timeout must be > 0 seconds, got {self.timeout}")
        check_choices(self)  # --runner, and a subclass's (--localize)
        if self.comparator is not None:
            COMPARATORS.lookup(self.comparator)

    @property
    def worker_memory_mb(self) -> int:
        """What one worker may use: --memory-limit, or the default that fits a GitHub runner."""
        return self.memory_limit or DEFAULT_MEMORY_LIMIT_MB

    @property
    def tolerances(self) -> Tolerances:
        return Tolerances(self.rtol, self.atol)


@dataclass(frozen=True)
class SweepOptions(RunOptions):
    models: tuple[str, ...] = option(
        (), help="paths or named sources", default_text=" ".join(DEFAULT_SOURCES), nargs="+", metavar="SRC"
    )
    configs: tuple[str, ...] = option(DEFAULT_CONFIGS, help="comma list of configs")
    passes: tuple[str, ...] = option(
        (), help="comma list: also run exactly this pass list (alone: with --configs nop)"
    )
    base_optimizer: str | None = option(
        None,
        help="the build a PR starts from (wheel, checkout, pip requirement or pkg.mod:function): each "
        "finding is re-run on it, and one that reproduces there is 'known', not new",
        metavar="SPEC",
    )
    baseline: str | None = option(None, help="YAML of known limitations, layered on the shipped default")
    previous: str | None = option(
        None,
        help="an earlier report.json: its findings that still show are 'known'; its timings balance "
        "shards; its verdicts are reused unless --reuse-from names another report or --no-reuse",
    )
    # verdicts of passing results are reused from this stored report, else from --previous's
    # (engine/reuse.py); off: every result judged
    reuse: bool = option(
        True, help="reuse stored verdicts, as --reuse-from says; --no-reuse: judge every result"
    )
    carry: bool = option(
        True,
        help="with --changed-since and a stored report (--reuse-from, --previous): a config whose "
        "passes the PR leaves unchanged is not called on a model where the stored report knows its "
        "result (the nop control's bytes, or its own judged there); --no-carry: call every config",
    )
    reuse_from: str | None = option(
        None,
        help="a stored report.json (a PR's base branch's, the previous night's) whose verdicts are "
        "reused: a result byte-identical to one judged there, on the same original and inputs, "
        "inputs, passes without a run, when the report was judged with the same settings and "
        "ditox-ci, onnx and ONNX Runtime versions",
        default_text="--previous's report",
        metavar="REPORT",
    )
    shard: Shard = option(help="I/N: run shard I (0-based) of N", default_factory=Shard)
    out: str = option("ditox-report", help="output folder")
    localize: str = option(
        "auto",
        help="auto: localize each failure's culprit passes, reduce the model and write a repro "
        "bundle to OUT/repro/<fingerprint>/; off: report failures as found",
        choices=LOCALIZE_MODES,
    )
    reduce_budget: float = option(
        30.0, help="seconds to spend shrinking each failing model, 0 for no reduction"
    )
    exercise_budget: float = option(
        60.0,
        help="with --base-optimizer: seconds for making models for the passes the head adds or "
        "changes (as `ditox-ci fuzz --passes` does), on shard 0; 0: off",
        metavar="SECONDS",
    )
    # the PR's base commit: what changed since it, in the working directory's checkout of
    # onnx/optimizer (triage/impact.py), is exercised and not carried
    changed_since: str | None = option(
        None,
        help="the PR's base commit (a sha, ref or tag, with ~N or ^N) in the working directory's "
        "checkout of onnx/optimizer: the passes whose source changed since it are exercised (with "
        "--base-optimizer), the others carried (--carry)",
        default_text="the pull_request event's base.sha",
        metavar="COMMIT",
    )
    max_skipped: float | None = option(
        None,
        help="gate (exit 1) when more than this share of the corpus was skipped, e.g. 0.2",
        default_text="no limit; a whole or merged sweep where no model ran always exits 4",
        metavar="FRACTION",
    )
    # the tiers of values bugs that gate (report.kinds.Tier)
    gate_tiers: tuple[str, ...] = option(
        TIERS,
        help=f"comma list of the tiers of values bugs (output-mismatch) that gate: {', '.join(TIERS)}; "
        "a bug of another tier is reported, and fails nothing",
        metavar="TIERS",
    )
    # a missed optimization (triage/missed.py) gates like a bug; off: it is a warning
    gate_missed: bool = option(
        False,
        help="a missed optimization (a result keeping more nodes than the --reuse-from or --previous "
        "report's) gates like a bug; off: a warning",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_skipped is not None and not 0 <= self.max_skipped <= 1:
            raise UsageError(f"--max-skipped must be a fraction from 0 to 1, got {self.max_skipped}")
        unknown = [tier for tier in self.gate_tiers if tier not in TIERS]
        if unknown or not self.gate_tiers:
            raise UsageError(
                f"--gate-tiers takes one or more of {', '.join(TIERS)}, got '{','.join(self.gate_tiers)}'"
            )
        for name in ("exercise_budget", "reduce_budget"):
            value = getattr(self, name)
            if value < 0:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 0 seconds, got {value}")


@dataclass(frozen=True)
class FuzzOptions(SweepOptions):
    """`ditox-ci fuzz`'s: a sweep's over the models it generates, from the same sources (flags,
    DITOX_<NAME>, the config file's `sweep:` section), with its own defaults."""

    out: str = option("ditox-fuzz", help="output folder: report.json, summary.md, coverage.svg, corpus/")
    configs: tuple[str, ...] = option(
        (),
        help="comma list of configs",
        default_text="default,nop and pass:<p> for each generated pass the optimizer has",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        from ditox_ci.fuzz import GENERATORS  # here: a sweep does not import the generators

        for name in self.passes:  # the passes models are generated for: each needs a generator
            GENERATORS.lookup(name)
        if self.seed < 0:
            raise UsageError(f"--seed must be 0 or more: it seeds the generators, got {self.seed}")
        if self.shard != Shard():  # a shard's report is judged by a merge, which a fuzz run has not
            raise UsageError(f"fuzz sweeps the models it makes in one job, so no shard; got {self.shard}")


@dataclass(frozen=True)
class ReduceOptions(RunOptions):
    """`ditox-ci reduce`: the model and its culprit passes are its arguments, the rest options."""

    passes: tuple[str, ...] = option((), help="comma-separated pass list, in order", required=True)
    fixed_point: bool = option(False, help="optimize to a fixed point", action="store_true")
    out: str = option("ditox-repro", help="bundles go to OUT/<fingerprint>/")
    budget: float = option(60.0, help="reduction time budget in seconds")
    samples: int = option(2, help="random input samples")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.passes:
            raise UsageError("--passes is empty; give the culprit passes, e.g. --passes fuse_bn_into_conv")
        if not self.budget > 0:
            raise UsageError(f"--budget must be > 0 seconds, got {self.budget}")


@dataclass(frozen=True)
class BisectOptions(RunOptions):
    """`ditox-ci bisect`: the findings are its arguments (bundles, or a report's), the rest options.

    Over releases unless `good` and `bad` name commits of `checkout`."""

    report: str | None = option(None, help="a sweep's report (report.json or its folder): bisect its bugs")
    fingerprints: tuple[str, ...] = option(
        (), help="only this finding of --report (repeatable)", flags=("--fingerprint",), action="append"
    )
    bundles_from: tuple[str, ...] = option(
        (),
        help="also look for --report's repro bundles here (the report a fixed bug was found in)",
        action="append",
        metavar="DIR",
    )
    good: str | None = option(
        None, help="a commit of --checkout without the bug (with --bad: bisect commits)"
    )
    bad: str | None = option(
        None, help="a commit of --checkout with the bug; older than --good: find the fix"
    )
    checkout: str = option(".", help="the optimizer's clone, with history")
    # the distribution whose releases are bisected; None: the optimizer's own
    package: str | None = option(
        None, help="the distribution whose releases to try", default_text="the optimizer's"
    )
    # releases from this folder of wheels only (pip --no-index --find-links); None: pip's index
    find_links: str | None = option(None, help="take releases from this folder of wheels only")
    # more for a flaky bug on a build that does not show it
    runs: int = option(3, help="runs of a repro on each build")
    budget: float = option(0.0, help="minutes for building and judging, 0 for no limit")
    # None: the checkout's GitHub origin
    repository_url: str | None = option(None, help="where commits link to", default_text="origin")
    # JSON: fingerprint and `since`, a list
    out_json: str | None = option(None, help="also write each bug's result to this JSON file")

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.good is None) != (self.bad is None):
            raise UsageError("--good and --bad go together: both name commits of --checkout, or neither")
        if self.runs < 1:
            raise UsageError(f"--runs must be 1 or more, got {self.runs}")

    @property
    def over_commits(self) -> bool:
        return self.good is not None


def worker_config(options: RunOptions, build: Installation, timeout_s: float | None = None) -> WorkerConfig:
    """The worker pool's configuration: the one place options become the engine's settings."""
    comparators = ("tensor",) + ((options.comparator,) if options.comparator else ())
    return WorkerConfig(
        optimizer=build.optimizer,
        optimizer_path=build.path,
        settings=EvalSettings(
            samples=options.samples,
            seed=options.seed,
            dynamic_dim=options.dynamic_dim,
            tolerances=options.tolerances,
            calibrate=options.calibrate,
            runner=options.runner,
            noise_floor=build.info.noise_floor,
            runtime_loads_input=build.info.runtime_loads_input,
        ),
        comparators=comparators,
        timeout_s=options.timeout if timeout_s is None else timeout_s,
        memory_limit_mb=options.worker_memory_mb,
        allowance_per_model_mb=allowance_per_model_mb(build.info.name),
        # a --memory-limit given is the user's cap on the whole pool (× --jobs); without one the
        # workers may share what the machine has free, less the parent's share: on 2 cores and
        # 24 GB, VGG-19 and zfnet512 then run side by side (the default sweep 237 s → about 200 s)
        budget_mb=0 if options.memory_limit else max(0, int(available_memory_mb()) - PARENT_SHARE_MB),
        screen_min_mb=SCREEN_MIN_MB if options.screen else None,
    )


@dataclass(frozen=True)
class SweepSetup:
    """One sweep, resolved once: its options, the optimizer under test and the base build (installed
    and loaded), the baseline and the previous report as read, and the worker pool's configuration
    (the timeout of one optimizer or runtime call, the memory budget read from the machine once)."""

    options: SweepOptions
    build: Installation
    baseline: Baseline
    previous: Report | None
    # time.monotonic() when it began: the report's wall time counts installing the optimizer
    started: float
    worker_config: WorkerConfig
    # --base-optimizer's build, installed (or found in the cache) with the one under test
    base: Installation | None = None
    # per model id, the verdicts a stored report lets the workers reuse (`reusable_verdicts`)
    reuse: Mapping[str, Reuse] = field(default_factory=dict)
    # the stored report (`--reuse-from`, else `--previous`) what the optimizer did is held against
    # (triage/missed.py), whatever it was judged with
    reference: Report | None = None
    # what the PR changed since `--changed-since` (triage/impact.py); None: not known
    impact: Impact | None = None

    @property
    def info(self) -> OptimizerInfo:
        return self.build.info


@contextlib.contextmanager
def sweep_setup(options: SweepOptions, log: Log, timeout_cap: float | None = None) -> Iterator[SweepSetup]:
    """Install and load the optimizer (and `--base-optimizer`'s build), read the baseline and the
    previous report, once; every error here is the user's to fix, and said before any model runs.
    `timeout_cap` bounds the timeout (a fuzz run's: one hung model must not take its budget)."""
    started = time.monotonic()
    # the builds and named sources go there: a folder that takes no file is the user's to fix, now
    prepare_out_dir(Path(options.cache_dir), "--cache-dir")
    warm_up()  # the workers' imports run beside the install and the planning
    with contextlib.ExitStack() as stack:
        with log.group("set up"):
            build = stack.enter_context(optimizer_build(options.optimizer, Path(options.cache_dir), log))
            info = build.info
            baseline = load_baseline(Path(options.baseline) if options.baseline else None, info.name)
            if options.baseline:  # an entry that could never match is said before the sweep, not after
                check_entry_passes(baseline, f"{info.name} {info.version}", info.passes)
            previous = read_report(Path(options.previous)) if options.previous else None
        base = None
        if options.base_optimizer:
            with log.group("base optimizer"):
                flag, cache = "--base-optimizer", Path(options.cache_dir)
                installing = optimizer_build(options.base_optimizer, cache, log, flag, build.optimizer)
                base = stack.enter_context(installing)
        timeout_s = options.timeout if timeout_cap is None else min(options.timeout, timeout_cap)
        config = worker_config(options, build, timeout_s)
        # a report of its own is checked against the schema: it decides what is not run
        reference = read_checked_report(Path(options.reuse_from)) if options.reuse_from else previous
        reuse = reusable_verdicts(options, reference, config, log)
        impact = impact_of(Path.cwd(), options.changed_since, info.passes, log)
        yield SweepSetup(options, build, baseline, previous, started, config, base, reuse, reference, impact)


def reusable_verdicts(
    options: SweepOptions, stored: Report | None, config: WorkerConfig, log: Log
) -> dict[str, Reuse]:
    """The verdicts a stored report (`--reuse-from`, else `--previous`) lets this sweep reuse, per
    model: none when it was judged by other settings or versions (`reuse.verdict_key`), which is
    said, or with `--no-reuse`."""
    source = options.reuse_from or options.previous
    if not options.reuse or stored is None:
        return {}
    if stored.stats.verdict_key != config.verdict_key:
        runtime = stored.environment.onnxruntime
        made_by = f"ditox-ci {stored.tool.version}, onnxruntime {runtime}"
        log.notice(
            f"not reusing verdicts from {source}: it was judged with other settings or versions "
            f"({made_by}, or none recorded); every result is judged here"
        )
        return {}
    every = stored.stats.configs
    table = reuse_table(
        (m.id, m.runner, m.verdicts, m.configs or every, m.effect)
        for m in stored.models
        if m.verdicts is not None
    )
    models = f"{len(table)} model{'' if len(table) == 1 else 's'}"
    log.info(f"reusing the verdicts of {models} from {source} (--no-reuse: judge all)")
    return table
