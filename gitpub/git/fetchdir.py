"""The private fetch repository, ``.git/pub/fetch.git``.

A fetch that must not move this repository's own tracking refs before gitpub has looked at what
arrived (``Remote.fetch_ref``, the job store's fetch in ``storefetch``) runs in a bare repository
that shares this one's configuration but keeps its own refs; the objects it receives are written
into this repository's object store (``GIT_OBJECT_DIRECTORY``). It holds nothing that is not
derived, so it is recreated whenever it is missing or damaged.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from gitpub.core.errors import GitpubError
from gitpub.core.files import write_atomic
from gitpub.git.locks import ensure_pub_dir
from gitpub.git.objects import is_object_id
from gitpub.git.repo import Repository

#: In the private fetch repository never run gc or maintenance (its refs are not this
#: repository's: a prune there would lose this one's objects) and never write a commit-graph;
#: its configuration says so too, and runs no hooks.
ISOLATED_CONFIG = ("--no-auto-maintenance", "--no-write-commit-graph")


def isolated_fetch_dir(repo: Repository) -> Path:
    """``.git/pub/fetch.git``: a bare repository with this one's configuration (included: the
    remote, credential helpers, URL rewrites) and its own refs only (one tracking ref per fetched
    ref). Its objects are never used: fetches there write into this repository's object store
    (``GIT_OBJECT_DIRECTORY``). Created when missing; it holds nothing that is not derived."""
    net = ensure_pub_dir(repo.pub_dir) / "fetch.git"
    config = net / "config"
    if config.is_file() and (net / "HEAD").is_file() and (net / "refs").is_dir():
        return net
    for sub in ("refs/heads", "refs/remotes", "objects", "hooks"):
        (net / sub).mkdir(parents=True, exist_ok=True)
    (net / "HEAD").write_bytes(b"ref: refs/heads/main\n")
    text = (f"[include]\n\tpath = {_quoted(repo.common_dir / 'config')}\n"
            "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
            f"\thooksPath = {_quoted(net / 'hooks')}\n\tlogAllRefUpdates = false\n"
            "[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n"
            "[fetch]\n\twriteCommitGraph = false\n")
    write_atomic(config, text.encode())
    return net


def _quoted(path: Path) -> str:
    """``path`` as a git config value."""
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def read_loose(git_dir: Path, ref: str) -> str | None:
    try:
        value = (git_dir / ref).read_bytes().strip().decode("ascii")
    except (OSError, UnicodeDecodeError):
        return None
    return value if is_object_id(value) else None


def current_value(repo: Repository, ref: str) -> str | None:
    """``ref``'s value here, or None (absent or damaged: the fetch will replace it)."""
    try:
        return repo.read_ref(ref)
    except GitpubError:
        return None


def mirror_ref(repo: Repository, net: Path, ref: str) -> None:
    """Give the private fetch repository this repository's value of ``ref`` (the fetch
    negotiates with it), or none if it has no usable one."""
    sha = current_value(repo, ref)
    path = net / ref
    if sha is None or not repo.has_object(sha):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    if read_loose(net, ref) == sha:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=net, prefix=".ref-")
    with os.fdopen(fd, "wb") as f:
        f.write(f"{sha}\n".encode())
    os.replace(tmp, path)
