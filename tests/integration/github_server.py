"""A stateful local GitHub REST server for the publisher tests (stdlib http.server, one thread).

It speaks enough of the real API for PyGithub: issues (+ comments, labels, pagination with Link
headers), labels, commit statuses, check runs, pulls and repos. Faults are injected per request
pattern: 500s, primary rate limit (403 + X-RateLimit-Reset), 429 + Retry-After, dropped
connections before or after the request took effect, and read-only tokens as fork PRs get them.
Every JSON response is kept in `responses` so tests can validate it against GitHub's OpenAPI.
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

NOW = "2025-01-01T00:00:00Z"
READ_ONLY_MESSAGE = "Resource not accessible by integration"


@dataclass
class Fault:
    method: str
    path: str  # regex searched in the request path
    # "500" | "403" | "rate-limit" | "429" | "secondary" | "drop" | "drop-after" | "forbidden" |
    # "label-race" (another run creates the label just before this request)
    mode: str
    times: int = 1


@dataclass
class Exchange:
    method: str
    path: str
    status: int
    authorization: str
    route: str = ""
    body: Any = None  # the JSON answered, as sent: without the server's private `_` keys


@dataclass
class RepoState:
    owner: str
    name: str
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    # Actions: runs by workflow file name, newest last; artifacts by run id; zip bytes by artifact id
    workflow_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    artifacts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    blobs: dict[int, bytes] = field(default_factory=dict)


class GitHubServer:
    def __init__(self, repository: str = "octo/optimizer", per_page_max: int = 100) -> None:
        owner, name = repository.split("/")
        self.repo = RepoState(owner, name)
        self.tokens: dict[str, str] = {
            "write-token": "write",
            "read-token": "read",
            "pat-token": "write",
            "other-token": "write",
        }
        # who each token is: the Actions token is an app installation (GET /user is refused for
        # it, as on GitHub); a personal token is a user
        self.identities: dict[str, str] = {
            "write-token": "github-actions[bot]",
            "read-token": "github-actions[bot]",
            "pat-token": "nightly-bot",
            "other-token": "maintainer",
        }
        self.no_checks_tokens: set[str] = set()
        self.no_statuses_tokens: set[str] = set()
        self.faults: list[Fault] = []
        self.exchanges: list[Exchange] = []
        self.per_page_max = per_page_max
        self._ids = iter(range(1000, 10**9))
        self._lock = threading.RLock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> GitHubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def inject(self, method: str, path: str, mode: str, times: int = 1) -> None:
        with self._lock:
            self.faults.append(Fault(method, path, mode, times))

    # -- seeding helpers for tests ------------------------------------------------------------

    def open_pull(
        self, number: int, head_sha: str, head_repository: str = "", head_ref: str = "feature"
    ) -> None:
        """An open PR at `head_sha`, from `head_repository` (a fork) or this repository."""
        issue = self._new_issue(f"PR {number}", "a pull request", [], number=number)
        issue["_head_repo"] = head_repository or f"{self.repo.owner}/{self.repo.name}"
        issue["_head_ref"] = head_ref
        issue["pull_request"] = {
            "url": f"{self._api()}/pulls/{number}",
            "html_url": "",
            "diff_url": "",
            "patch_url": "",
        }
        issue["_head_sha"] = head_sha

    def add_workflow_run(
        self,
        workflow: str,
        conclusion: str = "success",
        branch: str = "main",
        artifacts: dict[str, bytes] | None = None,
        expired: bool = False,
        event: str = "schedule",
        head_repository: str = "",
        archive_origin: str = "",
    ) -> int:
        """A finished run of `workflow` with artifacts (name → zip bytes); returns its id. A run
        of a fork's pull request names the fork as `head_repository`; `archive_origin` replaces
        the API's origin in the artifacts' download URLs (a lying or compromised API)."""
        run_id = next(self._ids)
        head = head_repository or f"{self.repo.owner}/{self.repo.name}"
        self.repo.workflow_runs.setdefault(workflow, []).append(
            {
                "id": run_id,
                "name": workflow,
                "event": event,
                "head_repository": {"id": 1, "full_name": head, "name": head.partition("/")[2]},
                "head_branch": branch,
                "status": "completed",
                "conclusion": conclusion,
                "url": f"{self._api()}/actions/runs/{run_id}",
                "html_url": f"https://github.com/{self.repo.owner}/{self.repo.name}/actions/runs/{run_id}",
                "artifacts_url": f"{self._api()}/actions/runs/{run_id}/artifacts",
            }
        )
        for name, data in (artifacts or {}).items():
            artifact_id = next(self._ids)
            self.repo.blobs[artifact_id] = data
            self.repo.artifacts.setdefault(run_id, []).append(
                {
                    "id": artifact_id,
                    "name": name,
                    "size_in_bytes": len(data),
                    "expired": expired,
                    "url": f"{self._api()}/actions/artifacts/{artifact_id}",
                    "archive_download_url": f"{archive_origin or self.url}"
                    f"/repos/{self.repo.owner}/{self.repo.name}/actions/artifacts/{artifact_id}/zip",
                }
            )
        return run_id

    def bot_issues(self) -> list[dict[str, Any]]:
        return [i for i in self.repo.issues.values() if "pull_request" not in i]

    def comments_on(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.repo.comments.values() if c["_issue"] == number]

    def comment_as(self, login: str, number: int, body: str) -> dict[str, Any]:
        """A comment someone else wrote (quoting the bot's marker, say)."""
        comment = self._new_comment(number, body)
        comment["user"] = self.user(login)
        return comment

    def issue_as(self, login: str, title: str, body: str, labels: list[str]) -> dict[str, Any]:
        issue = self._new_issue(title, body, labels)
        issue["user"] = self.user(login)
        return issue

    def writes(self) -> list[Exchange]:
        return [x for x in self.exchanges if x.method != "GET" and x.status < 400]

    # -- object builders ----------------------------------------------------------------------

    def _api(self) -> str:
        return f"{self.url}/repos/{self.repo.owner}/{self.repo.name}"

    def user(self, login: str = "github-actions[bot]") -> dict[str, Any]:
        base = f"{self.url}/users/{login}"
        return {
            "login": login,
            "id": 41898282 if login == "github-actions[bot]" else 1000 + sum(map(ord, login)),
            "node_id": "MDM6Qm90NDE4OTgyODI=",
            "avatar_url": "https://avatars.githubusercontent.com/in/15368",
            "gravatar_id": "",
            "url": base,
            "html_url": f"https://github.com/{login}",
            "type": "Bot" if login.endswith("[bot]") else "User",
            "site_admin": False,
            "followers_url": f"{base}/followers",
            "following_url": f"{base}/following{{/other_user}}",
            "gists_url": f"{base}/gists{{/gist_id}}",
            "starred_url": f"{base}/starred{{/owner}}",
            "subscriptions_url": f"{base}/subscriptions",
            "organizations_url": f"{base}/orgs",
            "repos_url": f"{base}/repos",
            "events_url": f"{base}/events{{/privacy}}",
            "received_events_url": f"{base}/received_events",
        }

    def _label(self, name: str, color: str = "ededed", description: str | None = None) -> dict:
        return {
            "id": next(self._ids),
            "node_id": f"LA_{name}",
            "name": name,
            "color": color,
            "description": description,
            "default": False,
            "url": f"{self._api()}/labels/{quote(name)}",
        }

    def _new_issue(
        self, title: str, body: str | None, labels: list[str], number: int = 0, login: str = ""
    ):
        number = number or max([0, *self.repo.issues]) + 1
        for name in labels:
            self.repo.labels.setdefault(name, self._label(name))
        url = f"{self._api()}/issues/{number}"
        issue = {
            "id": next(self._ids),
            "node_id": f"I_{number}",
            "number": number,
            "url": url,
            "repository_url": self._api(),
            "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "html_url": f"https://github.com/{self.repo.owner}/{self.repo.name}/issues/{number}",
            "title": title,
            "body": body,
            "user": self.user(login or "github-actions[bot]"),
            "state": "open",
            "state_reason": None,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": 0,
            "closed_at": None,
            "created_at": NOW,
            "updated_at": NOW,
            "author_association": "NONE",
            "labels": [self.repo.labels[n] for n in labels],
        }
        self.repo.issues[number] = issue
        return issue

    def _new_comment(self, number: int, body: str, login: str = "") -> dict[str, Any]:
        cid = next(self._ids)
        comment = {
            "id": cid,
            "node_id": f"IC_{cid}",
            "url": f"{self._api()}/issues/comments/{cid}",
            "html_url": f"https://github.com/{self.repo.owner}/{self.repo.name}/issues/"
            f"{number}#issuecomment-{cid}",
            "issue_url": f"{self._api()}/issues/{number}",
            "body": body,
            "user": self.user(login or "github-actions[bot]"),
            "created_at": NOW,
            "updated_at": NOW,
            "author_association": "NONE",
            "_issue": number,
        }
        self.repo.comments[cid] = comment
        self.repo.issues[number]["comments"] += 1
        return comment

    def _check_run(self, data: dict[str, Any]) -> dict[str, Any]:
        rid = next(self._ids)
        app = {
            "id": 15368,
            "node_id": "MDM6QXBwMTUzNjg=",
            "owner": self.user("github"),
            "name": "GitHub Actions",
            "description": "",
            "external_url": "https://github.com",
            "html_url": "https://github.com/apps/github-actions",
            "created_at": NOW,
            "updated_at": NOW,
            "permissions": {"checks": "write"},
            "events": [],
        }
        run = {
            "id": rid,
            "node_id": f"CR_{rid}",
            "head_sha": data["head_sha"],
            "name": data["name"],
            "url": f"{self._api()}/check-runs/{rid}",
            "html_url": f"https://github.com/x/runs/{rid}",
            "details_url": data.get("details_url"),
            "status": data.get("status", "queued"),
            "conclusion": data.get("conclusion"),
            "started_at": NOW,
            "completed_at": NOW if data.get("status") == "completed" else None,
            "external_id": data.get("external_id"),
            "check_suite": {"id": 1},
            "app": app,
            "pull_requests": [],
            "output": {
                "title": None,
                "summary": None,
                "text": None,
                "annotations_count": 0,
                "annotations_url": f"{self._api()}/check-runs/{rid}/annotations",
            },
            "_annotations": [],
        }
        self.repo.check_runs[rid] = run
        self._update_output(run, data.get("output"))
        return run

    @staticmethod
    def _update_output(run: dict[str, Any], output: dict[str, Any] | None) -> None:
        if not output:
            return
        for key in ("title", "summary", "text"):
            if key in output:
                run["output"][key] = output[key]
        annotations = output.get("annotations") or []
        if len(annotations) > 50:
            raise _ApiError(422, "Only 50 annotations are allowed per request")
        run["_annotations"].extend(annotations)
        run["output"]["annotations_count"] = len(run["_annotations"])


class _ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def uploaded_artifact(folder: Path) -> bytes:
    """What upload-artifact stores of a folder: the zip `add_workflow_run` takes as an artifact."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            archive.write(path, path.relative_to(folder))
    return buffer.getvalue()


def _public(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _public(v) for k, v in obj.items() if not k.startswith("_")}
    if isinstance(obj, list):
        return [_public(v) for v in obj]
    return obj


ROUTES: list[tuple[str, str, str]] = [
    ("GET", r"/user", "authenticated_user"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)", "repo"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues", "list_issues"),
    ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues", "create_issue"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/(?P<n>\d+)", "get_issue"),
    ("PATCH", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/(?P<n>\d+)", "edit_issue"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/(?P<n>\d+)/comments", "list_comments"),
    ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/(?P<n>\d+)/comments", "create_comment"),
    ("PATCH", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/comments/(?P<id>\d+)", "edit_comment"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/labels", "list_labels"),
    ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/labels", "create_label"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/labels/(?P<name>[^/]+)", "get_label"),
    ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/statuses/(?P<sha>\w+)", "create_status"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/commits/(?P<sha>\w+)/statuses", "list_statuses"),
    ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/check-runs", "create_check_run"),
    ("PATCH", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/check-runs/(?P<id>\d+)", "edit_check_run"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/commits/(?P<sha>\w+)/check-runs", "list_check_runs"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/check-runs/(?P<id>\d+)/annotations", "list_annotations"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/(?P<n>\d+)", "get_pull"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls", "list_pulls"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/actions/workflows/(?P<wf>[^/]+)", "get_workflow"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/actions/workflows/(?P<wf>[^/]+)/runs", "list_workflow_runs"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/actions/runs/(?P<run>\d+)/artifacts", "list_run_artifacts"),
    ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/actions/artifacts/(?P<id>\d+)/zip", "download_artifact"),
]


def _handler_for(server: GitHubServer) -> type[BaseHTTPRequestHandler]:
    def _pull(issue: dict[str, Any]) -> dict[str, Any]:
        head_owner = issue["_head_repo"].split("/")[0]
        return {
            "id": issue["id"],
            "number": issue["number"],
            "state": issue["state"],
            "title": issue["title"],
            "url": f"{server._api()}/pulls/{issue['number']}",
            "head": {
                "sha": issue["_head_sha"],
                "ref": issue["_head_ref"],
                "repo": {"full_name": issue["_head_repo"], "owner": {"login": head_owner}},
            },
            "base": {"sha": "0" * 40, "ref": "main"},
        }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            if parts.path.startswith("/_blobs/"):  # artifact storage: no token, bytes not JSON
                self._blob(int(parts.path.rsplit("/", 1)[1]))
                return
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            auth = self.headers.get("Authorization", "")
            fault = self._take_fault(method, parts.path)
            if fault == "drop":
                self._drop()
                return
            try:
                if fault == "500":
                    raise _ApiError(500, "Server Error")
                if fault == "rate-limit":
                    reset = str(int(time.time()) + 1)
                    raise _ApiError(
                        403,
                        "API rate limit exceeded for installation ID 1.",
                        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
                    )
                if fault == "403":  # a token without the permission the request needs
                    raise _ApiError(403, "Resource not accessible by integration")
                if fault == "429":
                    raise _ApiError(429, "Too many requests", {"Retry-After": "1"})
                if fault == "secondary":  # GitHub sends no Retry-After with some of these
                    raise _ApiError(403, "You have exceeded a secondary rate limit. Please wait.")
                status, payload, headers, route = self._dispatch(method, parts, raw, auth, fault)
            except _ApiError as exc:
                status, headers, route = exc.status, exc.headers, ""
                payload = {"message": exc.message, "documentation_url": "https://docs.github.com/rest"}
            answer = _public(payload)
            with server._lock:
                server.exchanges.append(Exchange(method, parts.path, status, auth, route, answer))
            if fault == "drop-after":
                self._drop()
                return
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _blob(self, artifact_id: int) -> None:
            data = server.repo.blobs.get(artifact_id)
            self.send_response(200 if data is not None else 404)
            self.send_header("Content-Type", "application/zip")
            self.send_header("Content-Length", str(len(data or b"")))
            self.end_headers()
            self.wfile.write(data or b"")

        def _drop(self) -> None:
            self.close_connection = True
            self.connection.close()

        def _take_fault(self, method: str, path: str) -> str | None:
            with server._lock:
                for fault in server.faults:
                    if fault.times > 0 and fault.method == method and re.search(fault.path, path):
                        fault.times -= 1
                        return fault.mode
            return None

        def _dispatch(self, method, parts, raw, auth, fault):
            token = auth.split(" ", 1)[1] if " " in auth else ""
            if token not in server.tokens:
                raise _ApiError(401, "Bad credentials")
            read_only = server.tokens[token] == "read" or fault == "forbidden"
            if method != "GET" and read_only:
                raise _ApiError(403, READ_ONLY_MESSAGE)
            self.login = server.identities.get(token, "github-actions[bot]")
            for route_method, pattern, name in ROUTES:
                match = re.fullmatch(pattern, parts.path)
                if route_method == method and match:
                    args = {k: unquote(v) for k, v in match.groupdict().items()}
                    if "o" in args and (args["o"], args["r"]) != (server.repo.owner, server.repo.name):
                        raise _ApiError(404, "Not Found")
                    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                    body = json.loads(raw) if raw else {}
                    if name == "create_check_run" and token in server.no_checks_tokens:
                        raise _ApiError(403, READ_ONLY_MESSAGE)
                    if name == "create_status" and token in server.no_statuses_tokens:
                        raise _ApiError(403, READ_ONLY_MESSAGE)
                    if name == "create_label" and fault == "label-race":
                        server.repo.labels.setdefault(body["name"], server._label(body["name"]))
                    with server._lock:
                        status, payload, headers = getattr(self, name)(args, query, body)
                    return status, payload, headers, f"{route_method} {pattern}"
            raise _ApiError(404, "Not Found")

        def _page(self, items: list[Any], query: dict[str, str], path: str):
            per_page = min(int(query.get("per_page", 30)), server.per_page_max)
            page = int(query.get("page", 1))
            last = max(1, -(-len(items) // per_page))
            chunk = items[(page - 1) * per_page : page * per_page]
            links = []
            base = {k: v for k, v in query.items() if k != "page"}

            def link(number: int, rel: str) -> str:
                params = "&".join(f"{k}={quote(v)}" for k, v in {**base, "page": str(number)}.items())
                return f'<{server.url}{path}?{params}>; rel="{rel}"'

            if page < last:
                links += [link(page + 1, "next"), link(last, "last")]
            if page > 1:
                links += [link(1, "first"), link(page - 1, "prev")]
            return 200, chunk, ({"Link": ", ".join(links)} if links else {})

        # -- routes ---------------------------------------------------------------------------

        def authenticated_user(self, args, query, body):
            if self.login.endswith("[bot]"):  # an installation token is not a user
                raise _ApiError(403, READ_ONLY_MESSAGE)
            profile = dict.fromkeys(("name", "company", "blog", "location", "email", "hireable", "bio"))
            counts = dict.fromkeys(("public_repos", "public_gists", "followers", "following"), 0)
            dates = {"created_at": NOW, "updated_at": NOW}
            return 200, {**server.user(self.login), **profile, **counts, **dates}, {}

        def repo(self, args, query, body):
            return (
                200,
                {
                    "id": 1,
                    "name": server.repo.name,
                    "full_name": f"{server.repo.owner}/{server.repo.name}",
                    "owner": server.user(server.repo.owner),
                    "private": False,
                    "url": server._api(),
                    "default_branch": "main",
                },
                {},
            )

        def list_issues(self, args, query, body):
            issues = sorted(server.repo.issues.values(), key=lambda i: i["number"])
            state = query.get("state", "open")
            if state != "all":
                issues = [i for i in issues if i["state"] == state]
            wanted = [n for n in query.get("labels", "").split(",") if n]
            issues = [i for i in issues if set(wanted) <= {lb["name"] for lb in i["labels"]}]
            if "creator" in query:
                issues = [i for i in issues if i["user"]["login"] == query["creator"]]
            if query.get("direction", "desc") == "desc":
                issues.reverse()
            return self._page(issues, query, urlsplit(self.path).path)

        def create_issue(self, args, query, body):
            if not body.get("title"):
                raise _ApiError(422, "Validation Failed")
            if len(body.get("body") or "") > 65536:
                raise _ApiError(422, "body is too long (maximum is 65536 characters)")
            issue = server._new_issue(
                body["title"], body.get("body"), body.get("labels", []), login=self.login
            )
            return 201, issue, {}

        def get_issue(self, args, query, body):
            issue = server.repo.issues.get(int(args["n"]))
            if issue is None:
                raise _ApiError(404, "Not Found")
            return 200, issue, {}

        def edit_issue(self, args, query, body):
            issue = self.get_issue(args, query, body)[1]
            for key in ("title", "body"):
                if key in body:
                    issue[key] = body[key]
            if "state" in body:
                issue["state"] = body["state"]
                closed = body["state"] == "closed"
                issue["closed_at"] = NOW if closed else None
                issue["state_reason"] = body.get("state_reason", "completed") if closed else "reopened"
            return 200, issue, {}

        def list_comments(self, args, query, body):
            self.get_issue(args, query, body)
            return self._page(server.comments_on(int(args["n"])), query, urlsplit(self.path).path)

        def create_comment(self, args, query, body):
            self.get_issue(args, query, body)
            if len(body.get("body") or "") > 65536:
                raise _ApiError(422, "body is too long (maximum is 65536 characters)")
            return 201, server._new_comment(int(args["n"]), body["body"], login=self.login), {}

        def edit_comment(self, args, query, body):
            comment = server.repo.comments.get(int(args["id"]))
            if comment is None:
                raise _ApiError(404, "Not Found")
            comment["body"] = body["body"]
            return 200, comment, {}

        def list_labels(self, args, query, body):
            return self._page(list(server.repo.labels.values()), query, urlsplit(self.path).path)

        def create_label(self, args, query, body):
            if body["name"] in server.repo.labels:
                raise _ApiError(422, "Validation Failed: already_exists")
            label = server._label(body["name"], body.get("color", "ededed"), body.get("description"))
            server.repo.labels[body["name"]] = label
            return 201, label, {}

        def get_label(self, args, query, body):
            label = server.repo.labels.get(args["name"])
            if label is None:
                raise _ApiError(404, "Not Found")
            return 200, label, {}

        def create_status(self, args, query, body):
            sid = next(server._ids)
            status = {
                "id": sid,
                "node_id": f"SC_{sid}",
                "url": f"{server._api()}/statuses/{args['sha']}",
                "avatar_url": None,
                "state": body["state"],
                "description": body.get("description"),
                "target_url": body.get("target_url"),
                "context": body.get("context", "default"),
                "created_at": NOW,
                "updated_at": NOW,
                "creator": server.user(self.login),
            }
            server.repo.statuses.setdefault(args["sha"], []).append(status)
            return 201, status, {}

        def list_statuses(self, args, query, body):
            statuses = list(reversed(server.repo.statuses.get(args["sha"], [])))
            return self._page(statuses, query, urlsplit(self.path).path)

        def create_check_run(self, args, query, body):
            return 201, server._check_run(body), {}

        def edit_check_run(self, args, query, body):
            run = server.repo.check_runs.get(int(args["id"]))
            if run is None:
                raise _ApiError(404, "Not Found")
            for key in ("status", "conclusion", "details_url", "name"):
                if key in body:
                    run[key] = body[key]
            server._update_output(run, body.get("output"))
            return 200, run, {}

        def list_check_runs(self, args, query, body):
            runs = [r for r in server.repo.check_runs.values() if r["head_sha"] == args["sha"]]
            if "check_name" in query:
                runs = [r for r in runs if r["name"] == query["check_name"]]
            runs.reverse()
            status, chunk, headers = self._page(runs, query, urlsplit(self.path).path)
            return status, {"total_count": len(runs), "check_runs": chunk}, headers

        def list_annotations(self, args, query, body):
            run = server.repo.check_runs.get(int(args["id"]))
            if run is None:
                raise _ApiError(404, "Not Found")
            annotations = [
                {
                    "path": a["path"],
                    "start_line": a["start_line"],
                    "end_line": a["end_line"],
                    "start_column": None,
                    "end_column": None,
                    "annotation_level": a["annotation_level"],
                    "title": a.get("title"),
                    "message": a["message"],
                    "raw_details": a.get("raw_details"),
                    "blob_href": "https://github.com/x/blob/sha/" + a["path"],
                }
                for a in run["_annotations"]
            ]
            return self._page(annotations, query, urlsplit(self.path).path)

        def get_pull(self, args, query, body):
            issue = self.get_issue(args, query, body)[1]
            if "pull_request" not in issue:
                raise _ApiError(404, "Not Found")
            return 200, _pull(issue), {}

        def _workflow(self, name: str) -> tuple[int, str]:
            names = sorted(server.repo.workflow_runs)
            by_id = {str(1 + i): n for i, n in enumerate(names)}
            workflow = by_id.get(name, name)
            if workflow not in server.repo.workflow_runs:
                raise _ApiError(404, "Not Found")
            return 1 + names.index(workflow), workflow

        def get_workflow(self, args, query, body):
            number, workflow = self._workflow(args["wf"])
            url = f"{server._api()}/actions/workflows/{number}"
            return 200, {"id": number, "name": workflow, "path": f".github/workflows/{workflow}",
                         "state": "active", "url": url}, {}

        def list_workflow_runs(self, args, query, body):
            """Newest first; `branch` and `status` (a conclusion such as success) filter."""
            runs = list(reversed(server.repo.workflow_runs[self._workflow(args["wf"])[1]]))
            if "branch" in query:
                runs = [r for r in runs if r["head_branch"] == query["branch"]]
            if "status" in query:
                runs = [r for r in runs if query["status"] in (r["status"], r["conclusion"])]
            status, chunk, headers = self._page(runs, query, urlsplit(self.path).path)
            return status, {"total_count": len(runs), "workflow_runs": chunk}, headers

        def list_run_artifacts(self, args, query, body):
            found = server.repo.artifacts.get(int(args["run"]), [])
            status, chunk, headers = self._page(found, query, urlsplit(self.path).path)
            return status, {"total_count": len(found), "artifacts": chunk}, headers

        def download_artifact(self, args, query, body):
            if int(args["id"]) not in server.repo.blobs:
                raise _ApiError(404, "Not Found")
            return 302, {}, {"Location": f"{server.url}/_blobs/{args['id']}"}

        def list_pulls(self, args, query, body):
            """`state` and `head=owner:branch` filters, as GitHub applies them."""
            pulls = [_pull(i) for i in server.repo.issues.values() if "pull_request" in i]
            if query.get("state", "open") != "all":
                pulls = [p for p in pulls if p["state"] == query.get("state", "open")]
            if "head" in query:
                owner, _, ref = query["head"].partition(":")
                pulls = [
                    p
                    for p in pulls
                    if p["head"]["ref"] == ref and p["head"]["repo"]["owner"]["login"] == owner
                ]
            return self._page(pulls, query, urlsplit(self.path).path)

    return Handler
