"""The fast start, attacked: where the quick way (``cli.quick``, ``git.odb``, ``git.refstore``,
``git.gitconfig``) could print something the full way (click, dulwich) would not.

Each test injects one fault and compares: the fast way against the full way (the repository
opened as one whose configuration is not plain, as ``test_odb`` does), and C git as the oracle
of what is in the repository. The faults: configuration lines git and dulwich end where the
scan did not (a form feed, a vertical tab, a Unicode line separator), a pack whose trailer or
object count does not match its index, a damaged pack entry with a good loose copy, a
``git pack-refs`` between the two reads of a listing, a reader that closes the pipe.
"""

from __future__ import annotations

import hashlib
import io
import zlib
from pathlib import Path

import pytest
from conftest import Site, git
from dulwich.config import ConfigFile
from hypothesis import given, settings
from hypothesis import strategies as st
from test_delivery import article, prepare
from test_odb import (
    compare_objects,
    jobs_site,
    loose_path,
    outputs,
    record_blob,
    same_with_dulwich,
)

from gitpub.core.errors import CorruptStateError
from gitpub.git import odb, packed
from gitpub.git.gitconfig import is_plain
from gitpub.git.repo import Repository

# -- the configuration: what git and dulwich read, the scan reads ----------------------------

#: Characters Python's ``str.splitlines`` ends a line at and git and dulwich do not.
NOT_LINE_ENDS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r"]


@pytest.mark.parametrize("sep", NOT_LINE_ENDS, ids=[f"U+{ord(c):04X}" for c in NOT_LINE_ENDS])
def test_a_setting_behind_a_character_git_does_not_end_lines_at_is_seen(
        tmp_path: Path, sep: str) -> None:
    """``filemode = true ;<sep>[user]`` is one line to git and dulwich (a comment after the
    value): the ``worktree`` below it is ``core.worktree``; the scan must not take it for
    ``user.worktree``."""
    config = tmp_path / "config"
    config.write_text(f"[core]\n\trepositoryformatversion = 0\n\tfilemode = true ;{sep}[user]\n"
                      "\tworktree = /somewhere/else\n", encoding="utf-8")
    assert "core.worktree=/somewhere/else" in git(tmp_path, "config", "-f", str(config), "-l")
    assert ConfigFile.from_path(str(config)).get((b"core",), b"worktree") == b"/somewhere/else"
    assert not is_plain(str(config))


