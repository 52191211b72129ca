"""The nop control, and the forms of a config's label, named and built once.

The control is the optimizer's own round trip of a model with no pass that rewrites: what it
already shows is the optimizer's plumbing, not any pass's bug. `NOP` is both the pass that does
nothing (onnxoptimizer's `nop`, also in onnxsim, which bundles onnxoptimizer) and the config that
runs the control, the `config` of its findings in report.json. The plan, nop folding,
localization, the shard planner, the base-build check and the SARIF locations all read it here.
"""

from collections.abc import Sequence

NOP = "nop"
# a config that runs one pass alone, `pass:<name>`, and the label of an explicit --passes list
SINGLE_PREFIX = "pass:"
PASSES_PREFIX = "passes:"
# the labels of optimizer calls that are no config of the report: a finding's culprit passes
# (reproduced, reduced), and the pass lists localization probes
CULPRIT_PREFIX = "culprit:"
PROBE_PREFIX = "probe:"


def single_pass_label(name: str) -> str:
    """The config that runs pass `name` alone: `pass:<name>`."""
    return f"{SINGLE_PREFIX}{name}"


def list_label(prefix: str, passes: Sequence[str]) -> str:
    """The label of a call of the pass list `passes`: `passes:a,b` (an explicit --passes, `ditox-ci
    reduce`'s and `bisect`'s calls), `culprit:a,b`, `probe:a,b`."""
    return prefix + ",".join(passes)


def sweep_flags(label: str) -> str:
    """The `ditox-ci sweep` flags that run the config labelled `label` again: a `--passes` list is
    not a config (its commas would split it), the rest are."""
    if label.startswith(PASSES_PREFIX):
        return f"--configs {NOP} --passes {label.removeprefix(PASSES_PREFIX)}"
    return f"--configs {label}"
