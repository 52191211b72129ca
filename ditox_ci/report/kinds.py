"""The finding kinds, listed once with everything that differs between them.

Each kind says what it means (docs/cli.md's "Finding kinds" table is `markdown_table()`, and a
test holds the two together), whether a new finding of it closes the gate, whether a baseline
entry that names no kind accepts it, and the text of its SARIF rule. report.json's schema lists
the same names in the same order (tested), `report/sarif.py` makes one rule per member and
`triage/baseline.py` reads the named-only kinds from here: adding a kind is one row. A finding's
status (`Status`) and a model's (`ModelStatus`) are listed here too. All three are `str` enums, the
types of the records' fields, equal to and written as their names in report.json.

The members are listed most severe first: a judged result shows a *set* of verdicts (an optimized
model may both be retyped and fail the checker), and the finding's kind, its headline, is the most
severe of them (`headline`), in this order: the optimizer crashing, hanging or raising; an invalid
model; ONNX Runtime refusing to load or run it; wrong values; a changed interface; a warning.

A values verdict (`output-mismatch`) also has a tier, how wrong it is in a maintainer's units
(`Tier`): a wrong result, a loss of precision, or a decision flipped on a tie.

`closes_gate()` is the one "does this close the gate" predicate: under `fail_on` new (the command
line's exit codes), a new finding with a verdict of a kind that gates (a values verdict only in a
tier of `gate_tiers`); under `any`, a known one too (FAIL_ON). A warning never gates, and neither
does a finding of any other status (fixed, or flaky: seen once and never again, so there is
nothing to reproduce it by).

    python -m ditox_ci.report.kinds    # the docs' tables, as docs/cli.md must hold them
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from enum import Enum
from typing import Any


class _Named(str, Enum):
    """A member is its name in report.json: equal to that string, written as it in JSON, YAML
    (`yaml_value`), templates and f-strings."""

    def __str__(self) -> str:
        return str(self._value_)

    def __format__(self, spec: str) -> str:
        return format(str(self._value_), spec)


class Status(_Named):
    """A finding's status against the baseline and the previous report (`report.model.STATUSES`
    lists them in this order): new and known may gate."""

    NEW = "new"
    KNOWN = "known"
    FIXED = "fixed"
    # seen once and never again when re-run (triage/reproduce.py): kept, listed apart, never gating
    FLAKY = "flaky"


NEW, KNOWN, FIXED, FLAKY = Status.NEW, Status.KNOWN, Status.FIXED, Status.FLAKY


class ModelStatus(_Named):
    """A model's status in a sweep: judged; skipped (the original itself cannot be tested); or
    ditox-ci's own code failed on it (preparing, judging, pinpointing, reducing): recorded against
    the model, the sweep goes on, and the run exits 70 once the report is written."""

    OK = "ok"
    SKIPPED = "skipped"
    INTERNAL_ERROR = "internal-error"


# `fail_on` (the Action's input, publish's flag): the statuses whose findings close the gate; the
# command line's exit codes are "new"'s
FAIL_ON: dict[str, tuple[Status, ...]] = {"new": (NEW,), "any": (NEW, KNOWN), "never": ()}


class FindingKind(_Named):
    """A kind's value is its name in report.json; the rest is its row of the table. A name this
    version does not know (a report from a newer writer) is a kind too, outside the table
    (`known` False): it gates and ranks first, so such a report cannot pass by it."""

    description: str
    sarif_rule: str
    gates: bool
    # a baseline entry that names no kind accepts findings of this kind
    accepted_by_default: bool

    def __new__(
        cls, name: str, description: str, sarif_rule: str, gates: bool = True, by_default: bool = True
    ) -> FindingKind:
        member = str.__new__(cls, name)
        member._value_ = name
        member.description = description
        member.sarif_rule = sarif_rule
        member.gates = gates
        member.accepted_by_default = by_default
        return member

    @classmethod
    def _missing_(cls, value: object) -> FindingKind | None:
        if not isinstance(value, str):
            return None
        unknown = str.__new__(cls, value)
        unknown._name_, unknown._value_ = value, value
        unknown.description = "a kind this version of ditox-ci does not know"
        unknown.sarif_rule = "A finding of a kind this version of ditox-ci does not know."
        unknown.gates, unknown.accepted_by_default = True, True
        return unknown

    @classmethod
    def named(cls, name: str) -> FindingKind:
        """The kind report.json calls `name` (one this version does not know, too)."""
        return cls(name)  # type: ignore[call-arg]  # the value lookup, not a new member's row

    @property
    def known(self) -> bool:
        """Whether the kind is one of the table's (not a newer writer's)."""
        return self._value_ in type(self)._value2member_map_

    # The optimizer itself failing is never a documented property of a pass: only a baseline entry
    # that names one of these kinds accepts it (by_default=False).
    OPTIMIZER_CRASH = (
        "optimizer-crash",
        "the optimizer killed its process (signal, e.g. SIGSEGV/SIGABRT); over its memory allowance "
        "it is a `warning` with `evidence.resource_limit`",
        "The optimizer crashed (signal or abort) on a valid model.",
        True,
        False,
    )
    OPTIMIZER_TIMEOUT = (
        "optimizer-timeout",
        "the optimizer did not return within `--timeout`",
        "The optimizer did not finish within the timeout.",
        True,
        False,
    )
    OPTIMIZER_ERROR = (
        "optimizer-error",
        "the optimizer raised (C++ exceptions arrive as Python exceptions) or returned a non-model",
        "The optimizer raised an error on a valid model.",
        True,
        False,
    )
    INVALID_MODEL = (
        "invalid-model",
        "the optimized model fails `onnx.checker.check_model(full_check=True)` (checked only when "
        "the original passes)",
        "The optimized model fails the ONNX checker.",
    )
    RUNTIME_LOAD_ERROR = (
        "runtime-load-error",
        "ONNX Runtime cannot create a session for the optimized model (it could for the original)",
        "ONNX Runtime cannot load the optimized model.",
    )
    RUNTIME_ERROR = (
        "runtime-error",
        "ONNX Runtime fails, crashes or hangs running the optimized model",
        "ONNX Runtime fails running the optimized model.",
    )
    OUTPUT_MISMATCH = (
        "output-mismatch",
        "an output differs beyond `--rtol`/`--atol` or, calibrated, beyond the model's own noise "
        "floor (NaN equals NaN at the same position), and, where the original runs in float64, its "
        "error against that float64 result is more than k times the original's own plus a floor "
        "(see The float64 reference below; `evidence.rule` says which rule judged: `fp64`, "
        "`noise-floor`, `tolerance` or `exact`; `evidence.fp64` why there was no float64 result). "
        "Evidence has `max_abs`, `max_rel` (each "
        "difference over its expected element's magnitude, never over less than the output's mean "
        "magnitude or `--atol`: finite where the values are), `error_scale`, `mismatch_fraction`, "
        "the worst index, sample and `output_index`, `fp64_error`, `original_fp64_error` and "
        "`error_ratio` under the float64 rule, `ties`/`unexplained` for integer outputs, or a task "
        "comparator's numbers; the finding's `tier` says how wrong it is. Sequence and optional "
        "outputs compare presence, length, each element's dtype and shape, then each element with "
        "the same tolerances (`element` names the worst). Every comparator runs (the tensor oracle, "
        "then `--comparator` and the model's own task comparator): with more than one, "
        "`evidence.comparators` holds each one's verdict and numbers and `evidence.comparator` "
        "names the first that failed",
        "The optimized model computes different values (a miscompilation).",
    )
    INTERFACE_CHANGE = (
        "interface-change",
        "graph inputs/outputs changed count, element type or static shape (compared by position: a "
        "pass may rename by design). The result is still checked, and loaded and run when it takes "
        "as many inputs (a retyped input fed its value cast, as the pass means callers to), and its "
        "values compared when its outputs kept their count, types and static shapes: what else it "
        "shows is a verdict of the finding too",
        "The optimized model's inputs or outputs differ from the original's.",
    )
    MISSED_OPTIMIZATION = (
        "missed-optimization",
        "the result keeps more nodes than the reference build's did on the same model and config "
        "(`--reuse-from`, else `--previous`): a pass that stopped firing or does less. "
        "`evidence.not_removed` names the op types the reference removed and this build keeps. A "
        "warning unless the sweep ran with `--gate-missed`",
        "The optimizer no longer rewrites what an earlier build rewrote.",
        False,
    )
    WARNING = (
        "warning",
        "not a failure: e.g. the optimizer introduced unused initializers, or needed more memory "
        "than its allowance (`evidence.resource_limit`). Never gates.",
        "A difference that does not fail the gate.",
        False,
    )

    # What differs per kind beyond its row, read by code and templates instead of its name:
    @property
    def crashes_process(self) -> bool:
        """Its repro dies by the optimizer's signal rather than exiting 1."""
        return self is FindingKind.OPTIMIZER_CRASH

    @property
    def hangs(self) -> bool:
        """Its repro never finishes: the optimizer does not return."""
        return self is FindingKind.OPTIMIZER_TIMEOUT

    @property
    def judged_by_checker(self) -> bool:
        """The checker (its full check) is what refuses the result, so a repro runs it."""
        return self is FindingKind.INVALID_MODEL

    @property
    def compares_builds(self) -> bool:
        """The verdict is against another build's result (a reference report, the base build), not
        against the original model."""
        return self is FindingKind.MISSED_OPTIMIZATION

    @property
    def compares_values(self) -> bool:
        """The verdict is on the outputs' values: a comparison with tolerances (and a tier)."""
        return self is FindingKind.OUTPUT_MISMATCH