def test_a_hidden_worktree_is_the_one_git_uses(site: Site, tmp_path: Path) -> None:
    """The end to end consequence: a repository whose ``core.worktree`` the scan missed was
    opened with the wrong working tree (and so the wrong ``.gitpub.yaml``)."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    config = site.path / ".git/config"
    before = config.read_text()
    config.write_text(before + f"[core]\n\tfilemode = true ;\x0c[user]\n\tworktree = {other}\n")
    try:
        assert site.git("rev-parse", "--show-toplevel").strip() == str(other)
        with Repository.discover(site.path / "posts") as repo:
            assert repo.work_tree == other
    finally:
        config.write_text(before)


def _plain_setting(section: tuple[bytes, ...], key: bytes, value: bytes) -> bool:
    """What ``gitconfig`` calls plain, judged on one setting as dulwich read it."""
    name = section[0].lower().decode("utf-8", "replace")
    if name.split(".", 1)[0] in ("include", "includeif", "extensions", "pack", "repack"):
        return False
    if section != (b"core",) and name != "core":
        return True
    if len(section) > 1:
        return True  # [core "x"]: core.x.key, nothing dulwich opens a repository with
    key_text = key.lower().decode("utf-8", "replace")
    if key_text in ("worktree", "bare"):
        return key_text == "bare" and value.lower() in (b"false", b"no", b"off", b"0")
    if key_text == "repositoryformatversion":
        return value in (b"0", b"1")
    return key_text in ("filemode", "logallrefupdates", "ignorecase", "symlinks", "editor")


FRAGMENTS = st.sampled_from([
    "[core]", "[Core]", "[user]", '[core "x"]', "[extensions]", "[include]", "[pack]",
    "[remote \"o\"]", "filemode = true", "worktree = /w", "bare = false", "bare = true",
    "repositoryformatversion = 0", "repositoryformatversion = 2", "objectformat = sha256",
    "path = x", "name = n ;", "name = n #", "editor = vi", "\tbare=false", "; c", "# c", "",
    "url = \"a;b\"", "email = x\\", "  [user]", "logallrefupdates = true ; [user]"])
ENDS = st.sampled_from(["\n", "\r\n", *NOT_LINE_ENDS])


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.tuples(FRAGMENTS, ENDS), max_size=10))
def test_what_the_scan_calls_plain_dulwich_reads_as_plain(tmp_path_factory: pytest.TempPathFactory,
                                                         parts: list[tuple[str, str]]) -> None:
    """Whatever configuration the scan calls plain, dulwich (the full way) reads and finds no
    setting that changes how the repository is opened or read."""
    text = "".join(f + e for f, e in parts)
    path = tmp_path_factory.mktemp("cfg") / "config"
    path.write_bytes(text.encode("utf-8"))
    if not is_plain(str(path), bare_matters=True):
        return
    parsed = ConfigFile.from_file(io.BytesIO(text.encode("utf-8")))  # must not raise
    for section in parsed.sections():
        for key, value in parsed[section].items():
            assert _plain_setting(section, key, value), (text, section, key, value)


# -- packs: the fast reader answers only where dulwich would --------------------------------

def _packed_site(site: Site) -> tuple[list[str], Path, Path]:
    ids = jobs_site(site)
    site.git("gc", "-q", "--prune=now")
    (idx,) = (site.path / ".git/objects/pack").glob("*.idx")
    pack = idx.with_suffix(".pack")
    pack.chmod(0o644)
    idx.chmod(0o644)
    return ids, idx, pack


def _offset(site: Site, idx: Path, sha: str) -> int:
    for line in git(site.path, "verify-pack", "-v", str(idx)).splitlines():
        if line.startswith(sha):
            return int(line.split()[4])
    raise AssertionError(f"{sha} is not in {idx}")


@pytest.mark.parametrize("damage", ["trailer", "object count"])
def test_a_pack_that_does_not_match_its_index_is_dulwichs_to_read(
        site: Site, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    """git refuses such a pack (``packfile … does not match index``), dulwich raises on its
    first read from it (``check_length_and_checksum``): the fast reader answered from it."""
    ids, idx, pack = _packed_site(site)
    blob = record_blob(site, ids[1])
    good_pack, good_idx = pack.read_bytes(), idx.read_bytes()
    data = bytearray(good_pack)
    if damage == "trailer":
        data[-1] ^= 0xFF
    else:  # one object more in the header, the trailer and the index's copy of it made right
        data[8:12] = (int.from_bytes(data[8:12], "big") + 1).to_bytes(4, "big")
        data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
        idx.write_bytes(good_idx[:-40] + bytes(data[-20:]) + good_idx[-20:])
    pack.write_bytes(bytes(data))
    try:
        with Repository.discover(site.path) as repo:
            assert repo._raw(blob) is None
        assert site.git("cat-file", "-t", blob, check=False) == ""  # git refuses the pack
        same_with_dulwich(site, ids, monkeypatch)
    finally:
        pack.write_bytes(good_pack)
        idx.write_bytes(good_idx)


def test_a_damaged_pack_entry_with_a_loose_copy_reads_as_dulwich_reads_it(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """dulwich (and git) look in the packs first: a damaged entry there is dulwich's error
    even when a good loose copy exists (git then reads the copy; dulwich does not)."""
    ids, idx, pack = _packed_site(site)
    blob = record_blob(site, ids[1])
    content = site.git("cat-file", "blob", blob).encode()
    loose = loose_path(site, blob)
    loose.parent.mkdir(exist_ok=True)
    loose.write_bytes(zlib.compress(b"blob %d\0%s" % (len(content), content)))
    good = pack.read_bytes()
    at = _offset(site, idx, blob) + 4
    pack.write_bytes(good[:at] + bytes([good[at] ^ 0xFF]) + good[at + 1:])
    try:
        assert site.git("cat-file", "blob", blob).encode() == content  # git: the loose copy
        same_with_dulwich(site, ids, monkeypatch)
    finally:
        pack.write_bytes(good)
        loose.unlink()


def test_a_damaged_pack_entry_is_reported_not_an_unexpected_error(site: Site) -> None:
    """dulwich, closed while the error of a read that failed inside its pack was on its way
    out (``status JOB``, ``log JOB``), raised ``BufferError``: the failed read's traceback
    still held a view of the mapped pack. The damage was lost to an ``unexpected error``."""
    ids, idx, pack = _packed_site(site)
    blob = record_blob(site, ids[1])
    good = pack.read_bytes()
    at = _offset(site, idx, blob) + 4
    pack.write_bytes(good[:at] + bytes([good[at] ^ 0xFF]) + good[at + 1:])
    try:
        for args in (["status", "--json", ids[1]], ["log", "--json", ids[1]]):
            shown = site.call(*args)
            assert "unexpected" not in shown.out and "unreadable" in shown.out, shown.out
            assert shown.json()["exit"] == shown.code != 0
        listed = site.call("status", "--all", "--json")
        assert listed.code == 1 and ids[1] in listed.out and "unexpected" not in listed.out
    finally:
        pack.write_bytes(good)


def test_a_pack_index_the_reader_cannot_read_leaves_every_object_to_dulwich(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """A truncated ``.idx`` could name any object: dulwich, which looks in the packs first,
    fails on every read (git skips the pack, ``index file … is too small``). The fast reader
    answered the loose objects of a job prepared after ``git gc`` all the same."""
    ids, idx, _pack = _packed_site(site)
    ids.append(str(prepare(site, "after-gc", "posts/after.md", article("after"))["job_id"]))
    assert loose_path(site, site.git("rev-parse", f"refs/pub/jobs/{ids[-1]}").strip()).exists()
    good = idx.read_bytes()
    idx.write_bytes(good[:600])
    try:
        with Repository.discover(site.path) as repo:
            assert repo._raw(site.git("rev-parse", f"refs/pub/jobs/{ids[-1]}").strip()) is None
        same_with_dulwich(site, ids, monkeypatch)
    finally:
        idx.write_bytes(good)


# -- refs: a listing while git packs them -----------------------------------------------------

def test_a_listing_sees_every_ref_while_git_packs_them(site: Site,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``git pack-refs --all`` writes ``packed-refs``, then deletes the loose files. A listing
    that reads ``packed-refs`` first and the loose files after can fall between the two and
    see neither: git reads the loose refs first for that reason (``files-backend.c``). The
    other writer is real git, run right after gitpub has read ``packed-refs``."""
    ids = jobs_site(site)
    assert list((site.path / ".git/refs/pub/jobs").iterdir())
    original = packed.with_prefix
    runs: list[str] = []

    def then_git_packs(path: Path, prefix: str) -> dict[str, str]:
        found = original(path, prefix)
        if not runs:
            runs.append(site.git("pack-refs", "--all"))
        return found

    monkeypatch.setattr(packed, "with_prefix", then_git_packs)
    listed = site.call("status", "--all", "--json")
    assert runs and not (site.path / ".git/refs/pub/jobs").exists()  # all packed now
    assert listed.code == 0, listed.out
    assert sorted(j["job_id"] for j in listed.json()["jobs"]) == sorted(ids)


