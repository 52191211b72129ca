"""The local server's answers validate against GitHub's REST OpenAPI description (vendored subset)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema

from tests.integration.github_fixtures import BUG_A, BUG_B, PR, SHA, github_env, report, run_publish, write
from tests.integration.github_server import ROUTES, GitHubServer

SUBSET = json.loads((Path(__file__).parents[1] / "openapi" / "github-rest-subset.json").read_text())


def json_schema(schema: Any) -> Any:
    """OpenAPI 3.0 `nullable: true` is not JSON Schema: turn it into a `null` alternative."""
    if isinstance(schema, list):
        return [json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: json_schema(v) for k, v in schema.items() if k not in ("nullable", "format")}
    if schema.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def openapi_path(route: str) -> str:
    pattern = route.split(" ", 1)[1]
    names = {"n": "{issue_number}", "id": "{comment_id}", "sha": "{sha}", "name": "{name}"}
    path = re.sub(r"\(\?P<o>[^)]*\)", "{owner}", pattern)
    path = re.sub(r"\(\?P<r>[^)]*\)", "{repo}", path)
    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: names[m.group(1)], path)
    path = path.replace("check-runs/{comment_id}", "check-runs/{check_run_id}")
    return path.replace("commits/{sha}", "commits/{ref}")


def test_every_response_the_publisher_saw_matches_the_openapi_schema(tmp_path: Path):
    with GitHubServer() as server:
        server.open_pull(PR, SHA)
        env = github_env(tmp_path, server.url)
        first = write(tmp_path, "r1.json", report(BUG_A, BUG_B))
        second = write(tmp_path, "r2.json", report(BUG_A))
        run_publish(["--report", str(first), "--file-issues"], env)
        run_publish(
            ["--report", str(second), "--previous", str(first), "--file-issues", "--close-fixed"], env
        )
        server.no_checks_tokens.add("write-token")
        server.repo.check_runs.clear()
        run_publish(["--report", str(second)], env)

        checked = set()
        for exchange in server.exchanges:
            if exchange.status >= 300:
                continue
            path = openapi_path(exchange.route)
            method = exchange.route.split(" ")[0].lower()
            operation = SUBSET["paths"].get(path, {}).get(method)
            assert operation is not None, f"{exchange.route} is not in the vendored subset"
            status, schema = next(iter(operation.items()))
            assert str(exchange.status) == status
            jsonschema.validate(exchange.body, json_schema(schema))
            checked.add((method, path))
        # Every operation the publisher uses was exercised and validated.
        assert len(checked) >= 12, sorted(checked)
        assert {r[2] for r in ROUTES} >= {"create_issue", "create_check_run", "create_status"}