FINDING_KINDS: tuple[FindingKind, ...] = tuple(FindingKind)
# what a baseline entry accepts only when it names them
NAMED_ONLY_KINDS: tuple[FindingKind, ...] = tuple(k for k in FindingKind if not k.accepted_by_default)
OPTIMIZER_CRASH = FindingKind.OPTIMIZER_CRASH
OPTIMIZER_TIMEOUT = FindingKind.OPTIMIZER_TIMEOUT
OPTIMIZER_ERROR = FindingKind.OPTIMIZER_ERROR
INVALID_MODEL = FindingKind.INVALID_MODEL
RUNTIME_LOAD_ERROR = FindingKind.RUNTIME_LOAD_ERROR
RUNTIME_ERROR = FindingKind.RUNTIME_ERROR
VALUES_KIND = FindingKind.OUTPUT_MISMATCH
INTERFACE_CHANGE = FindingKind.INTERFACE_CHANGE
MISSED_OPTIMIZATION = FindingKind.MISSED_OPTIMIZATION
WARNING = FindingKind.WARNING


def yaml_value(value: Any) -> Any:
    """`value` with every kind, status or tier in it as its plain name: yaml.safe_dump writes
    plain data only."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {yaml_value(key): yaml_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [yaml_value(item) for item in value]
    return value


def severity(kind: FindingKind) -> int:
    """A kind's rank, 0 the most severe (the order of FindingKind); a kind this version does not
    know ranks first, so a report from a newer writer cannot hide it behind a known one."""
    return FINDING_KINDS.index(kind) if kind.known else -1


def by_severity(kinds: Iterable[str]) -> tuple[FindingKind, ...]:
    """`kinds` once each, the most severe first: a finding's verdicts as report.json lists them."""
    return tuple(sorted(dict.fromkeys(map(FindingKind.named, kinds)), key=severity))


