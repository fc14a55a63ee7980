"""A pull/merge request as a forge describes it, a forge's settings, and a call's errors."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, NamedTuple

FORGE_KINDS = ("github", "gitlab", "gitea")


class RequestState(StrEnum):
    OPEN = "open"
    MERGED = "merged"
    CLOSED = "closed"  # closed without being merged


class Request(NamedTuple):
    """One pull/merge request (GitLab's ``iid`` is its ``number``). Every text is sanitized."""

    number: int
    url: str
    state: RequestState
    head_sha: str | None  # the commit the request's head branch was at, as the forge says
    merge_commit: str | None = None  # the merge (or squash) commit the forge names, if any


class Settings(NamedTuple):
    """One forge's API: where, for which repository, with which token (never persisted)."""

    kind: str  # github, gitlab, gitea
    api: str  # the API's base address, without a trailing slash
    repository: str  # "owner/name" (GitLab: the project's path)
    token: str
    timeout: float  # seconds for one call, end to end

    def __repr__(self) -> str:  # never the token, whoever prints it
        return f"Settings({self.kind!r}, {self.api!r}, {self.repository!r}, token=<hidden>)"


#: What went wrong with a call:
#: ``denied``   the token was refused (401, 403) or the repository is not there for it (404):
#:              a configuration to fix, nothing was done;
#: ``exists``   the forge says a request for this head branch exists already (409, 422);
#: ``refused``  any other 4xx: the forge will not do it as asked; nothing was done;
#: ``later``    nothing was done, try again later (no connection, 429, 503);
#: ``unknown``  the request may have been acted on (5xx, a timeout or a lost reply after it
#:              left): look before doing it again.
ErrorKind = Literal["denied", "exists", "refused", "later", "unknown"]


class ForgeError(Exception):
    """A call that did not give an answer to act on. ``detail`` is scrubbed and sanitized."""

    def __init__(self, kind: ErrorKind, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.kind: ErrorKind = kind
        self.detail = detail
        self.status = status
