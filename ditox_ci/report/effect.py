"""What the optimizer did to a model: its size before, and per config what the result changed.

A model's size is its node count (subgraphs' nodes too), initializer count and serialized bytes,
with the count of each op type. A config's effect is its result's size against the original's:
nodes, initializers and bytes gained (negative: removed) and, per op type whose count changed,
by how much. report.json keeps per model the original's size and the effect of each config whose
result differs from the original (`ModelEffect`), but for those that did what the `nop` control
did (half the entries of a default sweep, 9,242 of 18,117 on 2026-11-29): what does not appear did
what the control did, or nothing where the control is not listed either.

    "effect": {"nodes": 120, "initializers": 40, "bytes": 91822,
               "configs": {"default": {"nodes": -20, "initializers": -10, "bytes": -2048,
                                       "ops": {"BatchNormalization": -10, "Identity": -10}}}}

The sweep adds them up per config (`Totals`: report.json's `stats.effect`, which a merge adds up
again from its models) and per model family (`by_family`), and a missed optimization
(`triage/missed.py`) is a config whose result keeps more nodes than a reference build's did on
the same model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ditox_ci.control import NOP


@dataclass(frozen=True)
class Size:
    """A model's size: nodes (subgraphs' too), initializers, serialized bytes, and op type counts
    (`domain::Op` outside the default domain)."""

    nodes: int
    initializers: int
    bytes: int
    ops: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Effect:
    """A result against its original: what it gained (negative: removed)."""

    nodes: int
    initializers: int
    bytes: int
    ops: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def between(cls, original: Size, result: Size) -> Effect:
        names = sorted(set(original.ops) | set(result.ops))
        ops = {op: result.ops.get(op, 0) - original.ops.get(op, 0) for op in names}
        return cls(
            result.nodes - original.nodes,
            result.initializers - original.initializers,
            result.bytes - original.bytes,
            {op: delta for op, delta in ops.items() if delta},
        )

    def applied_to(self, original: Size) -> Size:
        """The result's size, from the original's and this effect (`between`'s inverse): what a
        result carried from a stored report, not made here, measures (engine/reuse.py)."""
        ops = {op: original.ops.get(op, 0) + self.ops.get(op, 0) for op in set(original.ops) | set(self.ops)}
        return Size(
            original.nodes + self.nodes,
            original.initializers + self.initializers,
            original.bytes + self.bytes,
            {op: count for op, count in sorted(ops.items()) if count},
        )

    @property
    def ops_removed(self) -> dict[str, int]:
        """The op types whose count went down, with how many went."""
        return {op: -delta for op, delta in self.ops.items() if delta < 0}

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"nodes": self.nodes, "initializers": self.initializers, "bytes": self.bytes}
        if self.ops:
            data["ops"] = dict(self.ops)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Effect:
        ops = {str(op): int(delta) for op, delta in dict(data.get("ops") or {}).items()}
        return cls(int(data["nodes"]), int(data["initializers"]), int(data["bytes"]), ops)


NO_EFFECT = Effect(0, 0, 0)


@dataclass(frozen=True)
class ModelEffect:
    """The original's size (its op counts left out) and each changed config's effect."""

    nodes: int
    initializers: int
    bytes: int
    configs: Mapping[str, Effect] = field(default_factory=dict)

    def of(self, config: str) -> Effect:
        """`config`'s effect: one not listed did what the `nop` control did (nothing when the
        control is not listed either)."""
        return self.configs.get(config, self.configs.get(NOP, NO_EFFECT))

    def nodes_after(self, config: str) -> int:
        return self.nodes + self.of(config).nodes

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "initializers": self.initializers,
            "bytes": self.bytes,
            "configs": {label: effect.to_json() for label, effect in sorted(self.configs.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelEffect:
        configs = {str(label): Effect.from_json(e) for label, e in dict(data.get("configs") or {}).items()}
        return cls(int(data["nodes"]), int(data["initializers"]), int(data["bytes"]), configs)


@dataclass(frozen=True)
class Totals:
    """A config's effects added up over models: how many it changed, and what went in all."""

    models_changed: int = 0
    nodes: int = 0
    initializers: int = 0
    bytes: int = 0

    def plus(self, other: Totals) -> Totals:
        return Totals(
            self.models_changed + other.models_changed,
            self.nodes + other.nodes,
            self.initializers + other.initializers,
            self.bytes + other.bytes,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "models_changed": self.models_changed,
            "nodes": self.nodes,
            "initializers": self.initializers,
            "bytes": self.bytes,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Totals:
        return cls(*(int(data.get(key, 0)) for key in ("models_changed", "nodes", "initializers", "bytes")))


def effect_totals(effects: Iterable[ModelEffect]) -> dict[str, Totals]:
    """Per config, its effects added up over the models it did more to than the `nop` control
    did (`stats.effect`; the control's own over the models it changed)."""
    totals: dict[str, Totals] = {}
    for model in effects:
        for label, effect in model.configs.items():
            one = Totals(1, effect.nodes, effect.initializers, effect.bytes)
            totals[label] = totals.get(label, Totals()).plus(one)
    return dict(sorted(totals.items()))


# the config whose effect the summary gives per model family: the optimizer's own default set
WHOLE_OPTIMIZER = "default"


def by_family(effects: Iterable[tuple[str, ModelEffect]]) -> dict[str, dict[str, int]]:
    """Per model family, the models the default config ran on, their nodes, and the nodes left
    after it (`stats.effect_by_family`): the whole optimizer's node reduction."""
    totals: dict[str, dict[str, int]] = {}
    for family, effect in effects:
        one = totals.setdefault(family, {"models": 0, "nodes": 0, "after": 0})
        one["models"] += 1
        one["nodes"] += effect.nodes
        one["after"] += effect.nodes_after(WHOLE_OPTIMIZER)
    return dict(sorted(totals.items()))
