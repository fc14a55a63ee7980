"""The read path without dulwich (``git.odb``, ``git.reading``): its every answer is dulwich's.

Each test reads the same repository twice — as ``status`` and ``log`` now do (``git.odb``, no
dulwich), and the full way (dulwich only: the repository opened as one whose configuration is
not plain) — and compares: every object, and the bytes ``status``/``log`` print. The faults are
the ones a reader of git's files meets: objects packed by ``git gc`` (deltas), a damaged loose
object, a damaged pack, an object of another id in a loose file, a ref both packed and loose,
peeled lines, objects only in an alternate, a linked worktree, configurations that are not
plain. C git is the oracle of what is in the repository (``git cat-file``).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from conftest import Site, git
from dulwich.objects import Commit, ShaFile, Tree
from dulwich.pack import create_delta
from dulwich.repo import Repo
from hypothesis import given, settings
from hypothesis import strategies as st
from test_delivery import article, prepare

from gitpub.git import odb
from gitpub.git import repo as repo_module
from gitpub.git.repo import Repository

SHOWN = (["status", "--json"], ["status"], ["status", "--all", "--json"], ["status", "--all"])


def all_objects(path: Path) -> list[str]:
    out = git(path, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return out.split()


def jobs_site(site: Site, n: int = 3) -> list[str]:
    """``n`` prepared jobs, the first one delivered: a store with history, published and not."""
    ids = [str(prepare(site, f"odb-{i}", f"posts/odb-{i}.md", article(i))["job_id"])
           for i in range(n)]
    assert site.call("push", ids[0]).code == 0
    return ids


def outputs(site: Site, ids: list[str]) -> list[tuple[int, str, str]]:
    """What status and log print (code, stdout, stderr), for every job and the listings."""
    runs = [*SHOWN, *(["status", "--json", i] for i in ids), *(["log", i] for i in ids),
            *(["log", "--json", i] for i in ids)]
    return [(r.code, r.out, r.err) for r in (site.call(*args) for args in runs)]


def same_with_dulwich(site: Site, ids: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    fast = outputs(site, ids)
    with monkeypatch.context() as m:
        m.setattr(repo_module, "is_plain", lambda path, **_: False)
        full = outputs(site, ids)
    assert fast == full


def compare_objects(path: Path) -> int:
    """Every object of the repository at ``path`` read both ways; how many the fast reader
    answered (all of them, in a healthy repository)."""
    answered = 0
    with Repository.discover(path) as fast, Repo(str(path)) as full:
        assert fast._reader is not None
        for sha in all_objects(path):
            obj = full.object_store[sha.encode()]
            got = fast._raw(sha)
            assert got == (obj.type_name, obj.as_raw_string()), sha
            answered += 1
            if isinstance(obj, Commit):
                info = fast.commit(sha)
                assert (info.tree, info.parents, info.message, info.commit_time) == (
                    obj.tree.decode(), tuple(p.decode() for p in obj.parents), obj.message,
                    obj.commit_time)
                assert odb.parse_commit(got[1]) is not None  # gitpub's and git's commits
            if isinstance(obj, Tree):
                want = [(i.path.decode(), i.mode, i.sha.decode()) for i in obj.iteritems()]
                assert [(n, e.mode, e.sha) for n, e in fast.tree_items(sha)] == want
                for name, _mode, _sha in want:
                    entry = fast.lookup(sha, name)
                    assert entry is not None and (name, entry.mode, entry.sha) in want
                assert fast.lookup(sha, "no/such/path") is None
    return answered


def test_every_object_reads_as_dulwich_reads_it_loose_and_packed(site: Site) -> None:
    ids = jobs_site(site)
    assert compare_objects(site.path) > 30
    site.git("gc", "-q", "--aggressive", "--prune=now")  # packed, with deltas
    assert not list((site.path / ".git/objects").glob("??/*"))
    verify = git(site.path, "verify-pack", "-v",
                 *map(str, (site.path / ".git/objects/pack").glob("*.idx")))
    assert any(len(line.split()) >= 7 for line in verify.splitlines())  # some are deltas
    assert compare_objects(site.path) > 30
    assert ids


def test_status_and_log_print_the_same_bytes_read_either_way(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = jobs_site(site)
    same_with_dulwich(site, ids, monkeypatch)
    site.git("gc", "-q", "--prune=now")
    same_with_dulwich(site, ids, monkeypatch)
    site.git("pack-refs", "--all")  # every job ref packed
    assert not list((site.path / ".git/refs/pub/jobs").glob("*"))
    same_with_dulwich(site, ids, monkeypatch)


def loose_path(site: Site, sha: str) -> Path:
    return site.path / ".git/objects" / sha[:2] / sha[2:]


def record_blob(site: Site, job_id: str) -> str:
    return site.git("rev-parse", f"refs/pub/jobs/{job_id}:job.json").strip()


@pytest.mark.parametrize("damage", ["truncated", "not zlib", "another object", "wrong size"])
def test_a_damaged_loose_record_is_reported_as_dulwich_reports_it(
        site: Site, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    ids = jobs_site(site)
    blob = record_blob(site, ids[1])
    path = loose_path(site, blob)
    good = path.read_bytes()
    other = record_blob(site, ids[2])
    bad = {"truncated": good[: len(good) // 2],
           "not zlib": b"this is not zlib data at all",
           "another object": loose_path(site, other).read_bytes(),  # valid, of another id
           "wrong size": zlib.compress(b"blob 999\0" + zlib.decompress(good).split(b"\0", 1)[1]),
           }[damage]
    path.chmod(0o644)
    path.write_bytes(bad)
    try:
        with Repository.discover(site.path) as repo:
            assert repo._raw(blob) is None  # never a wrong object: dulwich is asked instead
        listed = site.call("status", "--json")
        if damage != "wrong size":  # dulwich reads that one anyway (it checks no size)
            assert listed.code == 1 and ids[1] in listed.out  # the job's error, named
        same_with_dulwich(site, ids, monkeypatch)
    finally:
        path.write_bytes(good)


def test_a_damaged_pack_is_read_through_dulwich(site: Site,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ids = jobs_site(site)
    blob = record_blob(site, ids[1])
    site.git("gc", "-q", "--prune=now")
    (idx,) = (site.path / ".git/objects/pack").glob("*.idx")
    pack = idx.with_suffix(".pack")
    offsets = {line.split()[0]: int(line.split()[4])
               for line in git(site.path, "verify-pack", "-v", str(idx)).splitlines()
               if len(line.split()) >= 5 and len(line.split()[0]) == 40}
    good = pack.read_bytes()
    at = offsets[blob] + 4  # inside the record's compressed data
    pack.chmod(0o644)
    pack.write_bytes(good[:at] + bytes([good[at] ^ 0xFF]) + good[at + 1:])
    try:
        with Repository.discover(site.path) as repo:
            assert repo._raw(blob) is None
            assert repo._raw(record_blob(site, ids[0])) is not None  # the rest still reads
        same_with_dulwich(site, ids, monkeypatch)
    finally:
        pack.write_bytes(good)


def test_a_loose_ref_wins_over_its_packed_value_and_peeled_lines_are_skipped(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = jobs_site(site)
    site.git("tag", "-a", "-m", "a tag", "v1")  # a peeled line in packed-refs
    site.git("pack-refs", "--all")
    assert "^" in (site.path / ".git/packed-refs").read_text()
    packed_value = site.git("rev-parse", f"refs/pub/jobs/{ids[1]}").strip()
    assert site.call("resolve", ids[1], "--abandon").code == 0  # a loose ref, newer
    loose = site.git("rev-parse", f"refs/pub/jobs/{ids[1]}").strip()
    assert loose != packed_value
    assert f"refs/pub/jobs/{ids[1]}" in (site.path / ".git/packed-refs").read_text()
    with Repository.discover(site.path) as repo:
        assert repo.read_ref(f"refs/pub/jobs/{ids[1]}") == loose
        assert repo.list_refs("refs/pub/jobs/")[ids[1]] == loose
        assert repo.read_ref("refs/tags/v1") == site.git("rev-parse", "v1").strip()
    assert '"state": "SKIPPED"' in site.call("status", "--json", ids[1]).out
    same_with_dulwich(site, ids, monkeypatch)


def test_objects_in_an_alternate_are_read_through_dulwich(site: Site, tmp_path: Path) -> None:
    ids = jobs_site(site)
    shared = tmp_path / "shared"
    git(tmp_path, "clone", "-q", "--shared", str(site.path), str(shared))
    git(shared, "fetch", "-q", str(site.path), "refs/pub/*:refs/pub/*")
    site.repos.append(shared)
    assert (shared / ".git/objects/info/alternates").exists()
    own = shared / ".git/objects"
    assert not list(own.glob("??/*")) and not list(own.glob("pack/*.pack"))
    other = Site(shared, site.remote, site.env, [])
    with Repository.discover(shared) as repo:
        blob = record_blob(other, ids[1])
        assert repo._raw(blob) is None  # not here: the alternate is dulwich's to read
        assert repo.blob(blob) == site.git("cat-file", "blob", blob).encode()
    for args in (["status", "--all", "--json"], ["log", ids[1]]):
        assert other.call(*args).out == site.call(*args).out


def test_a_linked_worktree_reads_the_common_store(site: Site, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ids = jobs_site(site)
    wt = tmp_path / "wt"
    site.git("worktree", "add", "-q", "-b", "side", str(wt))
    other = Site(wt, site.remote, site.env, [])
    with Repository.discover(wt) as repo:
        assert repo._reader is not None and repo.common_dir != repo.git_dir
    for args in (["status", "--json"], ["log", ids[2]]):
        assert other.call(*args).out == site.call(*args).out
    same_with_dulwich(other, ids, monkeypatch)


@pytest.mark.parametrize("setting", [
    ["extensions.worktreeConfig", "true"],
    ["include.path", "no-such-file"],
    ["core.bare", "false\\"],  # a continued line: not read by the scan
])
def test_a_configuration_that_is_not_plain_is_read_the_full_way(
        site: Site, monkeypatch: pytest.MonkeyPatch, setting: list[str]) -> None:
    ids = jobs_site(site)
    before = outputs(site, ids)
    config = site.path / ".git/config"
    text = config.read_text()
    if setting[1].endswith("\\"):
        config.write_text(text + "[core]\n\tbare = \\\n false\n")
    else:
        site.git("config", *setting)
    try:
        with Repository.discover(site.path) as repo:
            assert repo._reader is None and repo._dulwich is not None
        assert outputs(site, ids) == before
    finally:
        config.write_text(text)


# -- the parsers and the delta: dulwich's answer, or none ------------------------------------

def dulwich_tree(data: bytes) -> dict[bytes, tuple[int, str]] | None:
    try:
        tree = ShaFile.from_raw_string(Tree.type_num, data)
        return {n: (m, s.decode()) for n, (m, s) in tree._entries.items()}
    except Exception:
        return None


ENTRY = st.tuples(st.sampled_from([b"100644", b"100755", b"40000", b"120000", b"160000",
                                   b"040000", b"644", b"1x0", b""]),
                  st.binary(min_size=0, max_size=6), st.binary(min_size=19, max_size=21))


@settings(max_examples=300, deadline=None)
@given(entries=st.lists(ENTRY, max_size=6), tail=st.binary(max_size=3))
def test_parse_tree_is_dulwichs_reading_or_none(
        entries: list[tuple[bytes, bytes, bytes]], tail: bytes) -> None:
    data = b"".join(m + b" " + n + b"\0" + s for m, n, s in entries) + tail
    mine = odb.parse_tree(data)
    if mine is not None:
        assert mine == dulwich_tree(data)


HEADER = st.sampled_from([
    b"tree " + b"a" * 40, b"parent " + b"b" * 40, b"parent " + b"c" * 39,
    b"author A <a@b> 1700000000 +0000", b"author A <a@b> 17x +0000", b"author A",
    b"committer C <c@d> 1700000001 -0130",
    b"committer C <c@d> 17x +0000", b"committer C c@d 1 +0000", b"encoding ISO-8859-1",
    b"gpgsig -----BEGIN", b" continued", b"mergetag x", b"tree " + b"d" * 40, b""])


@settings(max_examples=300, deadline=None)
@given(headers=st.lists(HEADER, max_size=7), message=st.binary(max_size=20),
       blank=st.booleans())
def test_parse_commit_is_dulwichs_reading_or_none(headers: list[bytes], message: bytes,
                                                  blank: bool) -> None:
    data = b"\n".join(headers) + (b"\n\n" if blank else b"\n") + message
    mine = odb.parse_commit(data)
    if mine is None:
        return
    theirs = ShaFile.from_raw_string(Commit.type_num, data)
    assert isinstance(theirs, Commit)
    assert mine == (theirs.tree.decode(), tuple(p.decode() for p in theirs.parents),
                    theirs.message, theirs.commit_time, theirs.encoding)


@settings(max_examples=200, deadline=None)
@given(base=st.binary(max_size=300), target=st.binary(max_size=300),
       share=st.integers(min_value=0, max_value=300))
def test_apply_delta_undoes_dulwichs_delta(base: bytes, target: bytes, share: int) -> None:
    target = base[:share] + target + base[share:]  # something to copy
    delta = b"".join(create_delta(base, target))
    assert odb.apply_delta(base, delta) == target
