"""The private fetch repository, ``.git/pub/fetch.git``.

Every gitpub fetch (``fetch_ref``, ``fetch_with``, the job store's fetch in ``store.fetch``)
runs in a bare repository that shares this one's configuration but keeps its own refs; the
objects it receives are written into this repository's object store
(``GIT_OBJECT_DIRECTORY``), and the refs fetched are then moved here by compare-and-swap. Why:
C git's fetch checks the connectivity of what it received against *every* local ref, so one
damaged job ref — an empty ref file, a ref to a missing object, a truncated state commit —
would make every fetch in this repository die and stop the delivery of every healthy job. The
private repository holds nothing that is not derived, so it is recreated whenever it is
missing or damaged. Shallow and partial clones, whose state lives in the repository itself,
fetch here directly, skipping broken refs (``GIT_REF_PARANOIA=0``).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import GitpubError
from gitpub.core.files import ensure_pub_dir, pub_dir, write_atomic
from gitpub.core.sanitize import sanitize
from gitpub.git.objects import is_object_id
from gitpub.git.remote import Remote, RemoteError
from gitpub.git.repo import Repository
from gitpub.git.run import CompletedProcess
from gitpub.store.mirror import store_prefix

#: In the private fetch repository never run gc or maintenance (its refs are not this
#: repository's: a prune there would lose this one's objects) and never write a commit-graph;
#: its configuration says so too, and runs no hooks.
ISOLATED_CONFIG = ("--no-auto-maintenance", "--no-write-commit-graph")


#: The private fetch repository's configuration. Nothing in it names a path of this machine:
#: the repository's own configuration is included by a path relative to this file (git
#: resolves it from ``.git/pub/fetch.git/``), so a repository moved or copied elsewhere fetches
#: with its own configuration, never the original's; and no hook can run (``/dev/null`` is no
#: directory of hooks).
FETCH_CONFIG = (b"[include]\n\tpath = ../../config\n"
                b"[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
                b"\thooksPath = /dev/null\n\tlogAllRefUpdates = false\n"
                b"[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n"
                b"[fetch]\n\twriteCommitGraph = false\n")


def isolated_fetch_dir(repo: Repository) -> Path:
    """``.git/pub/fetch.git``: a bare repository with this one's configuration (included: the
    remote, credential helpers, URL rewrites) and its own refs only (one tracking ref per fetched
    ref). Its objects are never used: fetches there write into this repository's object store
    (``GIT_OBJECT_DIRECTORY``). Created when missing, its configuration written again when it
    is not ``FETCH_CONFIG`` (an older gitpub's named absolute paths); it holds nothing that is
    not derived."""
    net = ensure_pub_dir(pub_dir(repo.common_dir)) / "fetch.git"
    config = net / "config"
    if (net / "HEAD").is_file() and (net / "refs").is_dir() and _reads(config) == FETCH_CONFIG:
        return net
    for sub in ("refs/heads", "refs/remotes", "objects"):
        (net / sub).mkdir(parents=True, exist_ok=True)
    (net / "HEAD").write_bytes(b"ref: refs/heads/main\n")
    write_atomic(config, FETCH_CONFIG)
    return net


def _reads(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


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


_READ = "read it"


def mirror_ref(repo: Repository, net: Path, ref: str, value: str | None = _READ) -> None:
    """Give the private fetch repository this repository's value of ``ref`` (the fetch
    negotiates with it), or none if it has no usable one. ``value``: that value, when the
    caller read it already (``current_value``'s: None when absent or damaged)."""
    _mirror_value(repo, net, ref, current_value(repo, ref) if value is _READ else value)


def mirror_refs(repo: Repository, net: Path, refs: list[str],
                also: tuple[str, ...] = ()) -> None:
    """Give the private fetch repository this repository's value of each of ``refs`` (the
    fetch negotiates with them: no decision rests on these values, so a value this command
    read already will do, ``Repository.seen``), or none where it has no usable one; the
    others read in one ``for-each-ref`` with ``also`` (patterns the caller reads next: kept
    for the command when they are kept refs, ``git.refs``)."""
    seen: dict[str, str | None] = dict(repo.seen(refs))
    unread = [ref for ref in refs if ref not in seen]
    if unread or also:  # unreadable here: none (as current_value); the fetch replaces them
        with contextlib.suppress(GitpubError):
            seen.update(repo.read_together([*unread, *also]))
    for ref in refs:
        _mirror_value(repo, net, ref, seen.get(ref))


def _mirror_value(repo: Repository, net: Path, ref: str, sha: str | None) -> None:
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


# -- fetches through it ------------------------------------------------------------------

def fetch_branch(remote: Remote) -> str | None:
    """Fetch the branch into its tracking ref; its tip, or None if the branch does not
    exist on the remote. Raises ``RemoteError`` when the remote cannot be reached."""
    return fetch_ref(remote, f"refs/heads/{remote.branch}", remote.tracking_ref)


def fetch_ref(remote: Remote, src: str, dst: str, *, deepen: int | None = None) -> str | None:
    """Fetch remote ref ``src`` into local ref ``dst`` (forced: ``dst`` mirrors the
    remote); the fetched tip, or None if the remote has no such ref.

    It runs in the private fetch repository (see the module); a deepening fetch, and any
    fetch of a clone that repository cannot serve (``can_isolate``), runs here directly.
    """
    if deepen is None and can_isolate(remote):
        return _fetch_isolated(remote, src, dst)
    args = [f"--deepen={deepen}"] if deepen is not None else []
    proc = _fetch(remote, args, src, dst, remote.repo.git_dir, {"GIT_REF_PARANOIA": "0"})
    return None if proc is None else remote.repo.read_ref(dst)


def fetch_with(remote: Remote, src: str, dst: str) -> tuple[str | None, str | None]:
    """Fetch the branch (as ``fetch_branch``) and remote ref ``src`` into ``dst`` (as
    ``fetch_ref``) in one ``git fetch``: (the branch's tip, ``dst``'s), each None when the
    remote has no such ref. ``src`` is fetched through a pattern that only it matches
    exactly (``src*``), so that a remote without it is no error; refs the pattern also
    matches (``<src>-old``, say) are fetched into the private fetch repository only and
    never mirrored here."""
    if not can_isolate(remote):
        return fetch_branch(remote), fetch_ref(remote, src, dst)
    net = isolated_fetch_dir(remote.repo)
    branch = f"refs/heads/{remote.branch}"
    mirror_refs(remote.repo, net, [remote.tracking_ref, branch])
    (net / dst).unlink(missing_ok=True)  # after the fetch, absent means: not there
    env = {"GIT_OBJECT_DIRECTORY": str(remote.repo.common_dir / "objects")}
    for lock in (remote.tracking_ref, dst):
        remote.repo.heal_lock(net / f"{lock}.lock")
    specs = [f"+{branch}:{remote.tracking_ref}", f"+{src}*:{dst}*"]
    if fetch_refspecs(remote, list(ISOLATED_CONFIG), specs, net, env) is None:
        return None, fetch_ref(remote, src, dst)  # no such branch: the other ref alone
    return bring(remote, net, remote.tracking_ref, branch), bring(remote, net, dst, src)


def bring(remote: Remote, net: Path, dst: str, src: str) -> str | None:
    """Mirror ``dst`` from the private fetch repository here (CAS); its value, or None
    when the fetch left none: the remote has no ``src`` (``dst`` here is left as it is, as
    ``fetch_ref`` leaves it)."""
    tip = read_loose(net, dst)
    if tip is None:
        return None
    if not remote.repo.has_object(tip):
        raise RemoteError(f"fetch from {sanitize(remote.remote)} left no {dst}")
    for _ in range(5):  # mirror it here; a concurrent fetch may move it too
        old = current_value(remote.repo, dst)
        if old == tip or remote.repo.cas_ref(dst, old, tip, f"gitpub: fetch {src}"):
            return tip
    raise RemoteError(f"could not update {dst}: it kept moving")


def fetch_refspecs(remote: Remote, extra: list[str], refspecs: list[str], git_dir: Path,
                   env: dict[str, str]) -> CompletedProcess[bytes] | None:
    """``Remote.fetch_refspecs``, negotiating with the mirror of the remote's job store too
    (``store.mirror``): what this clone last fetched of it, the remote has.

    A loose object here that git reads as corrupt (a damaged job's state, a truncated file)
    stops git's fetch whole — every job's delivery with it. Such an object is set aside into
    ``.git/pub/quarantine/`` (``Repository.set_aside_corrupt``: kept, said) and the fetch made
    again, which brings a sound copy when the remote has one; at most ``SET_ASIDE_MAX`` per
    fetch, then git's error stands (what was set aside stays: the next run goes on from
    there). When the fetch made again fails for another reason, each object set aside that no
    sound copy replaced is put back (``Repository.put_back_corrupt``) and git's error about
    it stands: moving what the remote cannot send (a commit not pushed yet) heals nothing."""
    moved: dict[str, tuple[Path, RemoteError]] = {}  # kept where, after which error
    while True:
        try:
            return remote.fetch_refspecs(extra, refspecs, git_dir, env,
                                         negotiate=[store_prefix(remote)])
        except RemoteError as e:
            sha = _corrupt_named(remote, e.message)
            kept = None if sha is None or sha in moved or len(moved) >= SET_ASIDE_MAX \
                else remote.repo.set_aside_corrupt(sha)
            if sha is None:
                # The fetch failed for another reason: what it set aside and the remote sent
                # no sound copy of may be why (missing now, not healed). It goes back where
                # it was, and git's words about it are the error.
                back = [said for sha_, (path, said) in moved.items()
                        if remote.repo.put_back_corrupt(sha_, path)]
                raise back[0] if back else e from None
            if kept is None:
                raise  # git's error stands; what is set aside stays (the next run goes on)
            moved[sha] = kept, e
            crash_point("fetch.set-aside")


#: How many corrupt loose objects one fetch sets aside before git's error stands.
SET_ASIDE_MAX = 16
#: git's words for a corrupt loose object, at a line's start (not ``remote: …``; and only
#: an object git here, asked again, reads as corrupt is moved).
_CORRUPT = re.compile(r"(?m)^(?:error: corrupt loose object '|fatal: loose object )"
                      r"([0-9a-f]{40}(?:[0-9a-f]{24})?)\b")


def _corrupt_named(remote: Remote, message: str) -> str | None:
    """The object a failed fetch's ``RemoteError`` says git found corrupt here, at the start
    of a line of git's own (after the error's prefix, ``Remote.fetch_refspecs``): never in a
    server's ``remote: …`` line."""
    prefix = f"fetch from {sanitize(remote.remote)} failed: "
    if not message.startswith(prefix):
        return None
    found = _CORRUPT.search(message[len(prefix):])
    return None if found is None else found.group(1)


def _fetch(remote: Remote, extra: list[str], src: str, dst: str, git_dir: Path,
           env: dict[str, str]) -> CompletedProcess[bytes] | None:
    remote.repo.heal_lock(git_dir / f"{dst}.lock")  # a killed fetch's leftover
    return fetch_refspecs(remote, extra, [f"+{src}:{dst}"], git_dir, env)


def can_isolate(remote: Remote) -> bool:
    """Whether fetches run in the private fetch repository: not in a shallow or partial
    clone, nor in one of another object format or ref storage."""
    common = remote.repo.common_dir
    if (common / "shallow").exists():
        return False
    layout = remote.repo.layout_config()
    return not any(f"extensions.{k}" in layout
                   for k in ("partialclone", "objectformat", "refstorage"))


def _fetch_isolated(remote: Remote, src: str, dst: str) -> str | None:
    net = isolated_fetch_dir(remote.repo)
    mirror_refs(remote.repo, net, [dst, f"refs/heads/{remote.branch}"])
    env = {"GIT_OBJECT_DIRECTORY": str(remote.repo.common_dir / "objects")}
    if _fetch(remote, list(ISOLATED_CONFIG), src, dst, net, env) is None:
        return None
    tip = bring(remote, net, dst, src)
    if tip is None:
        raise RemoteError(f"fetch from {sanitize(remote.remote)} left no {dst}")
    return tip