# a values error this share of the output's largest magnitude or more is a wrong result: beyond
# it, float16 inference of the same model would not hide it (its precision is 2**-10 ≈ 1e-3)
WRONG_RESULT_SCALE = 1e-3


class Tier(Enum):
    """How wrong a values verdict is: its value is its name in report.json, then what it means."""

    description: str

    def __new__(cls, name: str, description: str) -> Tier:
        member = object.__new__(cls)
        member._value_ = name
        member.description = description
        return member

    WRONG_RESULT = (
        "wrong-result",
        "a result a user would call wrong: a shape, type, length or presence differs; or a value is "
        f"off by at least {WRONG_RESULT_SCALE:g} of the output's largest magnitude; or a task "
        "comparator fails (top-k, boxes, text); or an integer or boolean output differs where no tie "
        "explains it",
    )
    PRECISION = (
        "precision",
        "float values worse than the original's own float32 error allows (against the float64 "
        f"reference, or beyond the noise floor where it cannot run), by less than {WRONG_RESULT_SCALE:g} "
        "of the output's largest magnitude",
    )
    TIES = (
        "ties",
        "only integer or boolean outputs differ (an ArgMax, a comparison), and only where the "
        "decision is a tie within float32's rounding: the float64 reference, or it with the inputs "
        "moved by a few units in the last place, decides the way the optimized model did",
    )


TIERS: tuple[str, ...] = tuple(tier.value for tier in Tier)


def kind_gates(kind: str) -> bool:
    """Whether a finding of `kind` is a failure (a new one closes the gate); a kind this version
    does not know is taken for one, so a report from a newer writer cannot pass by it."""
    return FindingKind.named(kind).gates


def verdicts_gate(
    verdicts: str | Iterable[str], tier: str | None = None, gate_tiers: Collection[str] = TIERS
) -> bool:
    """Whether a finding with these verdicts (or this one kind) is a failure: one of them is of a
    kind that gates, a values verdict only when its `tier` is one of `gate_tiers` (a tier this
    version does not know gates, as an unknown kind does). `gate_tiers` may also name a kind that
    gates only when asked (`missed-optimization`, with `--gate-missed`: `Report.gate_tiers`)."""
    verdicts = (verdicts,) if isinstance(verdicts, str) else verdicts
    return any(
        (kind_gates(kind) or kind in gate_tiers)
        and (kind != VALUES_KIND or tier is None or tier not in TIERS or tier in gate_tiers)
        for kind in verdicts
    )


def closes_gate(
    verdicts: str | Iterable[str],
    status: str,
    fail_on: str = "new",
    tier: str | None = None,
    gate_tiers: Collection[str] = TIERS,
) -> bool:
    """Whether a finding closes the gate (exit 1, a failing check, a failing Action job)."""
    return status in FAIL_ON[fail_on] and verdicts_gate(verdicts, tier, gate_tiers)


def markdown_table() -> str:
    """docs/cli.md's "Finding kinds" table, most severe first."""
    rows = [
        "| kind | gates | a baseline entry without `kind` accepts it | meaning |",
        "|---|---|---|---|",
    ]
    for kind in FindingKind:
        rows.append(
            f"| `{kind.value}` | {'yes' if kind.gates else 'no'} | "
            f"{'yes' if kind.accepted_by_default else 'no: only one that names it'} | {kind.description} |"
        )
    return "\n".join(rows) + "\n"


def tier_table() -> str:
    """docs/cli.md's "Tiers" table."""
    rows = ["| tier | meaning |", "|---|---|"]
    rows += [f"| `{tier.value}` | {tier.description} |" for tier in Tier]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
    print()
    print(tier_table(), end="")
