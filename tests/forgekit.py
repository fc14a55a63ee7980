"""A real HTTP stand-in for a forge's pull/merge request API on 127.0.0.1, over a real bare
repository, and the merges a person would make there — done by real git on that repository.

``ForgeServer(kind, remote, token)`` speaks the shapes of GitHub, GitLab or Gitea (the three
calls gitpub makes: list by head branch, create, get), asks for the token in each forge's own
header (401 without it), reads each request's head commit from the bare repository, and
records every call it got (``calls``) so a test can count creations and look for the token.
``merge(number, how)`` merges a request into its base branch with real git in a scratch clone
(``merge``: a merge commit; ``rebase``: the commits replayed onto the base; ``squash``: one new
commit with the forge's message), pushes it to the bare repository and marks the request
merged; ``close(number)`` closes one unmerged. Stdlib only (``http.server`` in a thread).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

from httpfaults import serve

REPOSITORY = "example/blog"


def _git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr.decode()}")
    return proc.stdout.decode()


@dataclass
class Call:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class PullRequest:
    number: int
    branch: str
    base: str
    title: str
    body: str
    state: str = "open"  # open | closed
    merged: bool = False
    merge_commit: str | None = None
    squashed: bool = False
    #: The head a closed or merged request keeps (the forge stops following its branch).
    last_head: str | None = None


@dataclass
class ForgeServer:
    kind: str  # github | gitlab | gitea
    remote: Path  # the bare repository the forge hosts
    token: str
    calls: list[Call] = field(default_factory=list)
    requests: list[PullRequest] = field(default_factory=list)
    #: Answers to force on the next calls of a method (``"POST:500"``: the next POST answers
    #: 500 after doing the work; the message quotes the token, as a careless server might).
    script: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # -- the server --------------------------------------------------------------------------

    def __enter__(self) -> Self:
        forge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                forge._handle(self, "GET")

            def do_POST(self) -> None:
                forge._handle(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = serve(self.server)
        self.thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def api(self) -> str:
        host, port = self.server.server_address[:2]
        base = f"http://{host!s}:{port}"
        return base + {"github": "", "gitlab": "/api/v4", "gitea": "/api/v1"}[self.kind]

    def created(self) -> int:
        return sum(1 for c in self.calls if c.method == "POST")

    def texts(self) -> str:
        """Everything the server was sent, but the auth header (where the token belongs)."""
        out = []
        for c in self.calls:
            out.append(c.path)
            out.append(c.body.decode("utf-8", "replace"))
            out += [f"{k}: {v}" for k, v in c.headers.items()
                    if k.lower() not in ("authorization", "private-token")]
        return "\n".join(out)

    def _authorized(self, headers: dict[str, str]) -> bool:
        lower = {k.lower(): v for k, v in headers.items()}
        if self.kind == "gitlab":
            return lower.get("private-token") == self.token
        if self.kind == "gitea":
            return lower.get("authorization") == f"token {self.token}"
        return lower.get("authorization") == f"Bearer {self.token}"

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        headers = dict(h.headers.items())
        with self.lock:
            self.calls.append(Call(method, h.path, headers, body))
            if not self._authorized(headers):
                return self._send(h, 401, {"message": "Bad credentials"})
            parts = urlsplit(h.path)
            segments = [unquote(s) for s in parts.path.split("/") if s]
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            data = json.loads(body) if body else {}
            status, answer = self._route(method, segments, query, data)
            if self.script and self.script[0].split(":")[0] == method:
                forced = self.script.pop(0).split(":", 1)[1]
                status, answer = int(forced), {"message": f"injected; token was {self.token}"}
        self._send(h, status, answer)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, answer: Any) -> None:
        raw = json.dumps(answer).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        h.wfile.write(raw)

    # -- the API shapes ----------------------------------------------------------------------

    def _route(self, method: str, seg: list[str], query: dict[str, str],
               data: dict[str, Any]) -> tuple[int, Any]:
        if self.kind == "gitlab":
            return self._gitlab(method, seg, query, data)
        owner, name = REPOSITORY.split("/")
        if self.kind == "gitea":
            if seg[:5] != ["api", "v1", "repos", owner, name] or seg[5:6] != ["pulls"]:
                return 404, {"message": "not found"}
            rest = seg[6:]
        else:
            if seg[:3] != ["repos", owner, name] or seg[3:4] != ["pulls"]:
                return 404, {"message": "Not Found"}
            rest = seg[4:]
        if method == "POST" and not rest:
            return self._create(data["head"], data["base"], data["title"], data["body"])
        if method == "GET" and len(rest) == 1:
            pr = self._number(rest[0])
            return (200, self._shape(pr)) if pr else (404, {"message": "Not Found"})
        if method == "GET" and not rest and self.kind == "github":
            head = query.get("head", "")
            want_owner, _, branch = head.partition(":")
            found = [self._shape(p) for p in self.requests if want_owner == owner and
                     p.branch == branch and p.base == query.get("base", p.base)]
            return 200, found
        if method == "GET" and len(rest) == 2 and self.kind == "gitea":
            base, branch = rest
            found = [p for p in self.requests if p.base == base and p.branch == branch]
            return (200, self._shape(found[-1])) if found else (404, {"message": "not found"})
        return 404, {"message": "not found"}

    def _gitlab(self, method: str, seg: list[str], query: dict[str, str],
                data: dict[str, Any]) -> tuple[int, Any]:
        if seg[:4] != ["api", "v4", "projects", REPOSITORY] or seg[4:5] != ["merge_requests"]:
            return 404, {"message": "404 Project Not Found"}
        rest = seg[5:]
        if method == "POST" and not rest:
            return self._create(data["source_branch"], data["target_branch"], data["title"],
                                data["description"])
        if method == "GET" and len(rest) == 1:
            pr = self._number(rest[0])
            return (200, self._shape(pr)) if pr else (404, {"message": "404 Not found"})
        if method == "GET" and not rest:
            return 200, [self._shape(p) for p in self.requests
                         if p.branch == query.get("source_branch")
                         and p.base == query.get("target_branch", p.base)]
        return 404, {"message": "404 Not found"}

    def _number(self, text: str) -> PullRequest | None:
        return next((p for p in self.requests if str(p.number) == text), None)

    def _create(self, branch: str, base: str, title: str, body: str) -> tuple[int, Any]:
        if self._head(branch) is None:
            return 422, {"message": "Validation Failed", "errors": [{"message": "no branch"}]}
        if any(p.branch == branch and p.base == base and p.state == "open"
               for p in self.requests):
            message = {"github": "A pull request already exists for example:" + branch,
                       "gitlab": "Another open merge request already exists for this source "
                                 "branch",
                       "gitea": "pull request already exists for these targets"}[self.kind]
            return (409 if self.kind != "github" else 422), {"message": message}
        pr = PullRequest(len(self.requests) + 1, branch, base, title, body)
        self.requests.append(pr)
        return 201, self._shape(pr)

    def _head(self, branch: str) -> str | None:
        proc = subprocess.run(["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
                              cwd=self.remote, capture_output=True, check=False)
        return proc.stdout.decode().strip() or None

    def _shape(self, pr: PullRequest) -> dict[str, Any]:
        head = pr.last_head if pr.state == "closed" else self._head(pr.branch)
        web = f"https://forge.example/{REPOSITORY}/pull/{pr.number}"
        if self.kind == "gitlab":
            state = "merged" if pr.merged else ("opened" if pr.state == "open" else "closed")
            return {"iid": pr.number, "id": 1000 + pr.number, "web_url": web, "state": state,
                    "sha": head, "source_branch": pr.branch, "target_branch": pr.base,
                    "merge_commit_sha": None if pr.squashed else pr.merge_commit,
                    "squash_commit_sha": pr.merge_commit if pr.squashed else None}
        return {"number": pr.number, "id": 1000 + pr.number, "html_url": web,
                "state": pr.state, "merged": pr.merged,
                "merged_at": "2026-01-01T00:00:00Z" if pr.merged else None,
                "head": {"ref": pr.branch, "sha": head}, "base": {"ref": pr.base},
                "merge_commit_sha": pr.merge_commit}

    # -- what a person does on the forge -----------------------------------------------------

    def merge(self, number: int, how: str, *, message: str | None = None,
              edit: tuple[str, str] | None = None) -> str:
        """Merge request ``number`` into its base with real git (``how``: merge, rebase or
        squash; ``edit``: a reviewer's change (path, text) made on the way); the new tip."""
        pr = self._number(str(number))
        assert pr is not None and pr.state == "open"
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp) / "w"
            _git(Path(tmp), "clone", "-q", str(self.remote), str(work))
            _git(work, "checkout", "-q", pr.base)
            head = f"origin/{pr.branch}"
            if how == "merge":
                _git(work, "merge", "-q", "--no-ff", head, "-m",
                     message or f"Merge pull request #{number} from example/{pr.branch}")
            elif how == "rebase":
                _git(work, "checkout", "-q", "-b", "replay", head)
                _git(work, "rebase", "-q", pr.base)
                _git(work, "checkout", "-q", pr.base)
                _git(work, "merge", "-q", "--ff-only", "replay")
            elif how == "squash":
                _git(work, "merge", "-q", "--squash", head)
                _git(work, "commit", "-q", "-m", message or f"{pr.title} (#{number})")
            else:
                raise ValueError(how)
            if edit is not None:
                path, text = edit
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                (work / path).write_text(text)
                _git(work, "add", path)
                _git(work, "commit", "-q", "--amend", "--no-edit")
            tip = _git(work, "rev-parse", "HEAD").strip()
            _git(work, "push", "-q", "origin", f"HEAD:{pr.base}")
        with self.lock:
            pr.last_head = self._head(pr.branch)
            pr.state, pr.merged, pr.merge_commit = "closed", True, tip
            pr.squashed = how == "squash"
        return tip

    def close(self, number: int) -> None:
        pr = self._number(str(number))
        assert pr is not None
        with self.lock:
            pr.last_head = self._head(pr.branch)
            pr.state = "closed"
