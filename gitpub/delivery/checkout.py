"""The live checkout: bring the user's branch and working tree up to what was published.

Only ever a fast-forward, and only when it is safe: the local branch must be an ancestor of the
published commit, and if it is checked out, git's own two-tree ``read-tree -m -u`` must agree (it
refuses when local changes touch the paths being updated — exactly "clean for the touched
paths"). It is what ``git merge --ff-only`` does, without refreshing the whole index first, so it
costs what changed, not the size of the working tree (measured: 140 ms → ~15 ms with 50,000
files). Anything else is left alone, and we say so.
"""

from __future__ import annotations

from gitpub.git.repo import Repository


def _is_ancestor(repo: Repository, old: str, new: str) -> bool:
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


def fast_forward_local(repo: Repository, branch: str, published: str) -> str:
    """Fast-forward ``branch`` (and the working tree, if it is checked out) to ``published``;
    returns a one-line account of what was done or why not."""
    ref = f"refs/heads/{branch}"
    local = repo.read_ref(ref)
    if local is None:
        return f"no local branch {branch}: nothing to update"
    if local == published:
        return f"local {branch} is already at the published commit"
    if not _is_ancestor(repo, local, published):
        return f"local {branch} has commits the remote does not: left alone"
    head = repo.head_ref()
    if repo.work_tree is None or head != ref:
        if repo.cas_ref(ref, local, published, "gitpub: fast-forward to published commit"):
            return f"local {branch} fast-forwarded (not checked out)"
        return f"local {branch} moved meanwhile: left alone"
    proc = repo.git("read-tree", "-m", "-u", local, published)
    if proc.returncode != 0:
        return (f"local {branch} left alone: local changes touch the published paths "
                "(run `git merge --ff-only` when they are committed or stashed)")
    if repo.cas_ref(ref, local, published, "gitpub: fast-forward to published commit"):
        return f"local {branch} and working tree fast-forwarded"
    # The branch moved between the two steps: put the index and files back where it is.
    repo.git("read-tree", "-m", "-u", published, "HEAD")
    return f"local {branch} moved meanwhile: left alone"
