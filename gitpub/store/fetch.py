"""Fetching the remote's job store with its branch: one ``git fetch``, only ``refs/pub/*``.

The remote holds the shared job store under ``refs/pub/`` (one ref per unfinished job,
``refs/pub/jobs/<id>``, and the archive of finished ones, ``refs/pub/archive``). One fetch
brings the configured branch and that prefix — ``+refs/heads/<branch>:refs/remotes/<r>/<branch>``
and ``+refs/pub/*:refs/pub/remote/<r>/*`` with ``--prune`` — so a remote job ref that was
folded into the archive disappears here too. With protocol v2 (git's default since 2.26) the
client asks the server for those prefixes only (``ref-prefix refs/heads/<branch>``,
``ref-prefix refs/pub/``): the ref advertisement costs what the job store holds, which the
archive keeps proportional to the unfinished jobs.

Like every gitpub fetch it runs in the private repository ``.git/pub/fetch.git`` (see
``git.remote``: a damaged local job ref must not break it), which keeps its own copy of the
tracking refs for the negotiation; afterwards each tracking ref that changed is moved here by
compare-and-swap, and each one the remote no longer has is deleted here.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import NamedTuple

from gitpub.core.errors import CorruptStateError, GitpubError
from gitpub.core.sanitize import sanitize
from gitpub.git.refs import RefUpdate, for_each_ref
from gitpub.git.remote import Remote, RemoteConfigError, RemoteError
from gitpub.store.archive import ARCHIVE, archive_problem
from gitpub.store.fetchdir import (
    ISOLATED_CONFIG,
    bring,
    can_isolate,
    current_value,
    fetch_ref,
    fetch_refspecs,
    isolated_fetch_dir,
    mirror_ref,
    read_loose,
)
from gitpub.store.mirror import store_prefix

#: The remote's job store: everything gitpub keeps on a remote under this prefix.
REMOTE_PREFIX = "refs/pub/"


class Fetched(NamedTuple):
    """What one fetch found: the branch's tip (None: no such branch) and the job store's refs
    (name below ``refs/pub/`` → object id, as mirrored here under ``store.mirror.store_prefix``)."""

    tip: str | None
    store: dict[str, str]
    also: str | None = None  # the value of ``also``'s local ref (None: not on the remote)
    #: The remote's ``refs/pub/archive`` when it is no archive (damaged, or gone: ""): the last
    #: good archive is kept here instead (``keep_good_archive``).
    damaged_archive: str | None = None


def fetch_with_store(remote: Remote, also: tuple[str, str] | None = None) -> Fetched:
    """Fetch the branch and the job store in one ``git fetch`` (a second one for the store
    alone when the branch does not exist). ``also`` (remote ref, local ref): one more ref in
    the same fetch, as ``Remote.fetch_with`` fetches it (a pattern only it matches exactly, so
    that a remote without it is no error; only it is mirrored here) — ``confirm`` fetches the
    branch, the notes and the job store in one round. Raises ``RemoteError`` /
    ``RemoteConfigError``."""
    repo = remote.repo
    branch_spec = f"+refs/heads/{remote.branch}:{remote.tracking_ref}"
    store_spec = f"+{REMOTE_PREFIX}*:{store_prefix(remote)}*"
    if not can_isolate(remote):
        fetched = _fetch_here(remote, branch_spec, store_spec)
        if also is None:
            return fetched
        return Fetched(fetched.tip, fetched.store, fetch_ref(remote, *also))
    net = isolated_fetch_dir(repo)
    here = _here(remote, None if also is None else also[1])
    mirror_ref(repo, net, remote.tracking_ref, here.get(remote.tracking_ref))
    mirror_ref(repo, net, f"refs/heads/{remote.branch}", here.get(f"refs/heads/{remote.branch}"))
    _mirror_store(remote, net, _store_part(remote, here))
    env = {"GIT_OBJECT_DIRECTORY": str(repo.common_dir / "objects")}
    extra = [*ISOLATED_CONFIG, "--prune"]
    specs = [store_spec]
    if also is not None:
        (net / also[1]).unlink(missing_ok=True)  # after the fetch, absent means: not there
        remote.repo.heal_lock(net / f"{also[1]}.lock")
        specs.append(f"+{also[0]}*:{also[1]}*")
    found_branch = fetch_refspecs(remote, extra, [branch_spec, *specs], net, env) is not None
    if not found_branch:
        fetch_refspecs(remote, extra, specs, net, env)
    tip = None
    if found_branch:
        tip = read_loose(net, remote.tracking_ref)
        if tip is None or not repo.has_object(tip):
            raise RemoteError(f"fetch from {sanitize(remote.remote)} left no "
                              f"{remote.tracking_ref}")
    also_ref = None if also is None else also[1]
    value = None if also_ref is None else read_loose(net, also_ref)
    if value is not None and not repo.has_object(value):
        raise RemoteError(f"fetch from {sanitize(remote.remote)} left no {also_ref}")
    # Everything the fetch moved, here in one ref transaction from the values read before
    # it; when one of them moved meanwhile (a concurrent fetch), each ref on its own.
    store, damaged, moves = _store_moves(remote, net, _store_part(remote, here))
    for ref, new in ((remote.tracking_ref, tip), (also_ref, value)):
        if ref is not None and new is not None and here.get(ref) != new:
            moves.append(RefUpdate(ref, new, here.get(ref)))
    try:
        moved = repo.update_refs(moves, "gitpub: fetch")
    except CorruptStateError:  # git refused the whole transaction: each ref then says why
        moved = False
    if not moved:
        if tip is not None:
            _move(remote, remote.tracking_ref, tip)
        if also is not None:
            value = bring(remote, net, also[1], also[0])
        store, damaged = _bring_back(remote, net)
    return Fetched(tip, store, value, damaged)


def _here(remote: Remote, also: str | None) -> dict[str, str | None]:
    """This repository's values of the refs a fetch with the job store moves (the tracking
    ref, the branch, ``also``, the tracking store), in one ``for-each-ref`` at most; a damaged
    ref is None (``current_value``: the fetch replaces it)."""
    repo, branch = remote.repo, f"refs/heads/{remote.branch}"
    names = [remote.tracking_ref, *([also] if also else [])]
    # The branch only gives the negotiation a tip: its value as this command read it will do.
    hint = repo.seen([branch])
    try:
        # read_together: what it reads of the mirror refs (the tracking ref and store) is
        # kept for the command, and the moves after the fetch keep what they write: the
        # reads of the fetched store that follow cost no git (``git.refs``); read already
        # (a publishing command lists them at its start), they cost none here either
        seen = repo.read_together([*names, *([] if hint else [branch]), store_prefix(remote)])
        return {**{name: seen.get(name) for name in [*names, branch]}, **hint, **seen}
    except GitpubError:
        found: dict[str, str | None] = dict(repo.list_refs(store_prefix(remote)))
        found = {store_prefix(remote) + k: v for k, v in found.items()}
        return {**found, **{n: current_value(repo, n) for n in [*names, branch]}}


def _store_part(remote: Remote, here: dict[str, str | None]) -> dict[str, str]:
    """The tracking store among ``here``'s refs, keyed by the rest of their name."""
    prefix = store_prefix(remote)
    return {name[len(prefix):]: sha for name, sha in here.items()
            if name.startswith(prefix) and sha is not None}


