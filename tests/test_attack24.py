"""Attacks on issue 24's landings: the in-place fast-forward (``delivery.checkout``),
``sync --dry-run`` and the take-over re-gating. Each test is a hole found, then closed."""

from __future__ import annotations

from conftest import Site, git
from test_delivery import article
from test_inplace import EDITED

from gitpub.delivery.checkout import move_branch
from gitpub.git.repo import Repository


def three_files(site: Site) -> tuple[str, str]:
    """A commit ``new`` on top of HEAD (``old``): welcome.md edited, b.md added, hidden.md
    deleted; main stays at ``old``."""
    (site.path / "posts/hidden.md").write_text(article("hidden"))
    site.git("add", "posts/hidden.md")
    site.git("commit", "-q", "-m", "hidden")
    old = site.git("rev-parse", "HEAD").strip()
    site.git("checkout", "-q", "-b", "tmp")
    (site.path / "posts/welcome.md").write_text(EDITED)
    (site.path / "posts/b.md").write_text(article("b"))
    site.git("rm", "-q", "posts/hidden.md")
    site.git("add", ".")
    site.git("commit", "-q", "-m", "three")
    new = site.git("rev-parse", "HEAD").strip()
    site.git("checkout", "-q", "main")
    site.git("branch", "-q", "-D", "tmp")
    return old, new


def test_refused_move_keeps_skip_worktree_and_assume_unchanged_bits(site: Site) -> None:
    """A sparse checkout leaves hidden.md out (skip-worktree, no file); welcome.md is marked
    assume-unchanged and edited to the new version; b.md is in the way. The move is refused,
    and the index must be exactly as it was: its bits too. Put back through
    ``update-index --index-info`` they were dropped: hidden.md then showed as deleted (a
    ``git commit -a`` would delete it from the branch), welcome.md's edit as a change."""
    old, new = three_files(site)
    site.git("update-index", "--skip-worktree", "posts/hidden.md")
    (site.path / "posts/hidden.md").unlink()
    site.git("update-index", "--assume-unchanged", "posts/welcome.md")
    (site.path / "posts/welcome.md").write_text(EDITED)
    (site.path / "posts/b.md").write_text("the person's own b\n")
    before = site.git("ls-files", "-s", "-t", "-v")
    status = site.git("status", "--porcelain")
    with Repository.discover(site.path) as repo:
        moved = move_branch(repo, "main", old, new, then="x")
    assert not moved.moved and "left alone" in moved.note
    assert site.git("rev-parse", "main").strip() == old
    assert site.git("ls-files", "-s", "-t", "-v") == before
    assert site.git("status", "--porcelain") == status == "?? posts/b.md\n"


def test_refused_move_keeps_an_intent_to_add_entry(site: Site) -> None:
    """``git rm --cached`` then ``git add -N`` of an empty page (a staged deletion, the file
    re-announced): the index entry looks like the old one (the empty blob) but is no such
    entry. A refused move must leave it so, not turn it into a staged empty file."""
    (site.path / "posts/empty.md").write_text("")
    site.git("add", "posts/empty.md")
    site.git("commit", "-q", "-m", "empty")
    old = site.git("rev-parse", "HEAD").strip()
    site.git("checkout", "-q", "-b", "tmp")
    (site.path / "posts/empty.md").write_text(article("filled"))
    (site.path / "posts/b.md").write_text(article("b"))
    site.git("add", ".")
    site.git("commit", "-q", "-m", "two")
    new = site.git("rev-parse", "HEAD").strip()
    site.git("checkout", "-q", "main")
    site.git("branch", "-q", "-D", "tmp")
    site.git("rm", "-q", "--cached", "posts/empty.md")
    (site.path / "posts/empty.md").write_text(article("filled"))
    site.git("add", "-N", "posts/empty.md")
    (site.path / "posts/b.md").write_text("the person's own b\n")
    status = site.git("status", "--porcelain")
    assert status.startswith("DA posts/empty.md\n"), status
    with Repository.discover(site.path) as repo:
        moved = move_branch(repo, "main", old, new, then="x")
    assert not moved.moved
    assert site.git("status", "--porcelain") == status
    assert git(site.path, "rev-parse", "main").strip() == old
