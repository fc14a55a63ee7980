"""Each forge's shapes for the three calls gitpub makes: open a request, find the request of a
head branch, get a request by number.

=========  ======================================  ==========================================
forge      find by head branch                     get / create
=========  ======================================  ==========================================
GitHub     ``GET /repos/R/pulls?head=OWNER:B``     ``GET /repos/R/pulls/N``,
           ``&base=BASE&state=all``                ``POST /repos/R/pulls``
GitLab     ``GET /projects/R/merge_requests``      ``GET /projects/R/merge_requests/IID``,
           ``?source_branch=B&target_branch=...``  ``POST /projects/R/merge_requests``
           ``&state=all``                          (R URL-encoded)
Gitea      ``GET /repos/R/pulls/BASE/B``           ``GET /repos/R/pulls/N``,
           (the newest request of BASE and B)      ``POST /repos/R/pulls``
=========  ======================================  ==========================================

``find`` picks, among the requests of the head branch, the one whose head is the given commit
(whatever its state), else an open one, else none: a request closed before the job's commit
was pushed again (``resolve --retry``) is not the job's request any more.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from gitpub.core.sanitize import sanitize
from gitpub.forge.http import Http
from gitpub.forge.model import ForgeError, Request, RequestState, Settings


def pick(requests: Iterable[Request], head: str | None) -> Request | None:
    """The request of a head branch that is the job's (see the module docstring)."""
    found = list(requests)
    return next((r for r in found if head is not None and r.head_sha == head),
                next((r for r in found if r.state == RequestState.OPEN), None))


class Forge:
    """The calls, in the shapes of one forge (subclasses); raise ``ForgeError``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.http = Http(settings)

    def find(self, branch: str, base: str, head: str | None) -> Request | None:
        raise NotImplementedError

    def create(self, branch: str, base: str, title: str, body: str) -> Request:
        raise NotImplementedError

    def get(self, number: int) -> Request:
        raise NotImplementedError

    def _parse(self, data: Any) -> Request:
        raise NotImplementedError

    def _one(self, data: Any, what: str) -> Request:
        try:
            return self._parse(data)
        except (KeyError, TypeError, ValueError):
            raise ForgeError("unknown", f"{what}: an answer without the request's number, "
                             "address and state") from None

    def _many(self, data: Any, what: str) -> list[Request]:
        if not isinstance(data, list):
            raise ForgeError("unknown", f"{what}: expected a list of requests")
        return [self._one(item, what) for item in data]

    def _text(self, value: object) -> str:
        if not isinstance(value, str):
            raise TypeError("not a string")
        return self.http.scrub(value)


def _number(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError("not a request number")
    return value


def _sha(value: object) -> str | None:
    return sanitize(value) if isinstance(value, str) and value else None


class GitHub(Forge):
    def _repo(self) -> str:
        return "/repos/" + "/".join(quote(p, safe="") for p in
                                    self.settings.repository.split("/"))

    def find(self, branch: str, base: str, head: str | None) -> Request | None:
        owner = self.settings.repository.split("/", 1)[0]
        data = self.http.call("GET", self._repo() + "/pulls",
                              params={"head": f"{owner}:{branch}", "base": base,
                                      "state": "all", "per_page": "100"})
        return pick(self._many(data, "list pulls"), head)

    def create(self, branch: str, base: str, title: str, body: str) -> Request:
        data = self.http.call("POST", self._repo() + "/pulls",
                              body={"title": title, "head": branch, "base": base, "body": body,
                                    "maintainer_can_modify": False})
        return self._one(data, "create pull")

    def get(self, number: int) -> Request:
        return self._one(self.http.call("GET", f"{self._repo()}/pulls/{number}"), "get pull")

    def _parse(self, data: Any) -> Request:
        merged = bool(data.get("merged")) or bool(data.get("merged_at"))
        state = RequestState.MERGED if merged else RequestState(data["state"])
        head = data.get("head")
        return Request(_number(data["number"]), self._text(data["html_url"]), state,
                       _sha(head.get("sha")) if isinstance(head, dict) else None,
                       _sha(data.get("merge_commit_sha")) if merged else None)


_GITLAB_STATES = {"opened": RequestState.OPEN, "locked": RequestState.OPEN,
                  "merged": RequestState.MERGED, "closed": RequestState.CLOSED}


class GitLab(Forge):
    def _project(self) -> str:
        return "/projects/" + quote(self.settings.repository, safe="")

    def find(self, branch: str, base: str, head: str | None) -> Request | None:
        data = self.http.call("GET", self._project() + "/merge_requests",
                              params={"source_branch": branch, "target_branch": base,
                                      "state": "all", "per_page": "100"})
        return pick(self._many(data, "list merge requests"), head)

    def create(self, branch: str, base: str, title: str, body: str) -> Request:
        data = self.http.call("POST", self._project() + "/merge_requests",
                              body={"source_branch": branch, "target_branch": base,
                                    "title": title, "description": body,
                                    "remove_source_branch": False})
        return self._one(data, "create merge request")

    def get(self, number: int) -> Request:
        return self._one(self.http.call("GET", f"{self._project()}/merge_requests/{number}"),
                         "get merge request")

    def _parse(self, data: Any) -> Request:
        state = _GITLAB_STATES[data["state"]]
        merged = state == RequestState.MERGED
        commit = data.get("squash_commit_sha") or data.get("merge_commit_sha")
        return Request(_number(data["iid"]), self._text(data["web_url"]), state,
                       _sha(data.get("sha")), _sha(commit) if merged else None)


class Gitea(Forge):
    def _repo(self) -> str:
        return "/repos/" + "/".join(quote(p, safe="") for p in
                                    self.settings.repository.split("/"))

    def find(self, branch: str, base: str, head: str | None) -> Request | None:
        data = self.http.call("GET", f"{self._repo()}/pulls/{quote(base, safe='')}/"
                                     f"{quote(branch, safe='')}", missing_ok=True)
        return None if data is None else pick([self._one(data, "get pull by branch")], head)

    def create(self, branch: str, base: str, title: str, body: str) -> Request:
        data = self.http.call("POST", self._repo() + "/pulls",
                              body={"head": branch, "base": base, "title": title,
                                    "body": body})
        return self._one(data, "create pull")

    def get(self, number: int) -> Request:
        return self._one(self.http.call("GET", f"{self._repo()}/pulls/{number}"), "get pull")

    def _parse(self, data: Any) -> Request:
        merged = bool(data.get("merged"))
        state = RequestState.MERGED if merged else RequestState(data["state"])
        head = data.get("head")
        return Request(_number(data["number"]), self._text(data["html_url"]), state,
                       _sha(head.get("sha")) if isinstance(head, dict) else None,
                       _sha(data.get("merge_commit_sha")) if merged else None)


def forge_for(settings: Settings) -> Forge:
    kinds: dict[str, type[Forge]] = {"github": GitHub, "gitlab": GitLab, "gitea": Gitea}
    return kinds[settings.kind](settings)
