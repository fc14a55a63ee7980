"""gitpub's own loose-object writer (``git.loose``, a plain repository) writes what dulwich
writes: the same ids for the same blobs, trees and commits, byte for byte, and objects that
C git reads and ``git fsck --strict`` accepts. Refs move under git's lock-file protocol
(``git.lockfile``) either way."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import git

from gitpub.git import repo as repo_module
from gitpub.git.lockfile import FileLocked, LockFile
from gitpub.git.repo import MODE_FILE, Entry, Repository
from gitpub.git.values import Identity

MODE_EXEC = 0o100755
MODE_LINK = 0o120000


def fresh(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    git(tmp_path, "init", "-q", str(path))
    return path


def write_everything(repo: Repository) -> list[str]:
    """Blobs, nested trees (changed, moved, emptied, a file replacing a directory, names that
    sort differently as directories) and commits; every id written."""
    ids = [repo.write_blob(b""), repo.write_blob(b"hello\n"), repo.write_blob(bytes(range(256)))]
    a, b = ids[1], ids[2]
    changes = {"a": Entry(MODE_FILE, a), "a.b": Entry(MODE_FILE, b), "a-b/c": Entry(MODE_FILE, a),
               "d/e/f.txt": Entry(MODE_EXEC, b), "d/e/g": Entry(MODE_LINK, a),
               "ü/naïve.md": Entry(MODE_FILE, b), "z/y/x/w": Entry(MODE_FILE, a)}
    t1 = repo.write_tree(None, changes)
    t2 = repo.write_tree(t1, {"d/e/f.txt": None, "d/e/g": None, "a.b/c": Entry(MODE_FILE, a),
                              "a.b": None, "z/y/x/w": Entry(MODE_FILE, b)})
    t3 = repo.write_tree(t2, {"z": Entry(MODE_FILE, a), "a-b/c": None})
    empty = repo.write_tree(t3, {p: None for p in ("a", "a.b/c", "z", "ü/naïve.md")})
    c1 = repo.write_commit(t1, [], b"first\n\nbody\n", when=1_700_000_000)
    c2 = repo.write_commit(t2, [c1], b"second\n", when=1_700_000_001,
                           author=Identity("A Writer", "a@example.com"),
                           committer=Identity("C Ommitter", "c@example.com"))
    c3 = repo.write_commit(t3, [c2, c1], b"merge\n", when=1_700_000_002)
    return [*ids, t1, t2, t3, empty, c1, c2, c3]


def test_the_plain_writer_writes_what_dulwich_writes(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    plain_path, other_path = fresh(tmp_path, "plain"), fresh(tmp_path, "dulwich")
    with Repository.discover(plain_path) as plain:
        assert plain.plain
        ours = write_everything(plain)
    with monkeypatch.context() as m:
        m.setattr(repo_module, "is_plain", lambda path, **kw: False)
        with Repository.discover(other_path) as other:
            assert not other.plain
            theirs = write_everything(other)
    assert ours == theirs
    for sha in ours:  # C git reads each, the same bytes in both repositories
        assert git(plain_path, "cat-file", "-p", sha) == git(other_path, "cat-file", "-p", sha)
        loose = plain_path / ".git/objects" / sha[:2] / sha[2:]
        assert loose.is_file() and not loose.stat().st_mode & 0o222  # read-only, as git's
    git(plain_path, "update-ref", "refs/heads/main", ours[-1])
    subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=plain_path, check=True,
                   capture_output=True)
    assert not list((plain_path / ".git/objects").glob("??/*.lock"))


def test_an_object_being_written_by_another_process_is_waited_for(tmp_path: Path) -> None:
    path = fresh(tmp_path, "locked")
    with Repository.discover(path) as repo:
        sha = "ce013625030ba8dba906f756967f9e9ca394464a"  # the blob "hello\n"
        target = path / ".git/objects" / sha[:2] / sha[2:]
        target.parent.mkdir(parents=True)
        holder = LockFile(target)  # another writer holds the object's lock
        with pytest.raises(FileLocked):
            LockFile(target)
        holder.abort()
        assert repo.write_blob(b"hello\n") == sha
        assert git(path, "cat-file", "blob", sha) == "hello\n"


def test_refs_move_by_compare_and_swap_with_a_reflog(tmp_path: Path) -> None:
    path = fresh(tmp_path, "refs")
    with Repository.discover(path) as repo:
        tree = repo.write_tree(None, {"f": Entry(MODE_FILE, repo.write_blob(b"x\n"))})
        one = repo.write_commit(tree, [], b"one\n")
        two = repo.write_commit(tree, [one], b"two\n")
        assert repo.cas_ref("refs/notes/pub", None, one, "gitpub confirm:\nfirst")
        assert not repo.cas_ref("refs/notes/pub", None, two)  # it moved: no blind write
        assert repo.cas_ref("refs/notes/pub", one, two, "second")
        assert git(path, "rev-parse", "refs/notes/pub").strip() == two
        log = git(path, "reflog", "show", "--format=%H %gs", "refs/notes/pub").splitlines()
        assert log == [f"{two} second", f"{one} gitpub confirm: first"]