# -- replace refs and grafts: what is stored, both ways ---------------------------------------

def test_replace_refs_and_grafts_are_not_followed_either_way(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """C git shows a replaced object in its place (``refs/replace/``) and honours
    ``info/grafts``; dulwich's object store does neither, so the fast reader must not either:
    a job's state is the commit its ref names, as stored."""
    ids = jobs_site(site)
    before = outputs(site, ids)
    ref = f"refs/pub/jobs/{ids[0]}"
    state = site.git("rev-parse", ref).strip()
    older = site.git("rev-parse", f"{ref}~2").strip()
    site.git("replace", state, older)
    assert site.git("rev-parse", f"{ref}^{{tree}}").strip() == site.git(
        "rev-parse", f"{older}^{{tree}}").strip()  # git shows the older state now
    grafts = site.path / ".git/info/grafts"
    grafts.parent.mkdir(exist_ok=True)
    grafts.write_text(f"{state}\n")  # git: the state commit has no parent
    try:
        assert outputs(site, ids) == before
        same_with_dulwich(site, ids, monkeypatch)
    finally:
        grafts.unlink()
        site.git("replace", "-d", state)


def test_a_pack_index_with_64_bit_offsets_is_read(site: Site,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Packs over 2 GiB keep their offsets in the index's 64-bit table; ``git index-pack
    --index-version=2,12`` puts there every offset but the first object's (git refuses an
    index with as many large offsets as objects), without the 2 GiB."""
    ids, idx, pack = _packed_site(site)
    idx.unlink()
    git(site.path, "index-pack", "--index-version=2,12", "-o", str(idx), str(pack))
    count = int.from_bytes(idx.read_bytes()[8 + 255 * 4:8 + 256 * 4], "big")
    assert len(idx.read_bytes()) == 8 + 256 * 4 + count * (20 + 4 + 4) + (count - 1) * 8 + 40
    assert compare_objects(site.path) == count
    same_with_dulwich(site, ids, monkeypatch)


@pytest.mark.parametrize("damaged", [False, True], ids=["as git wrote it", "damaged"])
def test_a_multi_pack_index_is_trusted_only_as_git_wrote_it(
        site: Site, monkeypatch: pytest.MonkeyPatch, damaged: bool) -> None:
    """dulwich looks objects up in ``multi-pack-index`` before the packs: a damaged one made
    it fail (``IndexError``) where the fast reader, which reads the packs' own indexes,
    answered. C git fails there too."""
    ids, _idx, _pack = _packed_site(site)
    blob = record_blob(site, ids[1])
    site.git("multi-pack-index", "write")
    midx = site.path / ".git/objects/pack/multi-pack-index"
    good = midx.read_bytes()
    if damaged:
        data = bytearray(good)
        for i in range(200, len(data) - 30, 7):
            data[i] ^= 0x55
        midx.chmod(0o644)
        midx.write_bytes(bytes(data))
    try:
        with Repository.discover(site.path) as repo:
            assert (repo._raw(blob) is None) == damaged
        same_with_dulwich(site, ids, monkeypatch)
    finally:
        midx.unlink()


@pytest.mark.parametrize("shape", ["{} junk\n", "  {}\n", "{}\x0c\n", "{}\x0b\n", "{}\r\n",
                                   "{}\t\n", "{}", "UPPER\n", "{}\n\n"])
def test_a_loose_ref_file_reads_as_git_reads_it(site: Site, shape: str) -> None:
    """git reads a loose ref as 40 hex digits (either case) followed by its end or a blank
    (space, tab, LF, CR: what may follow, as in ``FETCH_HEAD``, is ignored); anything else is
    a broken ref. gitpub read ``<id> junk`` as damage and ``  <id>`` or ``<id>\\f`` as the id."""
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
    finally:
        path.write_bytes(good)


@pytest.mark.parametrize("target", ["other job", "itself", "nothing"])
def test_a_job_ref_that_is_a_symbolic_ref_is_reported(
        site: Site, monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """``ref: <name>`` where a job's state should be: read as git reads it (followed), and
    then it is not that job's state (another job's, none, a loop) — reported, never taken
    for it, never an unexpected error. ``read_ref`` returned the text ``ref: …`` as an id."""
    ids = jobs_site(site)
    ref = f"refs/pub/jobs/{ids[1]}"
    path = site.path / ".git" / ref
    good = path.read_bytes()
    path.write_text("ref: " + {"other job": f"refs/pub/jobs/{ids[2]}", "itself": ref,
                               "nothing": "refs/pub/jobs/none"}[target] + "\n")
    try:
        with Repository.discover(site.path) as repo:
            if target == "other job":
                assert repo.read_ref(ref) == site.git("rev-parse", ref).strip()
            else:
                with pytest.raises(CorruptStateError):
                    repo.read_ref(ref)
        for args in (["status", "--json", ids[1]], ["status", "--all", "--json"]):
            shown = site.call(*args)
            assert "unexpected error" not in shown.out and shown.code != 0, shown.out
            assert ids[1] in shown.json().get("error", str(shown.json().get("errors")))
        same_with_dulwich(site, ids, monkeypatch)
    finally:
        path.write_bytes(good)


# -- git gc and git repack while status reads ---------------------------------------------------

@pytest.mark.parametrize("when", ["before a loose read", "after a pack is mapped"])
def test_git_gc_meanwhile_changes_nothing_status_prints(
        site: Site, monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """Real git packs the store in the middle of a read: ``git gc --prune=now`` just before
    the reader opens a loose object (gone: it is in a new pack now), ``git repack -a -d`` once
    the reader has mapped a pack (deleted: still mapped, still valid). Each read is the
    object or dulwich's answer; here every one is still read without dulwich."""
    ids = jobs_site(site)
    if when == "after a pack is mapped":
        site.git("gc", "-q")
        ids.append(str(prepare(site, "late", "posts/late.md", article("late"))["job_id"]))
    before = outputs(site, ids)
    command = ["gc", "-q", "--prune=now"] if when == "before a loose read" else \
        ["repack", "-q", "-a", "-d"]
    runs: list[str] = []
    hook = "_loose" if when == "before a loose read" else "_in_packs"
    original = getattr(odb.ObjectReader, hook)

    def meanwhile(self: odb.ObjectReader, *args: object, **kw: object) -> object:
        if not runs and (hook == "_loose" or self._packs):
            runs.append(site.git(*command))
        return original(self, *args, **kw)

    opened: list[bool] = []
    monkeypatch.setattr(odb.ObjectReader, hook, meanwhile)
    monkeypatch.setattr(Repository, "_open_dulwich",
                        lambda self: opened.append(True) or pytest.fail("dulwich was asked"))
    assert site.call("status", "--all", "--json").out == before[2][1]
    assert runs
    monkeypatch.undo()
    assert outputs(site, ids) == before and not opened


