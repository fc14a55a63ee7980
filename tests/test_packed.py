"""``git.packed``: one packed ref by binary search, a prefix by a range scan — checked against
C git's own reading of the same file (``git show-ref``), on files git itself wrote."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitpub.git import packed
from tests.conftest import Site, git

SHA = "0123456789abcdef0123456789abcdef01234567"


def packed_repo(tmp_path: Path, names: list[str]) -> Path:
    """A repository whose refs ``names`` are all packed by C git (one commit, many names)."""
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty",
        "-m", "x")
    head = git(repo, "rev-parse", "HEAD").strip()
    lines = "".join(f"create {n} {head}\n" for n in names)
    git(repo, "update-ref", "--stdin", input=lines.encode())
    git(repo, "tag", "-a", "-m", "t", "v1")  # an annotated tag: a peeled (^) line
    git(repo, "pack-refs", "--all", "--prune")
    return repo


def git_refs(repo: Path) -> dict[str, str]:
    out = git(repo, "show-ref")
    return {name: sha for sha, name in (line.split() for line in out.splitlines())}


def _no_dir_file_clash(names: list[str]) -> list[str]:
    """Without the names that are a directory of another (git cannot have both ``a`` and
    ``a/b``: ``update-ref`` refuses the pair)."""
    return [n for n in names if not any(m.startswith(n + "/") for m in names)]


NAMES = st.lists(st.from_regex(r"refs/pub/(jobs|active|outbox)/[a-z0-9]{1,6}(/[a-z]{1,3})?",
                               fullmatch=True), min_size=0, max_size=40, unique=True
                 ).map(_no_dir_file_clash)


@settings(max_examples=15, deadline=None)
@given(names=NAMES, probe=st.from_regex(r"refs/pub/(jobs|active|x)/[a-z0-9]{0,6}",
                                        fullmatch=True))
def test_lookup_and_prefix_agree_with_git(tmp_path_factory: pytest.TempPathFactory,
                                          names: list[str], probe: str) -> None:
    repo = packed_repo(tmp_path_factory.mktemp("p"), names)
    path = repo / ".git" / "packed-refs"
    want = git_refs(repo)
    for name, sha in want.items():
        assert packed.lookup(path, name) == sha
    assert packed.lookup(path, probe) == want.get(probe)
    for prefix in ("refs/pub/", "refs/pub/jobs/", "refs/pub/active/", probe, "refs/", "z"):
        assert packed.with_prefix(path, prefix) == {
            n: s for n, s in want.items() if n.startswith(prefix)}


def test_many_refs_and_boundaries(tmp_path: Path) -> None:
    names = [f"refs/pub/jobs/{i:05d}" for i in range(0, 3000, 3)]
    repo = packed_repo(tmp_path, names)
    path = repo / ".git" / "packed-refs"
    want = git_refs(repo)
    for i in range(0, 3000):
        name = f"refs/pub/jobs/{i:05d}"
        assert packed.lookup(path, name) == want.get(name)
    assert packed.lookup(path, "refs/pub/jobs/") is None
    assert packed.lookup(path, "refs/tags/v1") == want["refs/tags/v1"]
    assert len(packed.with_prefix(path, "refs/pub/jobs/")) == 1000


def test_unsorted_and_headerless_files_are_scanned(tmp_path: Path) -> None:
    path = tmp_path / "packed-refs"
    path.write_bytes(f"{SHA} refs/z\n{SHA.replace('0', '1')} refs/a\n".encode())
    assert packed.lookup(path, "refs/a") == SHA.replace("0", "1")
    assert packed.lookup(path, "refs/z") == SHA
    assert packed.with_prefix(path, "refs/") == {"refs/z": SHA, "refs/a": SHA.replace("0", "1")}


def test_missing_and_empty_files(tmp_path: Path) -> None:
    assert packed.lookup(tmp_path / "none", "refs/a") is None
    (tmp_path / "empty").write_bytes(b"")
    assert packed.lookup(tmp_path / "empty", "refs/a") is None
    assert packed.with_prefix(tmp_path / "empty", "refs/") == {}


@pytest.mark.parametrize("garbage", [b"xyz refs/a\n", f"{SHA}\n".encode(),
                                     f"^{SHA[:10]}\n".encode(), b"\n"])
def test_garbage_is_an_error_not_a_missing_ref(tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "packed-refs"
    path.write_bytes(b"# pack-refs with: peeled fully-peeled sorted \n" + garbage)
    with pytest.raises(packed.PackedRefsError):
        packed.lookup(path, "refs/a")


@pytest.mark.parametrize("damage", [b"this is not a ref line\n", b"0123abc"])
def test_a_corrupt_packed_refs_is_named_by_every_command(site: Site, damage: bytes) -> None:
    """A line git would not write (garbage, a truncated last line) makes C git refuse the
    whole repository: every command says where and how to repair it (exit 1), never an
    "unexpected error", and sync never takes it for a missing remote."""
    site.git("pack-refs", "--all")
    packed_refs = site.path / ".git/packed-refs"
    good = packed_refs.read_bytes()
    packed_refs.write_bytes(good + damage)
    for command in ("status", "push", "reconcile", "sync"):
        r = site.call(command)
        assert r.code == 1, (command, r.out + r.err)
        assert "packed-refs is corrupt" in r.err and "unexpected error" not in r.err, r.err
        assert "no remote named" not in r.err and "Traceback" not in r.err
    packed_refs.write_bytes(good)  # repaired as the hint says: git works again
    assert site.call("status").code == 0
