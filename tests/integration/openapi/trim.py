"""Regenerate `github-rest-subset.json` from GitHub's REST OpenAPI description.

    cd "$(mktemp -d)" && npm pack @octokit/openapi && tar xzf octokit-openapi-*.tgz
    python tests/integration/openapi/trim.py package/generated/api.github.com.deref.json

Keeps only the success responses of the operations the test server implements, and within each
schema only the required properties (recursively), without descriptions or examples: enough to
check every field GitHub promises, small enough to vendor.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OPERATIONS = {
    ("/repos/{owner}/{repo}/issues", "get"): "200",
    ("/repos/{owner}/{repo}/issues", "post"): "201",
    ("/repos/{owner}/{repo}/issues/{issue_number}", "get"): "200",
    ("/repos/{owner}/{repo}/issues/{issue_number}", "patch"): "200",
    ("/repos/{owner}/{repo}/issues/{issue_number}/comments", "get"): "200",
    ("/repos/{owner}/{repo}/issues/{issue_number}/comments", "post"): "201",
    ("/repos/{owner}/{repo}/issues/comments/{comment_id}", "patch"): "200",
    ("/repos/{owner}/{repo}/labels", "get"): "200",
    ("/repos/{owner}/{repo}/labels", "post"): "201",
    ("/repos/{owner}/{repo}/labels/{name}", "get"): "200",
    ("/repos/{owner}/{repo}/statuses/{sha}", "post"): "201",
    ("/repos/{owner}/{repo}/check-runs", "post"): "201",
    ("/repos/{owner}/{repo}/check-runs/{check_run_id}", "patch"): "200",
    ("/repos/{owner}/{repo}/commits/{ref}/check-runs", "get"): "200",
    ("/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations", "get"): "200",
    ("/user", "get"): "200",
}
_KEEP = ("type", "enum", "format", "nullable", "required", "items", "properties", "anyOf", "oneOf", "allOf")


def trim(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {k: v for k, v in schema.items() if k in _KEEP}
    if "properties" in out:
        required = set(schema.get("required", ()))
        out["properties"] = {k: trim(v) for k, v in schema["properties"].items() if k in required}
    if "items" in out:
        out["items"] = trim(out["items"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in out:
            out[key] = [trim(s) for s in out[key]]
    return out


def main(source: str) -> None:
    spec = json.loads(Path(source).read_text())
    subset = {"info": spec["info"], "paths": {}}
    for (path, method), status in OPERATIONS.items():
        response = spec["paths"][path][method]["responses"][status]
        schema = response["content"]["application/json"]["schema"]
        subset["paths"].setdefault(path, {})[method] = {status: trim(schema)}
    target = Path(__file__).with_name("github-rest-subset.json")
    target.write_text(json.dumps(subset, separators=(",", ":"), sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
