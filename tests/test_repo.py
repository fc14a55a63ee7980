"""The git layer (``gitpub.git.repo``) on every way git stores a repository, and on damage.

gitpub reads objects through ``git cat-file``, reads and moves refs through ``for-each-ref``
and ``update-ref --stdin``, and writes objects with dulwich. So whatever git can store —
loose objects, packs with deltas, a multi-pack-index, 64-bit pack offsets, alternates, packed
refs, a linked worktree, SHA-256 — gitpub must read the same: each test changes how the
repository is stored (with real git) and compares what ``status`` and ``log`` print. C git is
the oracle of what is in the repository. Damage is injected in the files git reads.
"""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

import pytest
from conftest import Site, git, make_site, set_up_once
from test_delivery import article, prepare

from gitpub.core.errors import CorruptStateError
from gitpub.core.files import pub_dir
from gitpub.git.repo import Entry, RefUpdate, Repository

SHOWN = (["status", "--json"], ["status", "--all", "--json"], ["status", "--all"])


def jobs_site(site: Site, n: int = 3) -> list[str]:
    """``n`` prepared jobs, the first one delivered: a store with history, published and not.
    Made once per test process and copied in (``set_up_once``): how git stores it and what a
    test then does to it are the point, not the making."""
    def build(template: Site, where: Path) -> list[str]:
        ids = [str(prepare(template, f"repo-{i}", f"posts/repo-{i}.md", article(i))["job_id"])
               for i in range(n)]
        assert template.call("push", ids[0]).code == 0
        return ids

    return list(set_up_once(site, f"repo-jobs-{n}", build))


def outputs(site: Site, ids: list[str]) -> list[tuple[int, str, str]]:
    """What status and log print (code, stdout, stderr), for every job and the listings."""
    runs = [*SHOWN, *(["status", "--json", i] for i in ids), *(["log", "--json", i] for i in ids)]
    return [(r.code, r.out, r.err) for r in (site.call(*args) for args in runs)]