# -- a hostile job.json, read both ways --------------------------------------------------------

HOSTILE = {"nested": b"[" * 100_000 + b"]" * 100_000, "NUL": b'{"format": 1,\0 "x": 1}',
           "not UTF-8": b'{"format": 1, "author": "\xe9"}', "escapes": b'{"format": 1, '
           b'"author": "\\u001b[31m\\u202e\\ud800"}', "long number": b'{"format": ' + b"9" * 5000
           + b"}", "big": b'{"format": 1, "author": "' + b"x" * (1 << 20) + b'"}'}


def test_a_hostile_record_reads_the_same_both_ways_and_is_reported(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another clone's (or a hand's) ``job.json`` may be anything: both ways print the same
    bytes — one job's error, named, never an unexpected error or a traceback."""
    ids = jobs_site(site, 2)
    ref = f"refs/pub/jobs/{ids[1]}"
    state = site.git("rev-parse", ref).strip()
    entries = site.git("ls-tree", state)
    record = site.git("rev-parse", f"{ref}:job.json").strip()
    for name, data in HOSTILE.items():
        blob = site.git("hash-object", "-w", "--stdin", input=data).strip()
        tree = site.git("mktree", input=entries.replace(record, blob).encode()).strip()
        site.git("update-ref", ref, site.git("commit-tree", tree, "-p", state, "-m",
                                             f"hostile: {name}").strip())
        shown = site.call("status", "--json", ids[1])
        assert shown.code != 0 and ids[1] in shown.out, (name, shown.out)
        assert "unexpected error" not in shown.out and "Traceback" not in shown.err, name
        same_with_dulwich(site, ids, monkeypatch)
    site.git("update-ref", ref, state)
