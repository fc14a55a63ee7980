"""`git pub sync --dry-run` lists everything sync would deliver, and changes nothing.

Every pending commit of the local branch, then the uncommitted content changes, each with what
sync would do with it and every path it adds, modifies or deletes (a rename is a deletion and an
addition: sync delivers it so). The list is checked against what the real sync then publishes,
and the dry run against a byte-for-byte snapshot of refs, index, HEAD, working tree and
``.git/pub``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from conftest import Site, git
from test_delivery import article, commit_file, other_writer


def tree_bytes(top: Path, skip: str | None = None) -> dict[str, bytes]:
    files = {}
    for root, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if d != skip]
        for name in names:
            p = Path(root, name)
            files[str(p.relative_to(top))] = (os.readlink(p).encode() if p.is_symlink()
                                              else p.read_bytes())
    return files


def state(site: Site) -> dict[str, Any]:
    """Refs, HEAD, index, the working tree and ``.git/pub``, byte for byte; and the objects."""
    gitdir = site.path / ".git"
    pub = gitdir / "pub"
    return {
        "refs": site.git("for-each-ref", "--format=%(refname) %(objectname)"),
        "packed": (gitdir / "packed-refs").read_bytes() if (gitdir / "packed-refs").exists()
        else None,
        "HEAD": (gitdir / "HEAD").read_bytes(),
        "index": hashlib.sha256((gitdir / "index").read_bytes()).hexdigest(),
        "index_mtime": (gitdir / "index").stat().st_mtime_ns,
        "work": tree_bytes(site.path, skip=".git"),
        "pub": tree_bytes(pub) if pub.exists() else None,
        "objects": site.git("count-objects", "-v"),
        "remote": git(site.remote, "for-each-ref"),
    }


def changes(line: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["change"], c["path"]) for c in line["changes"]]


def published(site: Site, commit: str) -> list[tuple[str, str]]:
    """What a published commit changes against its first parent, as C git says."""
    words = {"A": "added", "M": "modified", "D": "deleted", "T": "type_changed"}
    out = git(site.remote, "diff-tree", "-r", "--no-renames", "--name-status", "-z",
              f"{commit}^", commit).split("\0")
    return sorted((words[out[i]], out[i + 1]) for i in range(0, len(out) - 1, 2))


def pending_everything(site: Site) -> None:
    """Two hand commits (an addition and a change; a rename and a deletion), then uncommitted
    changes: a change, a new untracked page, a deletion, an executable bit."""
    (site.path / "posts/a.md").write_text(article("a"))
    (site.path / "posts/gone.md").write_text(article("gone"))
    (site.path / "posts/tool.md").write_text(article("tool"))
    site.git("add", "posts")
    site.git("commit", "-q", "-m", "more pages")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")
    (site.path / "posts/b.md").write_text(article("b"))
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nFixed.\n")
    site.git("add", "posts")
    site.git("commit", "-q", "-m", "add b, fix welcome")
    site.git("mv", "posts/a.md", "posts/renamed.md")
    site.git("rm", "-q", "posts/gone.md")
    site.git("commit", "-q", "-m", "rename a, drop gone")
    (site.path / "posts/b.md").write_text(article("b, again"))
    (site.path / "posts/new.md").write_text(article("new"))
    (site.path / "posts/renamed.md").unlink()
    (site.path / "posts/tool.md").chmod(0o755)


def test_dry_run_lists_every_path_and_sync_delivers_exactly_those(site: Site) -> None:
    pending_everything(site)
    first, second = site.git("rev-list", "--reverse", "origin/main..main").split()
    before = state(site)
    r = site.call("sync", "--dry-run", "--json")
    text = site.call("sync", "--dry-run")
    assert state(site) == before, "a dry run changes nothing"
    assert r.code == 0 and text.code == 0, r.out + r.err
    lines = r.json()["hand_edits"]["commits"]
    assert [(c["commit"], c["status"], c["uncommitted"]) for c in lines] == [
        (first, "deliver", False), (second, "deliver", False), (None, "deliver", True)]
    assert changes(lines[0]) == [("added", "posts/b.md"), ("modified", "posts/welcome.md")]
    assert changes(lines[1]) == [("deleted", "posts/a.md"), ("deleted", "posts/gone.md"),
                                 ("added", "posts/renamed.md")]
    assert changes(lines[2]) == [("modified", "posts/b.md"), ("added", "posts/new.md"),
                                 ("deleted", "posts/renamed.md"), ("modified", "posts/tool.md")]
    for line in lines:
        for word, path in changes(line):
            assert f"{word:<12} {path}" in text.out, text.out
    assert f"{first[:12]}  deliver" in text.out and "uncommitted   deliver" in text.out
    # the real sync delivers exactly that, commit by commit
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    done = r.json()["commits"]
    assert [c["status"] for c in done] == ["published"] * 3
    for plan, real in zip(lines, done, strict=True):
        assert sorted(changes(plan)) == published(site, real["remote_commit"]), plan


def test_dry_run_foresees_a_conflict_as_sync_meets_it(site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    commit_file(other, "posts/welcome.md", "# Welcome\n\nTheirs.\n")
    site.git("fetch", "-q", "origin")
    (site.path / "posts/mine.md").write_text(article("mine"))
    site.git("add", "posts/mine.md")
    site.git("commit", "-q", "-m", "mine")
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nMine.\n")
    before = state(site)
    r = site.call("sync", "--dry-run", "--json")
    assert state(site) == before
    lines = r.json()["hand_edits"]["commits"]
    assert [c["status"] for c in lines] == ["blocked", "conflict"]
    assert "posts/welcome.md: changed on the remote meanwhile" in lines[1]["reason"]
    assert changes(lines[1]) == [("modified", "posts/welcome.md")]
    real = site.call("sync", "--json")
    assert real.code == 4
    assert [c["status"] for c in real.json()["commits"]] == ["blocked", "conflict"]


def test_dry_run_shows_held_and_refused_commits(site: Site) -> None:
    (site.path / "README.txt").write_text("not content\n")
    site.git("add", "README.txt")
    site.git("commit", "-q", "-m", "readme")
    (site.path / "posts/x.md").write_text(article("x"))
    (site.path / "notes.txt").write_text("x\n")
    site.git("add", "posts/x.md", "notes.txt")
    site.git("commit", "-q", "-m", "mixed")
    before = state(site)
    r = site.call("sync", "--dry-run", "--json")
    assert state(site) == before
    lines = r.json()["hand_edits"]["commits"]
    assert [c["status"] for c in lines] == ["held", "refused"]
    assert changes(lines[0]) == [("added", "README.txt")]
    assert changes(lines[1]) == [("added", "notes.txt"), ("added", "posts/x.md")]
    assert "mixes content paths" in lines[1]["reason"]
    real = site.call("sync", "--json")
    assert [c["status"] for c in real.json()["commits"]] == ["held", "refused"]


def test_dry_run_with_a_secret_in_the_uncommitted_changes(site: Site) -> None:
    (site.path / "posts/key.md").write_text("# Key\n\naws AKIAIOSFODNN7EXAMPLQ\n")
    before = state(site)
    r = site.call("sync", "--dry-run", "--json")
    assert state(site) == before
    (line,) = r.json()["hand_edits"]["commits"]
    assert line["status"] == "refused" and line["commit"] is None
    assert changes(line) == [("added", "posts/key.md")]
    assert "AKIAIOSFODNN7EXAMPLQ" not in r.out
