"""The nop control, named once.

The control is the optimizer's own round trip of a model with no pass that rewrites: what it
already shows is the optimizer's plumbing, not any pass's bug. `NOP` is both the pass that does
nothing (onnxoptimizer's `nop`, also in onnxsim, which bundles onnxoptimizer) and the config that
runs the control, the `config` of its findings in report.json. The plan, nop folding,
localization, the shard planner, the base-build check and the SARIF locations all read it here.
"""

NOP = "nop"
