"""The worktrees of a repository: where each branch is checked out.

A branch may be checked out in any worktree of the repository (``git worktree add``), not only
in the one a command runs in. Moving such a branch without that worktree's index and files
leaves the worktree at the new commit with the old files: its ``git status`` then shows the
difference as staged changes, and its next commit reverts them. So whoever moves a branch first
asks here who has it checked out, and updates that worktree with it (``delivery.checkout``).

A branch is also *held* by a worktree that is rebasing or bisecting it: its HEAD is detached
meanwhile, but git moves the branch when the rebase ends (refusing, "cannot lock ref", if the
branch moved under it) and returns to it when the bisect ends; so git itself refuses ``git branch
-f`` on such a branch, and so do we. And ``git worktree add --force`` can check one branch out in
two worktrees; moving it with one of them would leave the other's index at the old commit.

The list is git's own (``git worktree list --porcelain -z``); each worktree's git directory is
taken from the repository's side (``<common>/worktrees/<name>/gitdir``), never from a ``.git``
file in the worktree, so a command run there acts on this repository and no other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gitpub.git.run import CompletedProcess, run_git

if TYPE_CHECKING:
    from gitpub.git.repo import Repository


@dataclass(frozen=True)
class Worktree:
    path: Path  # the top of its working tree
    git_dir: Path  # its git directory: the common directory, or <common>/worktrees/<name>
    branch: str | None  # the ref checked out there (refs/heads/…); None when detached
    current: bool  # the worktree this command runs in
    #: (the ref it is rebasing or bisecting, "a rebase" / "a bisect"), or None
    operation: tuple[str, str] | None = None

    @property
    def holds(self) -> frozenset[str]:
        """The refs this worktree holds: the one checked out, and one being rebased or
        bisected."""
        return frozenset(r for r in (self.branch, self.operation and self.operation[0]) if r)

    @property
    def missing(self) -> bool:
        """Its directory is gone (``git worktree prune`` would drop it)."""
        return not self.path.is_dir()

    def git(self, *args: str, timeout: float | None = None, input: bytes | None = None
            ) -> CompletedProcess[bytes]:
        """Run C git in this worktree, with its git directory and working tree set explicitly."""
        return run_git(args, cwd=self.path, git_dir=self.git_dir, work_tree=self.path,
                       timeout=timeout, input=input)


def _same(a: Path, b: Path | None) -> bool:
    return b is not None and os.path.realpath(a) == os.path.realpath(b)


def _admin_dirs(common_dir: Path) -> dict[str, Path]:
    """realpath of ``<worktree>/.git`` → the linked worktree's git directory."""
    found: dict[str, Path] = {}
    base = common_dir / "worktrees"
    if not base.is_dir():
        return found
    for admin in base.iterdir():
        try:
            target = (admin / "gitdir").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        found[os.path.realpath(target)] = admin
    return found


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape").strip()
    except OSError:
        return None


def _operation(git_dir: Path) -> tuple[str, str] | None:
    """The branch a rebase or bisect in this worktree will go back to, as git records it
    (``rebase-merge/head-name``, ``rebase-apply/head-name``, ``BISECT_START``)."""
    for sub in ("rebase-merge", "rebase-apply"):
        head = _read(git_dir / sub / "head-name")
        if head is not None and head.startswith("refs/heads/"):
            return head, "a rebase"
    start = _read(git_dir / "BISECT_START")
    if start:
        return (start if start.startswith("refs/") else f"refs/heads/{start}"), "a bisect"
    return None


def worktrees(repo: Repository) -> list[Worktree]:
    """Every worktree of ``repo`` that has a working tree (a bare main repository has none)."""
    alone = _main_alone(repo)
    if alone is not None:
        return [alone]
    proc = repo.git("worktree", "list", "--porcelain", "-z")
    if proc.returncode != 0:
        return []
    admins = _admin_dirs(repo.common_dir)
    out: list[Worktree] = []
    records = proc.stdout.decode("utf-8", "surrogateescape").split("\0\0")
    for i, record in enumerate(r for r in records if r):
        fields = {f.partition(" ")[0]: f.partition(" ")[2] for f in record.split("\0") if f}
        if "worktree" not in fields:
            continue
        path: Path | None = Path(fields["worktree"])
        branch = fields.get("branch") or None
        if i == 0:
            # git lists the main worktree at the common directory's parent, whatever
            # core.worktree (a submodule's checkout) or GIT_WORK_TREE say: the working tree
            # is where git puts it for a command, and a bare one may have one too
            path = _main_work_tree(repo, None if "bare" in fields else path)
            if path is None:
                continue
            if "bare" in fields:
                branch = repo.symbolic_head()
        elif "bare" in fields:
            continue
        assert path is not None
        git_dir = repo.common_dir if i == 0 else admins.get(os.path.realpath(path / ".git"))
        if git_dir is None:
            continue  # not ours (or broken): never act on it
        current = _same(git_dir, repo.git_dir)
        out.append(Worktree(path, git_dir, branch, current, _operation(git_dir)))
    return out


def _main_alone(repo: Repository) -> Worktree | None:
    """The main worktree, when this command runs in it and it is the only one (no linked
    worktree is registered: ``<common>/worktrees`` is absent or empty): what git would list,
    found without a git (the branch is HEAD's target, read as ``symbolic_target`` reads it).
    None otherwise: git lists them."""
    if not _same(repo.common_dir, repo.git_dir) or repo.work_tree is None or \
            repo.work_tree_implied:
        return None
    try:
        if any((repo.common_dir / "worktrees").iterdir()):
            return None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    return Worktree(repo.work_tree, repo.common_dir, repo.symbolic_target("HEAD"), True,
                    _operation(repo.common_dir))


def _main_work_tree(repo: Repository, listed: Path | None) -> Path | None:
    """The main worktree's working tree: this command's (``git rev-parse --show-toplevel``)
    when it runs there with a working tree git did not merely guess from the start directory
    (``GIT_DIR`` alone); else the one ``core.worktree`` names; else the one git lists (None:
    a bare repository)."""
    if _same(repo.common_dir, repo.git_dir) and repo.work_tree is not None \
            and not repo.work_tree_implied:
        return repo.work_tree
    proc = run_git(["config", "--file", str(repo.common_dir / "config"), "--get",
                    "core.worktree"], cwd=repo.common_dir)
    if proc.returncode == 0 and proc.stdout.strip():
        named = os.fsdecode(proc.stdout.rstrip(b"\n"))
        return Path(os.path.normpath(repo.common_dir / named))
    return listed


def holders(repo: Repository, ref: str) -> list[Worktree]:
    """Every worktree that holds ``ref``: has it checked out, or is rebasing or bisecting it."""
    return [w for w in worktrees(repo) if ref in w.holds]


def checked_out(repo: Repository, ref: str) -> Worktree | None:
    """The worktree that holds ``ref`` (the first, when several do), or None."""
    return next(iter(holders(repo, ref)), None)
