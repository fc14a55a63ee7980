"""``git pub confirm`` attacked again (issue 22, round two's helper): notes histories built from
authentic ledgers (merges of older ones, another repository's under the same key), symbolic
links that escape through other links, and the anchor after a crash.

CI is modelled as in ``test_confirm_trust``: a fresh clone per run with the key and an anchor
file kept between runs. The attacker is a clone with push access; it never has the key or the
anchor file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
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

@pytest.mark.slow
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


# -- a symbolic link that leaves the repository through another link -----------------------

def push_links(site: Site, tmp_path: Path, links: dict[str, str],
               existing: dict[str, str] | None = None) -> str:
    """A self-consistent job commit publishing ``links`` (path -> target), on top of a commit
    (no claim) adding the links ``existing``."""
    from test_confirm import commit_as

    from gitpub.core.manifest import Manifest, ManifestEntry, content_sha256

    evil = attacker_clone(site, tmp_path)
    for group in (existing or {}, links):
        for path, target in group.items():
            (evil / path).parent.mkdir(parents=True, exist_ok=True)
            (evil / path).symlink_to(target)
            git(evil, "add", path)
        if group is existing and existing:
            git(evil, "commit", "-qm", "links")
    manifest = Manifest.of([ManifestEntry(p, 0o120000, content_sha256(t.encode()))
                            for p, t in links.items()])
    message = (b"Publish: links\n\n" + manifest.serialize() + b"\nBlog-Job-Id: "
               b"0badf00d-0000-5000-8000-000000000000\nBlog-Manifest-Sha256: "
               + manifest.sha256().encode() + b"\n")
    commit = commit_as(evil, message, {})
    git(evil, "push", "-q", "origin", "HEAD:main")
    return commit


UP = "a.md/posts/a.md/posts/a.md/posts/a.md/" + "../" * 7 + "etc/passwd"


@pytest.mark.parametrize(("links", "existing", "bad"), [
    # posts/a.md is the repository's root; through it, the second link climbs out (each
    # step inside the repository when the links are not followed)
    ({"posts/a.md": "..", "posts/b.md": UP}, None, True),
    # the same through a link that was already there
    ({"posts/b.md": UP}, {"posts/a.md": ".."}, True),
    # a link to a link that leaves
    ({"posts/c.md": "d.md"}, {"posts/d.md": "../../outside"}, True),
    # a link to a link into .git
    ({"posts/c.md": "d.md/config"}, {"posts/d.md": "../.git"}, True),
    # a loop
    ({"posts/x.md": "y.md", "posts/y.md": "x.md"}, None, True),
    # through a link that stays inside: fine
    ({"posts/c.md": "d.md/p.md"}, {"posts/d.md": "../pages"}, False),
])
def test_a_link_may_not_leave_through_another_link(site: Site, tmp_path: Path,
                                                   links: dict[str, str],
                                                   existing: dict[str, str] | None,
                                                   bad: bool) -> None:
    anchored(site, tmp_path, report=True)
    commit = push_links(site, tmp_path, links, existing)
    r = keyed_run(site, tmp_path, "ci1")
    assert (r.code == 1) == bad, r.out + r.err
    assert (commit in r.json()["bad"]) == bad, r.out
    if bad:
        assert "symbolic link" in r.out, r.out


# -- another repository's ledgers under the same key -------------------------------------------

def drop_records_of(site: Site, commit: str) -> None:
    """Delete the remote job refs whose record names ``commit`` (the attacker's cleanup)."""
    for name in git(site.remote, "for-each-ref", "--format=%(refname)", "refs/pub/jobs/").split():
        if commit in git(site.remote, "log", "-1", "-p", "--format=", name, check=False):
            git(site.remote, "update-ref", "-d", name)


@pytest.mark.slow
def test_another_repositorys_ledgers_under_the_same_key_are_not_believed(
        site: Site, tmp_path: Path) -> None:
    """One key for two repositories: B, a fork the attacker can push (its CI has the key too,
    and its own anchor), runs more often than A. Its ledgers, merged into A's notes, must not
    stand for A's: here their four points would push out the one that shows A's force-push."""
    from test_confirm import ci_clone

    anchored(site, tmp_path)
    evil = attacker_clone(site, tmp_path)
    plain = []
    for i in range(4):
        git(evil, "commit", "-q", "--allow-empty", "-m", f"plain {i}")
        plain.append(git(evil, "rev-parse", "HEAD").strip())
    git(evil, "push", "-q", "origin", "HEAD:main")
    assert keyed_run(site, tmp_path, "ci1").code == 0
    # B: a fork of A as it is now, with its own CI (same key, its own anchor)
    fork = Site(tmp_path / "fork", tmp_path / "fork.git", site.env, site.repos)
    git(tmp_path, "clone", "-q", "--mirror", str(site.remote), str(fork.remote))
    git(fork.remote, "update-ref", "-d", "refs/notes/pub")
    site.repos.append(fork.remote)
    (tmp_path / "b").mkdir()
    for i, commit in enumerate(plain):
        git(fork.remote, "update-ref", "refs/heads/main", commit)
        r = ci_clone(fork, tmp_path / "b", f"ci{i}", depth=None).run_here("confirm", "--json")
        assert r.code == 0, r.out + r.err
    # A publishes once more, confirmed
    (gone,) = publish(site, 1, start=20)
    assert keyed_run(site, tmp_path, "ci2").code == 0
    # the attack on A: the publication force-pushed away, its record deleted, B's notes merged
    git(evil, "push", "-q", "-f", "origin", f"{plain[-1]}:main")
    drop_records_of(site, gone)
    git(evil, "fetch", "-q", str(fork.remote), "+refs/notes/pub:refs/notes/fork")
    ours = git(site.remote, "rev-parse", "refs/notes/pub").strip()
    merge = notes_merge(evil, [ours, git(evil, "rev-parse", "refs/notes/fork").strip()], ours)
    git(evil, "push", "-q", "origin", f"{merge}:refs/notes/pub")
    r = keyed_run(site, tmp_path, "ci3")
    assert r.code == 1, r.out + r.err
    assert gone in r.json()["rewritten"], r.out


@pytest.mark.slow
def test_an_anchor_from_before_lineages_goes_on_with_a_new_one(site: Site,
                                                               tmp_path: Path) -> None:
    """A format 1 anchor (no lineage) naming a ledger without a lineage: the run is fine and
    anchors a lineage from then on."""
    import json

    from test_confirm import KEY

    from gitpub.verify.ledger import Key, parse_ledger

    anchored(site, tmp_path)
    key = Key(KEY.encode())
    reader = attacker_clone(site, tmp_path, "legacy")  # stands for an older gitpub in CI
    git(reader, "fetch", "-q", "origin", "+refs/notes/pub:refs/notes/pub")
    raw = git(reader, "cat-file", "commit", "refs/notes/pub").split("\n\n", 1)[1].encode()
    found = parse_ledger(raw)
    assert found is not None and found[0].lineage
    legacy = found[0]._replace(lineage="", serial=found[0].serial + 1)
    tree = git(reader, "rev-parse", "refs/notes/pub^{tree}").strip()
    notes = git(reader, "commit-tree", tree, "-p", "refs/notes/pub",
                input=legacy.message("older gitpub", key, tree).encode()).strip()
    git(reader, "push", "-q", "origin", f"{notes}:refs/notes/pub")
    path = tmp_path / "ci-cache/confirm-anchor.json"
    path.write_text(json.dumps({"format": 1, "notes": notes, "serial": legacy.serial,
                                "branch": "main", "mac": key.mac("anchor", notes,
                                                                 str(legacy.serial), "main")}))
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 0, r.out + r.err
    data = json.loads(path.read_text())
    assert data["format"] == 2 and len(data["lineage"]) == 32
    assert keyed_run(site, tmp_path, "ci2").code == 0


# -- killed at its crash points, then run again --------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("point", ["confirm.notes-pushed", "git.ref-locked:1",
                                   "git.object-locked:3"])
def test_killed_the_next_run_goes_on_from_the_anchor(site: Site, tmp_path: Path,
                                                     point: str) -> None:
    """SIGKILL of a keyed, anchored run after it pushed its notes and before it wrote the
    anchor (and, for comparison, before the push): the next run in a fresh clone is not
    refused as a rollback, and the anchor moves on."""
    import json

    anchored(site, tmp_path)
    path = tmp_path / "ci-cache/confirm-anchor.json"
    publish(site, 1, start=30)
    notes = git(site.remote, "rev-parse", "refs/notes/pub").strip()
    before = json.loads(path.read_text())["serial"]
    r = keyed_run(site, tmp_path, "killed", env={"GITPUB_CRASH_AT": point})
    assert r.code == -9, r.out + r.err
    pushed = git(site.remote, "rev-parse", "refs/notes/pub").strip() != notes
    assert pushed == point.startswith("confirm."), point
    assert json.loads(path.read_text())["serial"] == before  # the anchor not written
    again = keyed_run(site, tmp_path, "again")
    assert again.code == 0, again.out + again.err
    assert json.loads(path.read_text())["serial"] == before + 1 + pushed
