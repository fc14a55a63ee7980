"""``git pub confirm`` checks the remote's job store against the branch (``verify.store_check``).

Each rule is broken for real on the remote — a job ref or an archive entry forged in another
clone and pushed, a job ref deleted — and CI's confirm (a fresh shallow clone, with the key,
or a full one without) must say BAD, naming the job and the commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Site, git
from test_confirm import ci_clone, publish, remote_notes

from gitpub.core.record import parse_record
from gitpub.git.repo import MODE_FILE, Entry, Repository
from gitpub.store.archive import Archive, Final
from gitpub.verify.store_check import ARCHIVE_CHECKED

JOBS = "refs/pub/jobs/"


def job_ids(site: Site) -> list[str]:
    out = site.git("for-each-ref", "--format=%(refname)", JOBS)
    return [line.removeprefix(JOBS) for line in out.split()]


def fold(site: Site) -> None:
    site.write_config("archive_after: 1\n")
    r = site.run_here("reconcile")
    assert r.code == 0 and "folded" in r.err, r.out + r.err
    site.write_config()


def forged_state(repo: Repository, parent: str, **changes: object) -> str:
    """A state commit on top of ``parent`` whose job.json has ``changes``."""
    info = repo.commit(parent)
    entry = repo.lookup(info.tree, "job.json")
    assert entry is not None
    data = json.loads(repo.blob(entry.sha))
    data.update(changes)
    blob = repo.write_blob(json.dumps(data, sort_keys=True).encode())
    parse_record(repo.blob(blob))  # still a well-formed record
    tree = repo.write_tree(info.tree, {"job.json": Entry(MODE_FILE, blob)})
    return repo.write_commit(tree, [parent], b"PUBLISHED: confirm: forged\n")


def attacker(site: Site, tmp_path: Path) -> Path:
    path = tmp_path / "attacker"
    git(tmp_path, "clone", "-q", str(site.remote), str(path))
    git(path, "fetch", "-q", "origin", "+refs/pub/*:refs/pub/*")
    site.repos.append(path)
    return path


def root_commit(site: Site) -> str:
    return git(site.remote, "rev-list", "--max-parents=0", "main").strip()


@pytest.mark.slow
def test_confirm_agrees_with_the_store_and_marks_the_archive(site: Site,
                                                             tmp_path: Path) -> None:
    publish(site, 2)
    fold(site)
    publish(site, 1, start=2)
    r = ci_clone(site, tmp_path, "ci").run_here("confirm", "--json")
    assert r.code == 0, r.out + r.err
    archive = git(site.remote, "rev-parse", "refs/pub/archive").strip()
    assert ARCHIVE_CHECKED in remote_notes(site, archive)
    full = ci_clone(site, tmp_path, "full", depth=None)
    r = full.run_here("confirm", "--json", env={"GITPUB_CONFIRM_KEY": ""})  # nothing believed
    assert r.code == 0, r.out + r.err
    r = ci_clone(site, tmp_path, "ci2").run_here("confirm", "--json")
    assert r.code == 0 and r.json()["checked"] <= 1, r.out + r.err


def test_a_published_job_ref_naming_an_unverified_commit_is_bad(site: Site,
                                                                tmp_path: Path) -> None:
    publish(site, 1)
    (job_id,) = job_ids(site)
    assert ci_clone(site, tmp_path, "ci0").run_here("confirm").code == 0
    evil = attacker(site, tmp_path)
    wrong = root_commit(site)  # on the branch, but no publication of the job
    with Repository.discover(evil) as repo:
        forged = forged_state(repo, git(evil, "rev-parse", JOBS + job_id).strip(),
                              remote_commit=wrong)
    git(evil, "push", "-q", "-f", "origin", f"{forged}:{JOBS}{job_id}")
    r = ci_clone(site, tmp_path, "ci1").run_here("confirm", "--json")
    assert r.code == 1, r.out + r.err
    assert r.json()["bad"] == [wrong], r.out
    (bad,) = [c for c in r.json()["commits"] if not c["ok"]]
    assert bad["job_id"] == job_id and f"refs/pub/jobs/{job_id} says PUBLISHED by {wrong}" \
        in bad["problems"][0], bad
    assert "BAD" in remote_notes(site, wrong)
    again = ci_clone(site, tmp_path, "ci2").run_here("confirm", "--json")
    assert again.code == 1 and [b["commit"] for b in again.json()["open_bad"]] == [wrong]


def test_a_job_commit_without_its_record_is_bad_unless_reported(site: Site,
                                                                tmp_path: Path) -> None:
    (commit,) = publish(site, 1)
    (job_id,) = job_ids(site)
    git(site.remote, "update-ref", "-d", JOBS + job_id)  # the store lost the job's record
    keyless = {"GITPUB_CONFIRM_KEY": ""}
    r = ci_clone(site, tmp_path, "ci0", depth=None).run_here("confirm", "--json", env=keyless)
    assert r.code == 1, r.out + r.err
    assert r.json()["bad"] == [commit]
    assert f"job {job_id} has no record in the remote's job store" in r.out
    # a repository with publications from before the shared store reports them instead
    site.write_config("confirm_unrecorded: report\n")
    site.git("commit", "-qam", "confirm: report unrecorded job commits")
    site.git("push", "-q", "origin", "main")
    r = ci_clone(site, tmp_path, "ci1", depth=None).run_here("confirm", "--json", env=keyless)
    assert r.code == 0, r.out + r.err
    assert any(m.startswith(f"unrecorded: {commit}") for m in r.json()["remarks"]), r.out


def test_a_record_that_contradicts_the_branch_is_bad(site: Site, tmp_path: Path) -> None:
    """The job's own commit is on the branch, its job ref says SKIPPED (abandoned)."""
    (commit,) = publish(site, 1)
    (job_id,) = job_ids(site)
    evil = attacker(site, tmp_path)
    with Repository.discover(evil) as repo:
        forged = forged_state(repo, git(evil, "rev-parse", JOBS + job_id).strip(),
                              state="SKIPPED", failure_code="abandoned")
    git(evil, "push", "-q", "-f", "origin", f"{forged}:{JOBS}{job_id}")
    r = ci_clone(site, tmp_path, "ci").run_here("confirm", "--json")
    assert r.code == 1 and r.json()["bad"] == [commit], r.out + r.err
    assert "says SKIPPED (abandoned), but the job's commit is on the branch" in r.out


