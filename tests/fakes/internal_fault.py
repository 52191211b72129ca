"""A planted bug in ditox-ci's own oracle, not in the optimizer: on a model named `ours*` this
optimizer rewrites as onnxoptimizer does, then makes the worker's next output comparison raise
KeyError once (the worker's own code failing on that model alone; the next model compares as
usual). What the sweep must do with it: record the model as an internal error, go on with the
others, write the report and exit 70 naming the model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx
import onnxoptimizer


def optimize(model: onnx.ModelProto, passes: Sequence[str], fixed_point: bool = False) -> onnx.ModelProto:
    if model.graph.name.startswith("ours") and set(passes) - {"nop"}:
        from ditox_ci.engine import evaluate

        real = evaluate._compare

        def broken(*args: Any, **kwargs: Any) -> Any:
            evaluate._compare = real  # type: ignore[assignment]
            raise KeyError("planted bug in the oracle")

        evaluate._compare = broken  # type: ignore[assignment]
    return onnxoptimizer.optimize(model, list(passes), fixed_point)


def get_available_passes() -> list[str]:
    return list(onnxoptimizer.get_available_passes())


def get_fuse_and_elimination_passes() -> list[str]:
    return list(onnxoptimizer.get_fuse_and_elimination_passes())