def _fetch_here(remote: Remote, branch_spec: str, store_spec: str) -> Fetched:
    """``fetch_with_store`` in this repository itself (one the private fetch repository
    cannot serve: shallow, partial, another object format or ref storage)."""
    repo = remote.repo
    env = {"GIT_REF_PARANOIA": "0"}
    tip: str | None = None
    archive = store_prefix(remote) + ARCHIVE
    kept = repo.read_ref(archive)
    if fetch_refspecs(remote, ["--prune"], [branch_spec, store_spec], repo.git_dir,
                             env) is None:
        fetch_refspecs(remote, ["--prune"], [store_spec], repo.git_dir, env)
    else:
        tip = repo.read_ref(remote.tracking_ref)
    damaged = keep_good_archive(remote, kept, repo.read_ref(archive))
    return Fetched(tip, repo.list_refs(store_prefix(remote)), damaged_archive=damaged)


def keep_good_archive(remote: Remote, kept: str | None, fetched: str | None) -> str | None:
    """The tracking archive after a fetch: the remote's, unless it is no archive or gone while
    this clone holds a good one — then the good one stays (moved back by compare-and-swap
    where the fetch moved it), so its records stay readable and reachable here, and the
    remote's value is returned (``""``: gone) for the caller to report (issue 23 point 6)."""
    if fetched == kept or (fetched is not None and archive_problem(remote.repo, fetched) is None):
        return None
    ref = store_prefix(remote) + ARCHIVE
    if kept is None:
        if fetched is not None:
            remote.repo.delete_ref(ref, fetched)  # no good archive here either: none
        return fetched
    if remote.repo.read_ref(ref) != kept:
        _move(remote, ref, kept)
    return fetched or ""