@pytest.mark.slow
def test_a_forged_archive_entry_is_bad(site: Site, tmp_path: Path) -> None:
    """After an authenticated run marked the archive checked, someone pushes a fold of their
    own: an entry saying a job nobody published is PUBLISHED (so no clone would publish its
    key). The next run walks only that fold and names it."""
    publish(site, 2)
    fold(site)
    assert ci_clone(site, tmp_path, "ci0").run_here("confirm").code == 0
    evil = attacker(site, tmp_path)
    wrong = root_commit(site)
    ghost = "0badf00d-1111-5000-8000-000000000000"
    with Repository.discover(evil) as repo:
        tip = git(evil, "rev-parse", "refs/pub/archive").strip()
        template = git(evil, "rev-parse", "refs/pub/archive^2").strip()  # a final state
        state = forged_state(repo, template, job_id=ghost, remote_commit=wrong)
        blob = repo.lookup(repo.commit(state).tree, "job.json")
        assert blob is not None
        forged = Archive(repo, tip).fold([Final(ghost, state, blob.sha)], "gitpub archive\n")
    git(evil, "push", "-q", "origin", f"{forged}:refs/pub/archive")
    ci = ci_clone(site, tmp_path, "ci1")
    r = ci.run_here("confirm", "--json")
    assert r.code == 1 and "bad" in r.json(), r.out + r.err
    assert r.json()["bad"] == [wrong], r.out
    assert f"archive entry says PUBLISHED by {wrong}" in r.out and ghost in r.out