def all_objects(path: Path) -> list[str]:
    return git(path, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()


def read_every_object(path: Path) -> int:
    """Every object of the repository at ``path`` through gitpub, compared with C git."""
    with Repository.discover(path) as repo:
        objects = all_objects(path)
        for sha in objects:
            kind = git(path, "cat-file", "-t", sha).strip()
            raw = subprocess.run(["git", "cat-file", kind, sha], cwd=path, capture_output=True,
                                 check=True).stdout
            if kind == "blob":
                assert repo.blob(sha) == raw
            elif kind == "tree":
                assert repo.raw_tree(sha) == raw
                listed = git(path, "ls-tree", "-z", sha).split("\0")
                want = [(line.split("\t", 1)[1], int(line.split()[0], 8), line.split()[2])
                        for line in listed if line]
                assert [(n, e.mode, e.sha) for n, e in repo.tree_items(sha)] == want
            elif kind == "commit":
                info = repo.commit(sha)
                assert info.tree == git(path, "rev-parse", f"{sha}^{{tree}}").strip()
                assert list(info.parents) == git(path, "rev-parse", f"{sha}^@").split()
                assert info.commit_time == int(git(path, "log", "-1", "--format=%ct", sha))
    return len(objects)


# -- how git stores it -------------------------------------------------------------------------

@pytest.mark.slow
def test_packed_objects_and_refs_read_as_loose_ones(site: Site) -> None:
    ids = jobs_site(site)
    before = outputs(site, ids)
    assert read_every_object(site.path) > 30
    site.git("gc", "-q", "--aggressive", "--prune=now")  # packed, with deltas
    assert not list((site.path / ".git/objects").glob("??/*"))
    site.git("pack-refs", "--all")
    assert not list((site.path / ".git/refs/pub/jobs").glob("*"))
    assert read_every_object(site.path) > 30
    assert outputs(site, ids) == before


@pytest.mark.slow
def test_a_multi_pack_index_and_64_bit_offsets_read_as_packs(site: Site) -> None:
    ids = jobs_site(site)
    before = outputs(site, ids)
    site.git("repack", "-q", "-d")
    ids.append(str(prepare(site, "later", "posts/later.md", article("later"))["job_id"]))
    site.git("repack", "-q", "-d")  # two packs now
    before = outputs(site, ids)
    pack_dir = site.path / ".git/objects/pack"
    for idx in pack_dir.glob("*.idx"):  # every offset but the first in the 64-bit table
        pack = idx.with_suffix(".pack")
        idx.unlink()
        git(site.path, "index-pack", "--index-version=2,12", "-o", str(idx), str(pack))
    site.git("multi-pack-index", "write")
    assert (pack_dir / "multi-pack-index").exists()
    assert outputs(site, ids) == before
    assert read_every_object(site.path) > 30


@pytest.mark.slow
def test_objects_only_in_an_alternate_are_read(site: Site, tmp_path: Path) -> None:
    """A clone made with ``--shared`` borrows its objects from the original's store
    (``objects/info/alternates``): a job prepared there reads and publishes."""
    jobs_site(site, 1)
    borrower = tmp_path / "borrower"
    git(tmp_path, "clone", "-q", "--shared", str(site.path), str(borrower))
    git(borrower, "remote", "set-url", "origin", str(site.remote))
    git(borrower, "fetch", "-q", "origin")
    assert (borrower / ".git/objects/info/alternates").exists()
    other = Site(borrower, site.remote, site.env, [borrower])
    job = prepare(other, "borrowed", "posts/borrowed.md", article("borrowed"))
    assert other.call("push", str(job["job_id"])).code == 0
    assert git(site.remote, "show", "main:posts/borrowed.md") == article("borrowed")
    assert read_every_object(borrower) > 10


def test_a_sha256_repository_publishes_and_confirms(tmp_path: Path,
                                                    hermetic: dict[str, str]) -> None:
    """The whole way in a SHA-256 repository and remote: prepare, push, status, confirm; C git
    accepts every object (``fsck --strict`` at teardown) and reads the trailers."""
    remote = tmp_path / "remote.git"
    path = tmp_path / "site"
    git(tmp_path, "init", "-q", "--bare", "--object-format=sha256", "-b", "main", str(remote))
    git(tmp_path, "init", "-q", "--object-format=sha256", "-b", "main", str(path))
    site = Site(path, remote, hermetic, [path, remote])
    (path / "posts").mkdir()
    (path / "posts/welcome.md").write_text("# Welcome\n")
    site.write_config()
    site.git("add", ".")
    site.git("commit", "-q", "-m", "Start the site")
    site.git("remote", "add", "origin", str(remote))
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")
    job = prepare(site, "sha256", "posts/sha256.md", article("sha256"))
    pushed = site.call("push", "--json", str(job["job_id"]))
    assert pushed.code == 0, pushed.out
    shown = site.call("status", "--json", str(job["job_id"])).json()
    assert shown["state"] == "PUBLISHED" and len(shown["remote_commit"]) == 64
    tip = git(remote, "rev-parse", "main").strip()
    assert git(remote, "log", "-1", "--format=%(trailers:key=Blog-Job-Id,valueonly)",
               tip).strip() == job["job_id"]
    confirmed = site.call("--debug", "confirm", "--json")
    assert confirmed.code == 0, confirmed.out + confirmed.err
    for repo in (path, remote):
        assert subprocess.run(["git", "fsck", "--strict"], cwd=repo,
                              capture_output=True).returncode == 0


def test_a_repository_git_cannot_read_is_refused_clearly(site: Site) -> None:
    """A repository format this git does not know (a newer ``extensions`` entry, such as a
    reftable ref store on a git without reftable): git's refusal, one line, exit 2."""
    site.git("config", "core.repositoryformatversion", "1")
    site.git("config", "extensions.refStorage", "reftable")
    try:
        shown = site.call("status")
        assert shown.code == 2, shown.out + shown.err
        assert "not a git repository" in shown.err and "Traceback" not in shown.err
    finally:
        site.git("config", "--unset", "extensions.refStorage", check=False)
        (site.path / ".git/config").write_text(
            (site.path / ".git/config").read_text().replace("extensions", "x-unused"))


# -- replace refs and grafts: objects as stored ---------------------------------------------------

def test_replace_refs_and_grafts_are_not_followed(site: Site) -> None:
    """C git shows a replaced object in its place (``refs/replace/``) and honours
    ``info/grafts``; gitpub reads every object as stored (``GIT_NO_REPLACE_OBJECTS``): a job's
    state is the commit its ref names."""
    ids = jobs_site(site)
    before = outputs(site, ids)
    ref = f"refs/pub/jobs/{ids[0]}"
    state = site.git("rev-parse", ref).strip()
    older = site.git("rev-parse", f"{ref}~2").strip()
    site.git("replace", state, older)
    grafts = site.path / ".git/info/grafts"
    grafts.parent.mkdir(exist_ok=True)
    grafts.write_text(f"{state}\n")
    try:
        assert outputs(site, ids) == before
    finally:
        grafts.unlink()
        site.git("replace", "-d", state)


# -- damage -------------------------------------------------------------------------------------

def record_blob(site: Site, job_id: str) -> str:
    return site.git("rev-parse", f"refs/pub/jobs/{job_id}:job.json").strip()


@pytest.mark.parametrize("damage", ["truncated", "not zlib", "missing"])
def test_a_damaged_loose_record_is_reported(site: Site, damage: str) -> None:
    ids = jobs_site(site, 2)
    blob = record_blob(site, ids[1])
    path = site.path / ".git/objects" / blob[:2] / blob[2:]
    good = path.read_bytes()
    path.chmod(0o644)
    if damage == "truncated":
        path.write_bytes(zlib.compress(zlib.decompress(good))[:12])
    elif damage == "not zlib":
        path.write_bytes(b"garbage, not zlib")
    else:
        path.unlink()
    try:
        for args in (["status", "--json", ids[1]], ["log", "--json", ids[1]]):
            shown = site.call(*args)
            assert shown.code == 1, shown.out
            assert "unexpected" not in shown.out and blob in shown.out, shown.out
            assert ("missing" if damage == "missing" else "unreadable") in shown.out
        listed = site.call("status", "--all", "--json")
        assert listed.code == 1 and ids[1] in listed.out and "unexpected" not in listed.out
        assert site.call("status", "--json", ids[0]).code == 0  # the other job reads
    finally:
        path.write_bytes(good)


def test_a_damaged_pack_entry_is_reported_not_an_unexpected_error(site: Site) -> None:
    ids = jobs_site(site)
    site.git("gc", "-q", "--prune=now")
    blob = record_blob(site, ids[1])
    (idx,) = (site.path / ".git/objects/pack").glob("*.idx")
    pack = idx.with_suffix(".pack")
    offsets = {line.split()[0]: int(line.split()[4]) for line in git(
        site.path, "verify-pack", "-v", str(idx)).splitlines() if line[:1].isalnum()
        and len(line.split()) >= 5 and len(line.split()[0]) == 40}
    good = pack.read_bytes()
    at = offsets[blob] + 4
    pack.chmod(0o644)
    pack.write_bytes(good[:at] + bytes([good[at] ^ 0xFF]) + good[at + 1:])
    try:
        for args in (["status", "--json", ids[1]], ["log", "--json", ids[1]]):
            shown = site.call(*args)
            assert "unexpected" not in shown.out and shown.code != 0, shown.out
            assert shown.json()["exit"] == shown.code
    finally:
        pack.write_bytes(good)


@pytest.mark.parametrize("shape", ["{} junk\n", "  {}\n", "{}\x0c\n", "{}\r\n", "{}\t\n", "{}",
                                   "UPPER\n", "\n", ""])
def test_a_loose_ref_file_reads_as_git_reads_it(site: Site, shape: str) -> None:
    """A loose ref is what git reads in it: the id, or a broken ref — corruption, reported,
    never taken for no job."""
    ids = jobs_site(site, 1)
    ref = f"refs/pub/jobs/{ids[0]}"
    path = site.path / ".git" / ref
    good = path.read_bytes()
    value = good.strip().decode()
    path.write_bytes((value.upper() + "\n" if shape == "UPPER\n" else shape.format(value))
                     .encode())
    try:
        git_reads = site.git("rev-parse", "-q", "--verify", ref, check=False).strip()
        shown = site.call("status", "--json", ids[0])
        with Repository.discover(site.path) as repo:
            if git_reads:
                assert git_reads == value
                assert shown.code == 0, shown.out
                assert repo.read_ref(ref) == value == repo.list_refs("refs/pub/jobs/")[ids[0]]
            else:
                assert shown.code != 0 and "is corrupt" in shown.out, shown.out
                with pytest.raises(CorruptStateError):
                    repo.read_ref(ref)
                assert ids[0] not in repo.list_refs("refs/pub/jobs/")
                assert ids[0] in repo.ref_names("refs/pub/jobs/")
    finally:
        path.write_bytes(good)


@pytest.mark.parametrize("target", ["other job", "itself", "nothing"])
def test_a_job_ref_that_is_a_symbolic_ref_is_reported(site: Site, target: str) -> None:
    """``ref: <name>`` where a job's state should be: never taken for that job's state,
    never an unexpected error."""
    ids = jobs_site(site)
    ref = f"refs/pub/jobs/{ids[1]}"
    path = site.path / ".git" / ref
    good = path.read_bytes()
    path.write_text("ref: " + {"other job": f"refs/pub/jobs/{ids[2]}", "itself": ref,
                               "nothing": "refs/pub/jobs/none"}[target] + "\n")
    try:
        for args in (["status", "--json", ids[1]], ["status", "--all", "--json"]):
            shown = site.call(*args)
            assert "unexpected error" not in shown.out and shown.code != 0, shown.out
            assert ids[1] in shown.out and ("unreadable" if target == "other job"
                                            else "is corrupt") in shown.out, shown.out
        with Repository.discover(site.path) as repo:
            if target == "other job":  # followed, as git follows it: another job's state
                assert repo.read_ref(ref) == site.git("rev-parse", ref).strip()
            else:
                with pytest.raises(CorruptStateError):
                    repo.read_ref(ref)
    finally:
        path.write_bytes(good)


def test_a_tag_that_spells_a_job_ref_is_not_that_job(site: Site) -> None:
    """git's revision parser would take ``refs/tags/refs/pub/jobs/<id>`` (a tag a clone may
    fetch from anyone's push) for the job ref ``refs/pub/jobs/<id>`` when that one does not
    exist; gitpub reads refs by their full name only."""
    ids = jobs_site(site, 1)
    ghost = "11111111-2222-5333-8444-555555555555"
    site.git("update-ref", f"refs/tags/refs/pub/jobs/{ghost}", f"refs/pub/jobs/{ids[0]}")
    assert site.git("rev-parse", f"refs/pub/jobs/{ghost}", check=False).strip()  # git's dwim
    with Repository.discover(site.path) as repo:
        assert repo.read_ref(f"refs/pub/jobs/{ghost}") is None
    assert site.call("status", ghost).code != 0


# -- reading while git repacks --------------------------------------------------------------------

def test_git_gc_between_reads_of_one_command(site: Site) -> None:
    """One ``git cat-file`` serves a whole command: objects that ``git gc`` packs (and prunes
    as loose files) or ``git repack -a -d`` moves to a new pack meanwhile are still read."""
    ids = jobs_site(site)
    refs = [f"refs/pub/jobs/{i}" for i in ids]
    with Repository.discover(site.path) as repo:
        first = [repo.commit(repo.read_ref(r) or "").tree for r in refs[:1]]
        site.git("gc", "-q", "--prune=now")
        trees = [repo.commit(repo.read_ref(r) or "").tree for r in refs]
        site.git("repack", "-q", "-a", "-d")
        again = [repo.commit(repo.read_ref(r) or "").tree for r in refs]
    assert first == trees[:1] and trees == again


# -- moving refs ---------------------------------------------------------------------------------

def test_ref_moves_are_compare_and_swap_and_all_or_nothing(site: Site) -> None:
    head = site.git("rev-parse", "HEAD").strip()
    with Repository.discover(site.path) as repo:
        blob = repo.write_blob(b"x\n")
        tree = repo.write_tree(None, {"x": Entry(0o100644, blob)})
        other = repo.write_commit(tree, [head], b"other\n")
        assert repo.cas_ref("refs/pub/test/a", None, head)
        assert not repo.cas_ref("refs/pub/test/a", None, other)  # exists already
        assert not repo.cas_ref("refs/pub/test/a", other, head)  # not at that value
        assert repo.cas_ref("refs/pub/test/a", head, other)
        moves = [RefUpdate("refs/pub/test/b", head, None), RefUpdate("refs/pub/test/a", head,
                                                                     head)]  # stale: a is other
        assert not repo.update_refs(moves)
        assert repo.read_ref("refs/pub/test/b") is None  # nothing of it happened
        assert repo.update_refs([RefUpdate("refs/pub/test/b", head, None),
                                 RefUpdate("refs/pub/test/a", None, other)])
        assert repo.list_refs("refs/pub/test/") == {"b": head}
        assert not repo.delete_ref("refs/pub/test/b", other)
        site.git("pack-refs", "--all")
        assert repo.delete_ref("refs/pub/test/b", head)
        assert repo.list_refs("refs/pub/test/") == {}
    assert not (site.path / ".git/logs/refs/pub").exists()  # git's rule: no reflog there


def test_a_lock_git_holds_is_waited_for_then_reported(site: Site) -> None:
    head = site.git("rev-parse", "HEAD").strip()
    lock = site.path / ".git/refs/pub/test/a.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    with Repository.discover(site.path) as repo:
        repo.lock_wait = 0.3
        from gitpub.git.locks import LockedError

        with pytest.raises(LockedError, match="locked by another process"), \
                _another_gitpub_alive(site):
            repo.cas_ref("refs/pub/test/a", None, head)
    lock.unlink()


class _another_gitpub_alive:
    """Another gitpub process holding the repository open: young locks are not stale."""

    def __init__(self, site: Site) -> None:
        self.repo = Repository.discover(site.path)

    def __enter__(self) -> None:
        from gitpub.runtime import pubdir as locks

        self.presence = locks.Presence(pub_dir(self.repo.common_dir))

    def __exit__(self, *exc: object) -> None:
        self.presence.close()
        self.repo.close()


def test_written_objects_are_what_git_makes_of_the_same_content(site: Site) -> None:
    """Blobs, trees and commits written by gitpub hash as git hashes them and pass
    ``git fsck --strict`` (at teardown)."""
    with Repository.discover(site.path) as repo:
        blob = repo.write_blob(b"hello\n")
        assert blob == site.git("hash-object", "--stdin", input=b"hello\n").strip()
        tree = repo.write_tree(None, {"a/b/c.md": Entry(0o100644, blob),
                                      "a/b.md": Entry(0o100755, blob),
                                      "a-b": Entry(0o120000, blob), "z": Entry(0o100644, blob)})
        listed = site.git("ls-tree", "-r", tree)
        assert listed.splitlines() == [f"100644 blob {blob}\ta-b".replace("100644", "120000"),
                                       f"100755 blob {blob}\ta/b.md",
                                       f"100644 blob {blob}\ta/b/c.md",
                                       f"100644 blob {blob}\tz"]
        smaller = repo.write_tree(tree, {"a/b/c.md": None, "a/b.md": None})
        assert site.git("ls-tree", "--name-only", smaller).split() == ["a-b", "z"]
        commit = repo.write_commit(smaller, [site.git("rev-parse", "HEAD").strip()], b"m\n",
                                   when=1_700_000_000)
        assert site.git("cat-file", "-t", commit).strip() == "commit"
        assert site.git("log", "-1", "--format=%ct %s", commit).strip() == "1700000000 m"
        site.git("update-ref", "refs/pub/test/keep", commit)  # reachable for fsck


def test_a_second_site_shares_nothing_with_the_first(tmp_path: Path,
                                                     hermetic: dict[str, str]) -> None:
    """Two repositories opened in one process (a test, a bench) each read their own objects:
    each ``Repository`` has its own ``git cat-file``."""
    one, two = make_site(tmp_path, hermetic, "one"), make_site(tmp_path, hermetic, "two")
    (two.path / "posts/welcome.md").write_text("# Two\n")
    two.git("commit", "-qam", "two")
    with Repository.discover(one.path) as a, Repository.discover(two.path) as b:
        head_b = b.read_ref("refs/heads/main") or ""
        assert not a.has_object(head_b) and b.has_object(head_b)
