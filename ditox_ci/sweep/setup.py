"""What a command that runs models is told, resolved once, and handed down whole.

`RunOptions` are the options every command that runs models through the worker pool takes (sweep,
fuzz, reduce); `SweepOptions` and `ReduceOptions` add their own. The options resolver
(`ditox_ci.options.resolve`) fills them; they check their values when built. A sweep is then set
up once (`sweep_setup`): the optimizer installed and loaded, the baseline and the previous report
read, the timeout decided. Nothing below re-reads a flag, re-loads a file or re-applies a default:
the sweep, pinpointing and `finish` take the `SweepSetup`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ditox_ci.compare import COMPARATORS
from ditox_ci.compare.tensor import Tolerances
from ditox_ci.corpus import default_cache_dir
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
from ditox_ci.optimizers import OptimizerInfo
from ditox_ci.optimizers.install import Installation, optimizer_build
from ditox_ci.pinpoint.pinpointer import LOCALIZE_MODES
from ditox_ci.report import Report, read_report
from ditox_ci.report.kinds import TIERS
from ditox_ci.report.outputs import prepare_out_dir
from ditox_ci.report.schema import read_checked_report
from ditox_ci.triage.baseline import Baseline, check_entry_passes, load_baseline

# what the sweep's own process keeps of the machine's free memory (the report, the results so far)
PARENT_SHARE_MB = 1024
# the options that name a file or folder
PATH_OPTIONS = (
    "out", "baseline", "previous", "reuse_from", "cache_dir", "report", "checkout", "find_links", "out_json"
)


@dataclass(frozen=True)
class RunOptions:
    """The options of every command that runs models in the worker pool."""

    optimizer: str = "onnxoptimizer"
    samples: int = 1
    seed: int = 0
    # None: by each output's dtype (float16/bfloat16 looser, float64 tighter than float32's 1e-3/1e-4)
    rtol: float | None = None
    atol: float | None = None
    timeout: float = 60.0
    # MiB a worker may use; None: DEFAULT_MEMORY_LIMIT_MB, and the workers may reserve together what
    # the machine has free when that is more than --jobs × the limit (see worker_config)
    memory_limit: int | None = None
    jobs: int = 0
    # also judge float outputs against each model's own measured noise floor
    calibrate: bool = True
    dynamic_dim: int = 2
    runner: str = "auto"
    comparator: str | None = None
    # screen a large model's single passes in lists before running them each (engine/screen.py)
    screen: bool = True
    cache_dir: str = field(default_factory=lambda: str(default_cache_dir(os.environ)))

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
        if self.runner not in RUNNER_CHOICES:
            raise UsageError(f"--runner must be one of {', '.join(RUNNER_CHOICES)}, got '{self.runner}'")
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
    models: tuple[str, ...] = ()
    configs: tuple[str, ...] = DEFAULT_CONFIGS
    passes: tuple[str, ...] = ()
    base_optimizer: str | None = None
    baseline: str | None = None
    previous: str | None = None
    # verdicts of passing results are reused from this stored report, else from --previous's
    # (engine/reuse.py); off: every result judged
    reuse: bool = True
    reuse_from: str | None = None
    shard: Shard = field(default_factory=Shard)
    out: str = "ditox-report"
    localize: str = "auto"
    reduce_budget: float = 30.0
    # with a base build: seconds for making models for the passes the head adds or changes (0: off)
    exercise_budget: float = 60.0
    # the PR's base commit: passes whose source changed since it, in the working directory's
    # checkout, are exercised too
    changed_since: str | None = None
    # gate (exit 1) when a larger share of the corpus than this was skipped; None: no such gate
    max_skipped: float | None = None
    # the tiers of values bugs that gate (report.kinds.Tier); every tier by default
    gate_tiers: tuple[str, ...] = TIERS
    # a missed optimization (triage/missed.py) gates like a bug; off: it is a warning
    gate_missed: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_skipped is not None and not 0 <= self.max_skipped <= 1:
            raise UsageError(f"--max-skipped must be a fraction from 0 to 1, got {self.max_skipped}")
        unknown = [tier for tier in self.gate_tiers if tier not in TIERS]
        if unknown or not self.gate_tiers:
            raise UsageError(
                f"--gate-tiers takes one or more of {', '.join(TIERS)}, got '{','.join(self.gate_tiers)}'"
            )
        if self.localize not in LOCALIZE_MODES:
            raise UsageError(f"--localize must be one of {', '.join(LOCALIZE_MODES)}, got '{self.localize}'")
        for name in ("exercise_budget", "reduce_budget"):
            value = getattr(self, name)
            if value < 0:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 0 seconds, got {value}")


@dataclass(frozen=True)
class FuzzOptions(SweepOptions):
    """`ditox-ci fuzz`'s: a sweep's over the models it generates, from the same sources (flags,
    DITOX_<NAME>, the config file's `sweep:` section), with its own defaults."""

    out: str = "ditox-fuzz"
    # empty: default, nop and `pass:<p>` for each pass models are generated for
    configs: tuple[str, ...] = ()

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

    passes: tuple[str, ...] = ()
    fixed_point: bool = False
    out: str = "ditox-repro"
    budget: float = 60.0
    samples: int = 2

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

    report: str | None = None
    fingerprints: tuple[str, ...] = ()
    bundles_from: tuple[str, ...] = ()
    good: str | None = None
    bad: str | None = None
    checkout: str = "."
    # the distribution whose releases are bisected; None: the optimizer's own
    package: str | None = None
    # releases from this folder of wheels only (pip --no-index --find-links); None: pip's index
    find_links: str | None = None
    # runs of a repro on each build (more for a flaky bug on a build that does not show it)
    runs: int = 3
    # minutes for building and judging; 0: no limit
    budget: float = 0.0
    # the web address commits link to; None: the checkout's GitHub origin
    repository_url: str | None = None
    # also write each bug's result here (JSON: fingerprint and `since`, a list)
    out_json: str | None = None

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
        yield SweepSetup(options, build, baseline, previous, started, config, base, reuse, reference)


def reusable_verdicts(
    options: SweepOptions, stored: Report | None, config: WorkerConfig, log: Log
) -> dict[str, Reuse]:
    """The verdicts a stored report (`--reuse-from`, else `--previous`) lets this sweep reuse, per
    model: none when it was judged by other settings or versions (`reuse.verdict_key`), which is
    said, or with `--no-reuse`."""
    source = options.reuse_from or options.previous
    if not options.reuse or stored is None:
        return {}
    if stored.stats.get("verdict_key") != config.verdict_key:
        runtime = stored.environment.get("onnxruntime")
        made_by = f"ditox-ci {stored.tool.get('version')}, onnxruntime {runtime}"
        log.notice(
            f"not reusing verdicts from {source}: it was judged with other settings or versions "
            f"({made_by}, or none recorded); every result is judged here"
        )
        return {}
    table = reuse_table((m.id, m.runner, m.verdicts) for m in stored.models if m.verdicts is not None)
    models = f"{len(table)} model{'' if len(table) == 1 else 's'}"
    log.info(f"reusing the verdicts of {models} from {source} (--no-reuse: judge all)")
    return table
