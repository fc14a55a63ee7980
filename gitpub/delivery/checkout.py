"""The live checkout: bring a local branch, and the worktree that has it checked out, along.

A branch moves only together with the index and files of the worktree that has it checked out —
this one or any linked worktree (``git.worktrees``) — or not at all. The worktree is updated
with git's own two-tree ``read-tree -m -u OLD NEW``, which is what ``git merge --ff-only`` (and
``git checkout``) do: it refuses when local changes touch the paths being updated, and keeps
every other local change, staged or not. It does not refresh the whole index first, so it costs
what changed, not the size of the working tree (measured: 140 ms → ~15 ms with 50,000 files);
only when it refuses is the index refreshed and the merge tried once more (a file touched but
unchanged is not a local change). The ref then moves by compare-and-swap; if it moved
meanwhile, the worktree is put back. When the worktree cannot be updated, the branch stays where
it is and the note says which worktree to update, and how.

A page edited in place and published as it is (``git pub prepare --to P P``) leaves the file
changed in the working tree, as the published commit has it. Git's two-tree merge calls that a
local change and refuses; yet nothing would be lost. So when the merge refuses, every path the
move changes whose file already is exactly the new version (content through git's filters, and
mode), while the index still has the old one, is staged first: the merge then keeps it (the
index already matches the new commit). Anything else — a different edit, a staged change, a
symbolic link, an index entry with a bit ``--index-info`` would drop (assume-unchanged,
skip-worktree, intent-to-add) — still stops the move, and the staged entries are put back as
they were.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError
from gitpub.git.repo import MODE_EXEC, MODE_FILE, Change, Entry, Repository
from gitpub.git.worktrees import Worktree, holders


@dataclass(frozen=True)
class Moved:
    moved: bool
    note: str  # one line: what was done, or why not and what to run


def is_ancestor(repo: Repository, old: str, new: str) -> bool:
    """Whether ``old`` is an ancestor of ``new``. Usually it is a few first parents back (the
    local branch was the base of the published commit): look there first, in-process; only
    otherwise ask git, which answers for any history shape."""
    sha: str | None = new
    for _ in range(64):
        if sha == old:
            return True
        if sha is None or not repo.has_object(sha):
            break
        parents = repo.commit(sha).parents
        sha = parents[0] if parents else None
    return repo.git("merge-base", "--is-ancestor", old, new).returncode == 0


def _where(worktree: Worktree) -> str:
    return "" if worktree.current else f" in worktree {worktree.path}"


def two_tree_merge(worktree: Worktree, old: str, new: str, *, dry_run: bool = False) -> bool:
    """Update ``worktree``'s index and files from tree-ish ``old`` to ``new``, keeping its local
    changes (``read-tree -m -u``); False, with nothing changed, when local changes are in the
    way. ``dry_run`` only asks whether it would work."""
    args = ["read-tree", "-m", "-u", *(["-n"] if dry_run else []), old, new]
    if worktree.git(*args).returncode == 0:
        return True
    worktree.git("update-index", "-q", "--refresh")  # stat-only differences are no changes
    return worktree.git(*args).returncode == 0


#: Index entry bits that say more than mode and blob (``git ls-files --debug``): assume-unchanged,
#: intent-to-add, skip-worktree. An entry written back by ``update-index --index-info`` loses
#: them, so such a path is never staged for the move.
_FLAGGED = 0x8000 | 0x20000000 | 0x40000000
_DEBUG_TAIL = re.compile(rb"\A.*?flags: ([0-9a-f]+)\n", re.DOTALL)


def _index_entries(worktree: Worktree, paths: list[str]
                   ) -> tuple[dict[str, Entry | None], set[str]] | None:
    """The index entry of each path (None: not in the index), and the paths whose entry has a
    bit besides (see ``_FLAGGED``); None when one is unmerged."""
    proc = worktree.git("--literal-pathspecs", "ls-files", "-s", "--debug", "-z", "--",
                        *paths)
    if proc.returncode != 0:
        return None
    found: dict[str, Entry | None] = dict.fromkeys(paths)
    flagged: set[str] = set()
    # "<mode> <sha> <stage>\t<path>\0" then lines of stat data ending "flags: <hex>\n"
    records = proc.stdout.split(b"\0")
    name = ""
    for i, record in enumerate(records):
        if i > 0:
            tail = _DEBUG_TAIL.match(record)
            if tail is None:
                return None
            if int(tail.group(1), 16) & _FLAGGED:
                flagged.add(name)
            record = record[tail.end():]
        if not record:
            continue
        meta, _, raw = record.partition(b"\t")
        mode, sha, stage = meta.decode("ascii").split(" ")
        if stage != "0":
            return None
        name = raw.decode("utf-8", "surrogateescape")
        found[name] = Entry(int(mode, 8), sha)
    return found, flagged


def _as_published(worktree: Worktree, changes: list[Change]) -> list[Change]:
    """The changes whose working-tree side already is the new one: a file with the new
    content (as ``git add`` would hash it) and mode, or no file where the new side has none."""
    top = worktree.path
    same: list[Change] = []
    files: list[Change] = []
    for change in changes:
        file = top / change.path
        if any((top / part).is_symlink() for part in _parents(change.path)):
            continue
        if change.new is None:
            if not file.is_symlink() and not file.exists():
                same.append(change)
        elif change.new.mode in (MODE_FILE, MODE_EXEC) and "\n" not in change.path \
                and file.is_file() and not file.is_symlink():
            executable = bool(file.stat().st_mode & 0o100)
            if (MODE_EXEC if executable else MODE_FILE) == change.new.mode:
                files.append(change)
    if files:
        proc = worktree.git("hash-object", "--stdin-paths",
                            input="".join(f"{c.path}\n" for c in files).encode(
                                "utf-8", "surrogateescape"))
        hashes = proc.stdout.decode("ascii").split() if proc.returncode == 0 else []
        if len(hashes) == len(files):
            same += [c for c, h in zip(files, hashes, strict=True)
                     if c.new is not None and h == c.new.sha]
    return same


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _index_info(zero: str, entries: dict[str, Entry | None]) -> bytes:
    """``git update-index -z --index-info`` records that give each path this entry."""
    return b"".join((f"{e.mode:o} {e.sha} 0" if e is not None else f"0 {zero} 0").encode()
                    + b"\t" + path.encode("utf-8", "surrogateescape") + b"\0"
                    for path, e in entries.items())


def _stage_published(repo: Repository, worktree: Worktree, old: str, new: str
                     ) -> bytes | None:
    """Stage in ``worktree``'s index each path that ``old`` → ``new`` changes whose file is
    already the new version while the index still has the old one (the page edited in place
    and published as it is). Returns the records that put those index entries back, or None
    when there is none to stage (or they could not be staged)."""
    changes = [c for c in repo.diff_entries(old, new) if not c.is_tree]
    listed = _index_entries(worktree, [c.path for c in changes]) if changes else None
    if listed is None:
        return None
    index, flagged = listed
    candidates = [c for c in changes if index[c.path] == c.old and c.path not in flagged]
    same = _as_published(worktree, candidates)
    if not same:
        return None
    zero = repo.object_format.zero
    proc = worktree.git("update-index", "-z", "--index-info",
                        input=_index_info(zero, {c.path: c.new for c in same}))
    if proc.returncode != 0:
        return None
    return _index_info(zero, {c.path: index[c.path] for c in same})


def _update(repo: Repository, worktree: Worktree, old: str, new: str
            ) -> tuple[bool, bytes | None]:
    """The two-tree merge of ``worktree`` from ``old`` to ``new``; when local changes are in
    the way, once more after staging the files that already are as ``new`` has them (put
    back when the merge still refuses). Returns whether it was done, and the records that put
    back what was staged for it (to undo the move: see ``_put_back``)."""
    if two_tree_merge(worktree, old, new):
        return True, None
    undo = _stage_published(repo, worktree, old, new)
    if undo is None:
        return False, None
    if two_tree_merge(worktree, old, new):
        return True, undo
    worktree.git("update-index", "-z", "--index-info", input=undo)
    return False, None


def _put_back(worktree: Worktree, old: str, new: str, undo: bytes | None) -> None:
    """Undo ``_update``: the index entries staged for it go back first, so the reverse merge
    keeps those files as they are (the person's edit) instead of writing the old version."""
    if undo is not None:
        worktree.git("update-index", "-z", "--index-info", input=undo)
    two_tree_merge(worktree, new, old)


def _index_locked(worktree: Worktree) -> str:
    lock = worktree.git_dir / "index.lock"
    return (f" (its index is locked: {lock} exists; another git is running there, or one "
            "died: remove the file if none runs)") if lock.exists() else ""


def _held(repo: Repository, branch: str) -> tuple[Worktree | None, str | None]:
    """(the one worktree that has ``branch`` checked out, or None), or why the branch cannot
    move with a worktree at all: it is checked out in several (``git worktree add --force``),
    it is being rebased or bisected (git moves or returns to it afterwards), or the worktree
    is gone."""
    found = holders(repo, f"refs/heads/{branch}")
    if not found:
        return None, None
    if len(found) > 1:
        return None, (f"{branch} is checked out in {len(found)} worktrees ("
                      + ", ".join(str(w.path) for w in found) + "): it can move with only one; "
                      "check another branch out in the others")
    holder = found[0]
    if holder.operation is not None:
        what = holder.operation[1]
        way = ("finish or abort it (`git rebase --continue` or `--abort`)" if what == "a rebase"
               else "end it (`git bisect reset`)")
        return None, f"{branch} is held by {what} in progress{_where(holder) or ' here'}: {way}"
    if holder.missing:
        return None, (f"{branch} is checked out in worktree {holder.path}, which no longer "
                      "exists (run `git worktree prune`)")
    return holder, None


def blocker(repo: Repository, branch: str, old: str, new_tree: str) -> str | None:
    """Why ``branch`` could not move from ``old`` to a commit with tree ``new_tree`` together
    with its worktree, or None when it could (nothing is changed: a dry run)."""
    holder, why = _held(repo, branch)
    if why is not None or holder is None:
        return why
    if not two_tree_merge(holder, old, new_tree, dry_run=True):
        return (f"{branch} is checked out{_where(holder)} and local changes there touch the "
                "paths that would change: commit or stash them there first"
                + _index_locked(holder))
    return None


def move_branch(repo: Repository, branch: str, old: str, new: str, *, then: str,
                verb: str = "moved") -> Moved:
    """Move ``refs/heads/<branch>`` from ``old`` to ``new`` together with the worktree that has
    it checked out, or not at all. ``then`` is what a person runs to catch up when it cannot be
    done here (it goes into the note)."""
    ref = f"refs/heads/{branch}"
    message = "gitpub: move to the published commit"
    holder, why = _held(repo, branch)
    if why is not None:
        return Moved(False, f"local {branch} left alone: {why}; then run `{then}`")
    if holder is None:
        try:
            if repo.cas_ref(ref, old, new, message):
                return Moved(True, f"local {branch} {verb} (not checked out in any worktree)")
        except CorruptStateError as e:
            return _refused(branch, e, then)
        return Moved(False, f"local {branch} moved meanwhile: left alone")
    done, undo = _update(repo, holder, old, new)
    if not done:
        return Moved(False, f"local {branch} left alone: it is checked out{_where(holder)} "
                            "and local changes there touch the changed paths"
                            + _index_locked(holder) + "; commit or stash them there, then run "
                            f"`{then}`" + (f" in {holder.path}" if not holder.current else ""))
    crash_point("checkout.worktree-updated")  # push/reconcile finish it: finish_interrupted_move
    try:
        swapped = repo.cas_ref(ref, old, new, message)
    except CorruptStateError as e:
        _put_back(holder, old, new, undo)
        return _refused(branch, e, then)
    if swapped:
        return Moved(True, f"local {branch} and its working tree{_where(holder)} {verb} to "
                           "the published commit")
    # The branch moved between the two steps. Moved to ``new`` itself, or past it (a person's
    # ``git pull`` meanwhile, which took the worktree along from where this left it): the
    # worktree is where the branch is, or on its way; putting it back would revert it under
    # the branch. Anywhere else, put the files back.
    now = repo.read_ref(ref)
    if now == new:
        return Moved(True, f"local {branch} and its working tree{_where(holder)} {verb} to "
                           "the published commit (the branch was moved there meanwhile)")
    if now is not None and is_ancestor(repo, new, now):
        return Moved(False, f"local {branch} moved meanwhile, past the published commit: "
                            "left alone")
    _put_back(holder, old, new, undo)
    return Moved(False, f"local {branch} moved meanwhile: left alone")


def _refused(branch: str, error: CorruptStateError, then: str) -> Moved:
    """git refused to move the branch (a ``reference-transaction`` hook of the person's, a
    broken ref): the branch is the person's, and what was published stands; a note says
    why it was left alone (its files as they were)."""
    return Moved(False, f"local {branch} left alone: {error.message}; then run `{then}`")


def fast_forward_local(repo: Repository, branch: str, published: str) -> str:
    """Fast-forward ``branch`` (and the worktree that has it checked out) to ``published``;
    returns a one-line account of what was done or why not."""
    local = repo.read_ref(f"refs/heads/{branch}")
    if local is None:
        return f"no local branch {branch}: nothing to update"
    if local == published:
        return f"local {branch} is already at the published commit"
    if not is_ancestor(repo, local, published):
        return f"local {branch} has commits the remote does not: left alone" + _contained(
            repo, branch, local, published)
    return move_branch(repo, branch, local, published,
                       then=f"git merge --ff-only {published}", verb="fast-forwarded").note


def _contained(repo: Repository, branch: str, local: str, published: str) -> str:
    """When every change the local branch's own commits make is already in ``published`` (a
    page edited and committed, then published as it is): what a person runs to put the branch
    on the published commit, losing nothing. Not done here: that is no fast-forward, and the
    commits' messages would leave the branch."""
    proc = repo.git("merge-base", local, published)
    base = proc.stdout.decode().strip() if proc.returncode == 0 else ""
    if not base:
        return ""
    mine = {c.path for c in repo.diff_entries(base, local) if not c.is_tree}
    if not mine or mine & {c.path for c in repo.diff_entries(local, published)}:
        return ""
    count = repo.git("rev-list", "--count", local, f"^{published}").stdout.decode().strip()
    return (f" ({count} commit(s), whose changes the published commit already holds: "
            f"`git reset --keep {published}` puts {branch} on it, keeping any "
            "uncommitted change)")


def finish_interrupted_move(repo: Repository, branch: str, tip: str | None,
                            local: str | None) -> str | None:
    """The move of ``branch`` (now at ``local``, just read) to ``tip`` that a killed run began
    (``checkout.worktree-updated``): the index of the worktree that has the branch checked out
    already is ``tip``'s tree, while the branch is still behind it. Finished here (the worktree
    is not touched: its index already is the new commit's). The note, or None when there is
    no such move."""
    if tip is None or local is None or local == tip:
        return None
    holder, why = _held(repo, branch)
    if holder is None or why is not None:
        return None
    if holder.git("diff-index", "--cached", "--quiet", tip, "--").returncode != 0:
        return None  # the index is not the tip's tree: no move of ours was under way
    if not is_ancestor(repo, local, tip):
        return None
    return move_branch(repo, branch, local, tip, then=f"git merge --ff-only {tip}",
                       verb="fast-forwarded").note
