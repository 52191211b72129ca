"""report.json's header records: who wrote the report (`Tool`), the optimizer swept
(`OptimizerInfo`: what its adapter declares, and in a report the build), what judged the models
(`Environment`) and which shard of a sweep it is (`ShardOf`).

They are what `Report.tool`, `.optimizer`, `.environment` and `.shard` hold; their JSON appears
only where the report is read and written (`from_json`, `to_json`), and a key a reader may meet in
a report this version did not write (an environment's other versions) is kept as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TOOL_NAME = "ditox-ci"

OPAQUE_NOTE = (
    "opaque optimizer: it declares no pass lists (get_available_passes, "
    "get_fuse_and_elimination_passes), so only its default and the control (an empty pass list) "
    "run, and failures are not localized to passes"
)

# What the original's numerical noise floor is measured against: ONNX Runtime with all of its own
# graph optimizations on (a rewrite that keeps the meaning), or ONNX's reference implementation
# where ORT's optimizations are what is under test (with them, the floor would accept exactly the
# changes to judge).
NOISE_FLOORS = ("onnxruntime-optimized", "reference")


@dataclass(frozen=True)
class OptimizerInfo:
    """What an optimizer's adapter declares (optimizers/), and in a report the build swept."""

    name: str
    version: str
    passes: tuple[str, ...]
    default_passes: tuple[str, ...]
    # False: the passes are a set the optimizer orders itself (onnxsim); culprits are sets
    order_matters: bool = True
    fixed_point: str = "repeat: the pass list runs again until the model stops changing"
    opaque: bool = False
    # the pip distributions the optimizer imports, pinned in repro bundles
    distributions: tuple[str, ...] = ()
    noise_floor: str = NOISE_FLOORS[0]
    runtime_loads_input: bool = False
    # a pass list runs each pass once, in its order, on what the passes before it left (onnxoptimizer's
    # GeneralPassManager): a list that changes nothing holds no pass that would (engine/screen.py)
    sequential_passes: bool = False
    # (pass, why) for the passes that change no valid model here (the adapter's CANNOT_FIRE)
    cannot_fire: tuple[tuple[str, str], ...] = ()
    # in a report: the build swept (optimizers/install.py's Installation, as JSON); None: not said
    build: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "passes": list(self.passes),
            "default_passes": list(self.default_passes),
            "order_matters": self.order_matters,
            "fixed_point": self.fixed_point,
            "opaque": self.opaque,
            "distributions": list(self.distributions),
            "noise_floor": self.noise_floor,
        }
        if self.runtime_loads_input:  # additive: the report of any other optimizer reads as before
            data["runtime_loads_input"] = True
        if self.sequential_passes:  # additive, as the one before
            data["sequential_passes"] = True
        if self.cannot_fire:  # additive, as the one before
            data["cannot_fire"] = dict(self.cannot_fire)
        if self.build is not None:
            data["build"] = dict(self.build)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OptimizerInfo:
        return cls(
            name=str(data.get("name", "")),
            version=str(data.get("version", "")),
            passes=tuple(data.get("passes", ())),
            default_passes=tuple(data.get("default_passes", ())),
            order_matters=bool(data.get("order_matters", True)),
            fixed_point=str(data.get("fixed_point", cls.fixed_point)),
            opaque=bool(data.get("opaque", False)),
            distributions=tuple(data.get("distributions", ())),
            noise_floor=str(data.get("noise_floor", NOISE_FLOORS[0])),
            runtime_loads_input=bool(data.get("runtime_loads_input", False)),
            sequential_passes=bool(data.get("sequential_passes", False)),
            cannot_fire=tuple((str(name), str(why)) for name, why in data.get("cannot_fire", {}).items()),
            build=dict(data["build"]) if isinstance(data.get("build"), Mapping) else None,
        )

    def describe_passes(self, limit: int = 200) -> str:
        """The optimizer's own pass names, for an error message."""
        if self.opaque:
            return f"{self.name} is opaque: it has no pass names ({OPAQUE_NOTE})"
        shown = ", ".join(self.passes[:limit])
        more = f", … ({len(self.passes) - limit} more)" if len(self.passes) > limit else ""
        return f"{self.name} {self.version} has: {shown}{more}"


@dataclass(frozen=True)
class Tool:
    """The ditox-ci that wrote the report."""

    version: str
    name: str = TOOL_NAME

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tool:
        return cls(version=str(data.get("version", "")), name=str(data.get("name", TOOL_NAME)))


# the versions a sweep records, in report.json's order
ENVIRONMENT_KEYS = ("onnx", "onnxruntime", "python", "platform")


@dataclass(frozen=True)
class Environment:
    """What judged the models: onnx's and ONNX Runtime's versions, Python's, the platform; None
    where the report does not say. `other` holds what a writer added beyond them."""

    onnx: str | None = None
    onnxruntime: str | None = None
    python: str | None = None
    platform: str | None = None
    other: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, str]:
        said = {key: getattr(self, key) for key in ENVIRONMENT_KEYS if getattr(self, key) is not None}
        return said | dict(self.other)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Environment:
        known = {key: str(data[key]) for key in ENVIRONMENT_KEYS if key in data}
        other = {str(key): str(value) for key, value in data.items() if key not in ENVIRONMENT_KEYS}
        return cls(**known, other=other)


@dataclass(frozen=True)
class ShardOf:
    """Shard `index` (0-based) of `count`; a whole sweep, or a merged one, is 0 of 1."""

    index: int = 0
    count: int = 1

    @property
    def whole(self) -> bool:
        return self.count == 1

    def to_json(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShardOf:
        return cls(int(data.get("index", 0)), int(data.get("count", 1)))
