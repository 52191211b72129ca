"""The finding kinds, listed once with everything that differs between them.

Each kind says what it means (docs/cli.md's "Finding kinds" table is `markdown_table()`, and a
test holds the two together), whether a new finding of it closes the gate, whether a baseline
entry that names no kind accepts it, and the text of its SARIF rule. report.json's schema lists
the same names in the same order (tested), `report/sarif.py` makes one rule per member and
`triage/baseline.py` reads the named-only kinds from here: adding a kind is one row.

`closes_gate()` is the one "does this close the gate" predicate: under `fail_on` new (the command
line's exit codes), a new finding of a kind that gates; under `any`, a known one too (FAIL_ON). A
warning never gates, and neither does a finding of any other status (fixed, or flaky: seen once
and never again, so there is nothing to reproduce it by).

    python -m ditox_ci.report.kinds    # the docs' table, as docs/cli.md must hold it
"""

from __future__ import annotations

from enum import Enum

# the statuses that may gate; `report.model.STATUSES` lists them all
NEW = "new"
KNOWN = "known"
# `fail_on` (the Action's input, publish's flag): the statuses whose findings close the gate; the
# command line's exit codes are "new"'s
FAIL_ON: dict[str, tuple[str, ...]] = {"new": (NEW,), "any": (NEW, KNOWN), "never": ()}


class FindingKind(Enum):
    """A kind's value is its name in report.json; the rest is its row of the table."""

    description: str
    sarif_rule: str
    gates: bool
    # a baseline entry that names no kind accepts findings of this kind
    accepted_by_default: bool

    def __new__(
        cls, name: str, description: str, sarif_rule: str, gates: bool = True, by_default: bool = True
    ) -> FindingKind:
        member = object.__new__(cls)
        member._value_ = name
        member.description = description
        member.sarif_rule = sarif_rule
        member.gates = gates
        member.accepted_by_default = by_default
        return member

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
    INTERFACE_CHANGE = (
        "interface-change",
        "graph inputs/outputs changed count, element type or static shape (compared by position: a "
        "pass may rename by design). When the result also fails the checker it is still the "
        "interface change, with the checker's verdict in `evidence.checker`: a finding's kind comes "
        "from its own result, never from whether the `nop` control failed (on a model whose control "
        "failed too, `evidence.control` says how, as context)",
        "The optimized model's inputs or outputs differ from the original's.",
    )
    OUTPUT_MISMATCH = (
        "output-mismatch",
        "an output differs beyond `--rtol`/`--atol` (NaN equals NaN at the same position); evidence "
        "has `max_abs`, `max_rel` (each difference over its expected element's magnitude, never "
        "over less than the output's mean magnitude or `--atol`: finite where the values are), "
        "`error_scale`, `mismatch_fraction`, the worst index, sample and `output_index`, or a task "
        "comparator's numbers. Sequence and optional outputs compare presence, length, each "
        "element's dtype and shape, then each element with the same tolerances (`element` names "
        "the worst). Every comparator runs (the tensor oracle, then `--comparator` and the model's "
        "own task comparator): with more than one, `evidence.comparators` holds each one's verdict "
        "and numbers and `evidence.comparator` names the first that failed, which gated",
        "The optimized model computes different values (a miscompilation).",
    )
    WARNING = (
        "warning",
        "not a failure: e.g. the optimizer introduced unused initializers, or needed more memory "
        "than its allowance (`evidence.resource_limit`). Never gates.",
        "A difference that does not fail the gate.",
        False,
    )


BY_NAME: dict[str, FindingKind] = {kind.value: kind for kind in FindingKind}
FINDING_KINDS: tuple[str, ...] = tuple(BY_NAME)
# what a baseline entry accepts only when it names them
NAMED_ONLY_KINDS: tuple[str, ...] = tuple(kind.value for kind in FindingKind if not kind.accepted_by_default)


def kind_gates(kind: str) -> bool:
    """Whether a finding of `kind` is a failure (a new one closes the gate); a kind this version
    does not know is taken for one, so a report from a newer writer cannot pass by it."""
    known = BY_NAME.get(kind)
    return known is None or known.gates


def closes_gate(kind: str, status: str, fail_on: str = "new") -> bool:
    """Whether a finding closes the gate (exit 1, a failing check, a failing Action job)."""
    return status in FAIL_ON[fail_on] and kind_gates(kind)


def markdown_table() -> str:
    """docs/cli.md's "Finding kinds" table."""
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


if __name__ == "__main__":
    print(markdown_table(), end="")