def _mirror_store(remote: Remote, net: Path, here: dict[str, str]) -> None:
    """Make the private repository's copy of the tracking store this repository's (``here``:
    its refs, keyed below the prefix): the negotiation then starts from what this repository
    keeps alive (a ref whose object is missing here would make the fetch die). Stale locks of
    a killed fetch are healed."""
    prefix = store_prefix(remote)
    for dirpath, _dirs, files in os.walk(net / prefix):
        for f in files:
            if f.endswith(".lock"):
                remote.repo.heal_lock(Path(dirpath) / f)
    present = remote.repo.has_objects(here.values())
    ours = {k: v for k, v in here.items() if present[v]}
    theirs = _listed(net, prefix)
    for key in theirs.keys() - ours.keys():
        with contextlib.suppress(FileNotFoundError):
            (net / (prefix + key)).unlink()
    for key, sha in ours.items():
        if theirs.get(key) != sha:
            path = net / (prefix + key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp-gitpub")
            tmp.write_bytes(f"{sha}\n".encode())
            os.replace(tmp, path)


def _bring_back(remote: Remote, net: Path) -> tuple[dict[str, str], str | None]:
    """Move this repository's tracking store to what the fetch left in the private one, each
    ref on its own; returns it (name below ``refs/pub/`` → object id), and the remote's
    archive when it is no archive (``keep_good_archive``: the good one stays here)."""
    prefix = store_prefix(remote)
    here = remote.repo.list_refs(prefix)
    fetched, damaged, moves = _store_moves(remote, net, here)
    for move in moves:
        if move.new is None:
            assert move.old is not None
            remote.repo.delete_ref(move.ref, move.old)
        else:
            _move(remote, move.ref, move.new)
    return fetched, damaged


def _store_moves(remote: Remote, net: Path, here: dict[str, str]
                 ) -> tuple[dict[str, str], str | None, list[RefUpdate]]:
    """What the tracking store becomes after a fetch (name below ``refs/pub/`` → object id),
    the remote's archive when it is no archive (``keep_good_archive``: the good one stays
    here), and the moves from ``here`` (this repository's tracking store) that make it so."""
    prefix = store_prefix(remote)
    fetched = _listed(net, prefix)
    moves: list[RefUpdate] = []
    damaged = None
    theirs, ours = fetched.get(ARCHIVE), here.get(ARCHIVE)
    if theirs is not None and theirs != ours and archive_problem(remote.repo, theirs):
        damaged = theirs
        if ours is None:
            del fetched[ARCHIVE]  # no good archive here either: none
        else:
            fetched[ARCHIVE] = ours  # the last good archive stays
    elif theirs is None and ours is not None:
        damaged, fetched[ARCHIVE] = "", ours  # gone from the remote: the records stay here
    for key in sorted(here.keys() - fetched.keys()):
        moves.append(RefUpdate(prefix + key, None, here[key]))
    for key, sha in fetched.items():
        if here.get(key) != sha:
            if not remote.repo.has_object(sha):
                raise RemoteError(f"fetch from {sanitize(remote.remote)} left "
                                  f"{prefix + key} without its object")
            moves.append(RefUpdate(prefix + key, sha, here.get(key)))
    return fetched, damaged, moves


def _listed(net: Path, prefix: str) -> dict[str, str]:
    """The private fetch repository's refs under ``prefix``, keyed by the rest of their name
    (damaged ones left out: the next fetch replaces them). Its refs are loose files (git's
    files backend, ``can_isolate``; nothing packs them there: no gc, no maintenance), written
    by git's fetch and by ``_mirror_store``: read as files, as git would list them, without a
    git — unless a ``packed-refs`` file is there after all: then git lists them."""
    if (net / "packed-refs").exists():
        found, _ = for_each_ref(net, prefix)
        return {name[len(prefix):]: sha for name, sha in found.items()
                if name.startswith(prefix)}
    top = net / prefix
    listed: dict[str, str] = {}
    for dirpath, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # no ref name has such a part
        rel = Path(dirpath).relative_to(top).as_posix()
        for f in files:
            if f.startswith(".") or f.endswith(".lock"):
                continue  # a lock, a temporary file: no ref (git skips them too)
            key = f if rel == "." else f"{rel}/{f}"
            sha = read_loose(net, prefix + key)
            if sha is not None:
                listed[key] = sha
    return listed


def _move(remote: Remote, ref: str, sha: str) -> None:
    for _ in range(5):  # a concurrent fetch may move it too
        old = current_value(remote.repo, ref)
        if old == sha or remote.repo.cas_ref(ref, old, sha, "gitpub: fetch"):
            return
    raise GitpubError(f"could not update {ref}: it kept moving")


def note_pushed(remote: Remote, name: str, old: str | None, new: str | None) -> None:
    """After the remote accepted ``new`` for its ``refs/pub/<name>`` (None: deleted), the
    tracking ref says so too (a compare-and-swap from ``old``; a concurrent fetch that moved
    it already is just as good)."""
    ref = store_prefix(remote) + name
    # One compare-and-swap from ``old``, not a read first: a tracking ref that is no longer
    # ``old`` (a concurrent fetch moved it, to ``new`` or past it) is left as it is, as a
    # read would have left it; a damaged one too (the next fetch replaces it).
    with contextlib.suppress(CorruptStateError):
        if new is None:
            if old is not None:
                remote.repo.delete_ref(ref, old)
        elif old != new:
            remote.repo.cas_ref(ref, old, new, "gitpub: pushed")


def fetch_records(remote: Remote, depth: int, *, jobs: bool = True) -> None:
    """For a shallow clone (CI): the job store's job refs (unless ``jobs`` is False) and its
    archive, with at most ``depth`` commits of history each — the records, not every job's
    whole history, which would unshallow the clone through the content commits the histories
    keep alive. One fetch (``--prune``: what the remote no longer has goes here too); a fetch
    with ``--depth`` whose refspecs all match nothing fails, so then the remote is asked
    (``git ls-remote``) whether its store is empty, and the tracking refs go."""
    repo, prefix = remote.repo, store_prefix(remote)
    specs = ([f"+{REMOTE_PREFIX}jobs/*:{prefix}jobs/*"] if jobs else []) + \
        [f"+{REMOTE_PREFIX}archive*:{prefix}archive*"]
    env = {"GIT_REF_PARANOIA": "0"}
    try:
        if fetch_refspecs(remote, ["--prune", f"--depth={depth}"], specs, repo.git_dir,
                                 env) is not None:
            return
    except RemoteConfigError:
        raise
    except RemoteError as e:
        failed: RemoteError | None = e
    else:
        failed = None
    patterns = ([f"{REMOTE_PREFIX}jobs/*"] if jobs else []) + [f"{REMOTE_PREFIX}archive"]
    if remote.list_refs(patterns):
        raise failed or RemoteError(f"fetch of the job store from {sanitize(remote.remote)} "
                                    "failed")
    stale = {f"jobs/{k}": v for k, v in repo.list_refs(prefix + "jobs/").items()} if jobs \
        else {}
    archive = repo.read_ref(prefix + "archive")
    if archive is not None:
        stale["archive"] = archive
    for name, sha in stale.items():
        repo.delete_ref(prefix + name, sha)
