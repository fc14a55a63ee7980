"""``git pub confirm`` attacked again (issue 22, round two's helper): notes histories built from
authentic ledgers (merges of older ones, another repository's under the same key), symbolic
links that escape through other links, and the anchor after a crash.

CI is modelled as in ``test_confirm_trust``: a fresh clone per run with the key and an anchor
file kept between runs. The attacker is a clone with push access; it never has the key or the
anchor file.
"""

from __future__ import annotations

from pathlib import Path

from conftest import Site, git
from test_confirm import attacker_clone, publish
from test_confirm_trust import anchored, keyed_run


def notes_merge(repo: Path, parents: list[str], tree_of: str) -> str:
    """An (unauthentic) notes commit with ``parents``, in that order, and ``tree_of``'s tree."""
    git(repo, "fetch", "-q", "origin", "+refs/notes/pub:refs/notes/pub")
    tree = git(repo, "rev-parse", f"{tree_of}^{{tree}}").strip()
    args = [a for p in parents for a in ("-p", p)]
    return git(repo, "commit-tree", tree, *args, input=b"notes merge\n").strip()


def ledgers(site: Site) -> list[str]:
    """The remote's notes commits, oldest first."""
    return git(site.remote, "rev-list", "--reverse", "--first-parent",
               "refs/notes/pub").split()


# -- the notes merged with older authentic ledgers ---------------------------------------------

def test_older_ledgers_merged_in_do_not_push_out_the_newest_point(site: Site,
                                                                  tmp_path: Path) -> None:
    """Five runs, five ledgers. The attacker force-pushes the newest checked commit away and
    pushes a notes merge whose first parents are the four older ledgers, the anchored one
    last: the merged points must still hold the newest, so the rewrite is seen (``rewritten``)."""
    anchored(site, tmp_path)
    for i in range(4):
        publish(site, 1, start=10 + i)
        r = keyed_run(site, tmp_path, f"ci{i + 1}")
        assert r.code == 0, r.out + r.err
    notes = ledgers(site)
    assert len(notes) == 5
    evil = attacker_clone(site, tmp_path)
    gone = git(evil, "rev-parse", "HEAD").strip()
    git(evil, "reset", "-q", "--hard", "HEAD~1")
    git(evil, "push", "-q", "-f", "origin", "HEAD:main")
    for ref in git(site.remote, "for-each-ref", "--format=%(refname) %(objectname)",
                   "refs/pub/").splitlines():
        name, _ = ref.split()
        if gone in git(site.remote, "cat-file", "-p", name, check=False):
            git(site.remote, "update-ref", "-d", name)
    merge = notes_merge(evil, notes, notes[-1])
    git(evil, "push", "-q", "-f", "origin", f"{merge}:refs/notes/pub")
    r = keyed_run(site, tmp_path, "ci9")
    assert r.code == 1, r.out + r.err
    assert gone in r.json()["rewritten"] or "rolled back" in r.out, r.out
