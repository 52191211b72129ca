"""What the GITHUB_* environment says about where a run is."""

import json
from pathlib import Path

from ditox_ci.github.context import pull_request_base


def test_a_pull_request_event_names_its_base_commit_and_others_none(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 3, "base": {"sha": "96ddf599"}}}))
    env = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event)}
    assert pull_request_base(env) == "96ddf599"
    assert pull_request_base({**env, "GITHUB_EVENT_NAME": "push"}) == ""
    assert pull_request_base({}) == ""
