"""`corpus list` rows say which inputs a model runs on, in make_feeds' order of precedence."""

from __future__ import annotations

from pathlib import Path

from ditox_ci.cli.corpus import _row
from ditox_ci.corpus import ModelRef


def test_inputs_column_follows_make_feeds_precedence(tmp_path: Path) -> None:
    data_set = tmp_path / "test_data_set_0"
    data_set.mkdir()
    (data_set / "input_0.pb").write_bytes(b"")
    plain = ModelRef(id="a", source="s", path="a.onnx")
    recorded = ModelRef(id="b", source="s", path="b.onnx", inputs_dir=str(tmp_path))
    generated = ModelRef(
        id="c", source="s", path="c.onnx", inputs_dir=str(tmp_path), meta={"inputs": "tokens"}
    )
    assert _row(plain) == {"id": "a", "source": "s", "inputs": "random", "path": "a.onnx"}
    assert _row(recorded)["inputs"] == "recorded"
    assert _row(generated)["inputs"] == "generator:tokens"
