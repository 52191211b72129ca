"""report.json's header records: who wrote the report (`Tool`), what it ran on (`Environment`) and
which shard of a sweep it is (`ShardOf`).

They are what `Report.tool`, `Report.environment` and `Report.shard` hold; their JSON appears only
where the report is read and written (`from_json`, `to_json`), and a key a reader may meet in a
report this version did not write (an environment's other versions) is kept as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TOOL_NAME = "ditox-ci"


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
