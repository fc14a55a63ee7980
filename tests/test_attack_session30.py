"""What landed on main in session 30 under attack: the fetch that sets a corrupt loose object
aside (``store.fetchdir.fetch_refspecs``), sync's reading of the tracking branch's reflog,
``GitTooOld``, the moves of the typing branch and the tests the suite branch made faster.

Each test is a hole found by attacking them, kept closed: real git, real repositories, in
process where it can be.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest
from conftest import Site, git
from test_damage import damage, jobs_copied_in, loose_object, no_traceback, prepare
from test_delivery import remote_job_ids


def test_a_corrupt_commit_the_remote_does_not_have_is_not_set_aside(site: Site) -> None:
    """The person's own commit, not pushed yet, whose loose object is truncated: git's fetch
    for a push dies on it ("corrupt loose object"). It was moved into .git/pub/quarantine
    although the remote has no copy to fetch: the branch then named a missing object, the
    fetch failed all the same, and the error blamed the remote ("did not send all necessary
    objects"). A set-aside that the fetch made again does not heal is undone: the object is
    where it was, and git's own words about it are the error."""
    (site.path / "mine.txt").write_text("mine\n")
    site.git("add", "mine.txt")
    site.git("commit", "-qm", "mine")
    tip = site.git("rev-parse", "HEAD").strip()
    obj = loose_object(site, tip)
    sound = obj.read_bytes()
    obj.chmod(0o644)
    obj.write_bytes(sound[: len(sound) // 2])
    prepare(site, "k1", "posts/k1.md")
    try:
        r = site.call("push")
        assert r.code == 5, r.out + r.err
        assert obj.is_file(), r.out + r.err  # still where it was, as it was
        assert obj.read_bytes() == sound[: len(sound) // 2]
        said = r.out + r.err
        assert f"corrupt loose object '{tip}'" in said, said
        assert "did not send all necessary objects" not in said, said
    finally:  # the person's repair, for the fixture's fsck
        obj.parent.mkdir(exist_ok=True)
        obj.write_bytes(sound)


def test_a_run_killed_after_a_set_aside_leaves_it_kept_and_named(site: Site) -> None:
    """Killed (SIGKILL) right after moving the person's corrupt, unpushed commit into the
    quarantine, before its fetch was made again: nothing is lost silently. The bytes are
    kept whole in .git/pub/quarantine, the next run delivers the job, and doctor names the
    object with what to do, until a person repairs it."""
    (site.path / "mine.txt").write_text("mine\n")
    site.git("add", "mine.txt")
    site.git("commit", "-qm", "mine")
    tip = site.git("rev-parse", "HEAD").strip()
    obj = loose_object(site, tip)
    sound = obj.read_bytes()
    obj.chmod(0o644)
    obj.write_bytes(sound[: len(sound) // 2])
    prepare(site, "k1", "posts/k1.md")
    try:
        killed = site.run("push", env={"GITPUB_CRASH_AT": "fetch.set-aside"})
        assert killed.code == -9, killed.out + killed.err
        kept = list((site.path / ".git/pub/quarantine").iterdir())
        assert [p.name.split(".")[0] for p in kept] == [tip]
        assert kept[0].read_bytes() == sound[: len(sound) // 2]  # kept whole
        r = site.call("push")
        no_traceback(r.out, r.err)
        assert r.code == 0, r.out + r.err
        checks = {c["name"]: c for c in site.call("doctor", "--json").json()["checks"]}
        assert checks["quarantine"]["status"] == "warn", checks["quarantine"]
        assert tip in checks["quarantine"]["message"], checks["quarantine"]
    finally:  # the person's repair, for the fixture's fsck
        obj.parent.mkdir(exist_ok=True)
        obj.write_bytes(sound)
        for p in (site.path / ".git/pub/quarantine").iterdir():
            p.unlink()


def test_a_sound_copy_written_under_the_set_aside_is_not_moved(
        site: Site, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two gitpub processes of one clone fetch at once and both trip over the same corrupt
    loose object, a job state the remote has too. One reads it again (corrupt); the other
    sets it aside first and its fetch writes the sound copy in its place: the first then
    moved that sound copy into the quarantine, said 'corrupt' (and until its own fetch
    brought the object once more, the other process found it missing). What is moved is
    what is judged: bytes that are sound are put back, never quarantined."""
    from gitpub.git.catfile import CatFile, Unreadable
    from gitpub.git.repo import Repository

    kinds = ("pushing-dead", "pushing-dead", "committing-dead", "pushing-dead")
    ids = jobs_copied_in(site, kinds, tmp_path_factory)
    assert site.call("push").code == 0  # every state on the remote as it is here
    tip = site.git("rev-parse", f"refs/pub/jobs/{ids[1]}").strip()
    assert git(site.remote, "rev-parse", f"refs/pub/jobs/{ids[1]}").strip() == tip
    obj = loose_object(site, tip)
    sound = obj.read_bytes()
    damage(site, ids[1], "truncated-object")
    real, real_set_aside = CatFile.contents, Repository.set_aside_corrupt
    judging: list[str] = []

    def judged(self: Repository, sha: str) -> object:
        judging.append(sha)
        try:
            return real_set_aside(self, sha)
        finally:
            judging.pop()

    def other_process_heals_meanwhile(self: CatFile, oid: str) -> tuple[str, bytes] | None:
        try:
            return real(self, oid)
        except Unreadable:
            if judging == [tip] == [oid] and obj.exists() and obj.read_bytes() != sound:
                # the other process's set-aside, then its fetch (a new file renamed in)
                obj.unlink()
                spare = obj.with_name("tmp_obj_other")
                spare.write_bytes(sound)
                os.replace(spare, obj)
            raise

    monkeypatch.setattr(CatFile, "contents", other_process_heals_meanwhile)
    monkeypatch.setattr(Repository, "set_aside_corrupt", judged)
    prepare(site, "k2", "posts/k2.md")
    r = site.call("push")
    monkeypatch.undo()
    assert r.code == 0, r.out + r.err
    assert "moved the corrupt object" not in r.err, r.err
    assert obj.read_bytes() == sound
    quarantine = site.path / ".git/pub/quarantine"
    for kept in quarantine.iterdir() if quarantine.exists() else []:
        data = kept.read_bytes()
        assert data != sound, f"a sound object was quarantined: {r.err}"
        with pytest.raises(zlib.error):
            zlib.decompress(data)


def test_doctor_names_what_was_set_aside(site: Site) -> None:
    """An object set aside into .git/pub/quarantine was said once, in the progress of the
    command that moved it, and never again: doctor and status said everything was fine while
    a person's corrupt object waited there for inspection. doctor names it (a warning: the
    fetch healed what it could), with what to do. (What the quarantine keeps is the corrupt
    copy of an object the fetch brought back sound: here, the branch's commit.)"""
    name = site.git("rev-parse", "HEAD").strip()
    quarantine = site.path / ".git/pub/quarantine"
    quarantine.mkdir(parents=True)
    (quarantine / f"{name}.1796526374627270418").write_bytes(b"x\x01truncated")
    r = site.call("doctor", "--json")
    checks = {c["name"]: c for c in r.json()["checks"]}
    found = checks.get("quarantine")
    assert found is not None and found["status"] == "warn", r.out
    assert name in found["message"] and ".git/pub/quarantine" in found["message"], found
    assert "git fsck" in found["fix"], found


def test_more_corrupt_objects_than_one_fetch_sets_aside_heal_over_runs(
        site: Site, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """More corrupt local job states than one fetch sets aside (``SET_ASIDE_MAX``, 1 here):
    what one run set aside stays aside when the fetch fails on the next corrupt object (its
    absence is not why), so the next run goes on from there and the fetch works again; only
    a fetch that fails for another reason (the object missing now) puts back what it moved."""
    from gitpub.store import fetchdir

    kinds = ("pushing-dead", "pushing-dead", "committing-dead", "pushing-dead")
    ids = jobs_copied_in(site, kinds, tmp_path_factory)
    repairs = [damage(site, ids[i], "truncated-object") for i in (1, 3)]
    monkeypatch.setattr(fetchdir, "SET_ASIDE_MAX", 1)
    try:
        first = site.call("push")
        assert first.code != 0 and "moved the corrupt object" in first.err, first.out + first.err
        second = site.call("push")
        assert "put the corrupt object" not in first.err + second.err, first.err + second.err
        assert second.code == 1, second.out + second.err  # the two damaged jobs, named
        published = remote_job_ids(site)
        for job_id in (ids[0], ids[2]):
            assert published.count(job_id) == 1, (job_id, published, second.out)
        assert len(list((site.path / ".git/pub/quarantine").iterdir())) == 2
    finally:
        for repair in repairs:
            repair()


def test_a_remote_line_naming_an_object_is_not_taken_for_gits_own(
        site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a server prints comes as ``remote: …`` lines; only git's own lines about a loose
    object here may make gitpub read that object again and set it aside. A line such as
    ``remote: hook failed: error: corrupt loose object '<id>'`` was taken for git's: the
    server chose which object of this clone gitpub read whole again (a big one: its size in
    memory)."""
    from gitpub.git.repo import Repository

    sound = site.git("rev-parse", "HEAD").strip()
    server = tmp_path / "upload-pack"
    server.write_text("#!/bin/sh\necho \"remote: hook failed: error: corrupt loose object "
                      f"'{sound}'\" >&2\nexit 1\n")
    server.chmod(0o755)
    site.git("config", "remote.origin.uploadpack", str(server))
    asked: list[str] = []
    real = Repository.set_aside_corrupt

    def recorded(self: Repository, sha: str) -> Path | None:
        asked.append(sha)
        return real(self, sha)

    monkeypatch.setattr(Repository, "set_aside_corrupt", recorded)
    prepare(site, "k1", "posts/k1.md")
    r = site.call("push")
    assert r.code == 5 and "hook failed" in r.out + r.err, r.out + r.err
    assert asked == [], asked
