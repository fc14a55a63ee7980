"""The job store: idempotency under races, key reuse, and corrupt state left intact."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import Site, spawn
from forkrun import Child

from gitpub.store.jobs import job_id_for_key

ARTICLE = "# Race\n\nSame key, many processes.\n"


def start(site: Site, key: str, content: str) -> subprocess.Popen[bytes] | Child:
    return spawn(site, "prepare", "--json", "--key", key, "--to", "posts/race.md", "-",
                 input=content.encode())


def history(site: Site, job_id: str) -> list[dict[str, object]]:
    r = site.call("log", "--json", job_id)
    assert r.code == 0, r.err
    events: list[dict[str, object]] = r.json()["events"]
    return events


def test_racing_processes_on_one_key_get_one_job(site: Site) -> None:
    procs = [start(site, "race-key", ARTICLE) for _ in range(6)]
    results = [(p.wait(60), *p.communicate()) for p in procs]
    assert all(code == 0 for code, _, _ in results), [(c, e) for c, _, e in results if c]
    ids = {json.loads(out)["job_id"] for _, out, _ in results}
    assert ids == {job_id_for_key("race-key")}
    assert list(site.job_refs()) == [f"refs/pub/jobs/{job_id_for_key('race-key')}"]
    events = history(site, job_id_for_key("race-key"))
    assert [e["to"] for e in events].count("RECEIVED") == 1
    assert [e["to"] for e in events].count("LOCAL_COMMITTED") == 1
    assert sum(json.loads(out)["created"] for _, out, _ in results) == 1


def test_racing_different_content_on_one_key(site: Site) -> None:
    procs = [start(site, "race-key", ARTICLE + str(i)) for i in range(2)]
    codes = sorted(p.wait(60) for p in procs)
    assert codes == [0, 3]


def test_key_reused_with_different_content_changes_nothing(site: Site) -> None:
    r = site.call("prepare", "--key", "k", "--to", "posts/a.md", "-", input="one\n")
    assert r.code == 0, r.err
    before = site.git("for-each-ref")
    r = site.call("prepare", "--key", "k", "--to", "posts/a.md", "-", input="two\n")
    assert r.code == 3
    assert "already names job" in r.err and "hint:" in r.err
    r = site.call("prepare", "--key", "k", "--to", "posts/b.md", "-", input="one\n")
    assert r.code == 3, "a different target is a different request"
    assert site.git("for-each-ref") == before


def test_same_content_new_key_is_a_new_job(site: Site) -> None:
    a = site.call("prepare", "--json", "--key", "k1", "--to", "posts/a.md", "-", input="x\n")
    b = site.call("prepare", "--json", "--key", "k2", "--to", "posts/b.md", "-", input="x\n")
    assert a.json()["job_id"] != b.json()["job_id"]
    assert len(site.job_refs()) == 2


# -- corrupt state ---------------------------------------------------------------------------

def prepared(site: Site) -> tuple[str, str]:
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-", input="x\n")
    assert r.code == 0, r.err
    job_id = r.json()["job_id"]
    return job_id, f"refs/pub/jobs/{job_id}"


def replace_job_json(site: Site, ref: str, data: bytes) -> str:
    """Point the job's ref at a new state commit whose job.json is ``data``."""
    blob = site.git("hash-object", "-w", "--stdin", input=data).strip()
    entries = [line for line in site.git("ls-tree", ref).splitlines()
               if not line.endswith("\tjob.json")]
    entries.append(f"100644 blob {blob}\tjob.json")
    tree = site.git("mktree", input=("\n".join(entries) + "\n").encode()).strip()
    commit = site.git("commit-tree", tree, "-p", ref, "-m", "corrupted").strip()
    site.git("update-ref", ref, commit)
    return commit


def assert_reported_and_untouched(site: Site, job_id: str, ref_file: Path,
                                  before: bytes, *, needle: str) -> None:
    for args in (("status", job_id), ("prepare", "--key", "k", "--to", "posts/a.md", "-"),
                 ("log", job_id)):
        r = site.call(*args, input="x\n")
        assert r.code == 1, (args, r.out, r.err)
        assert job_id in r.err and needle in r.err, r.err
        assert "Traceback" not in r.err
        assert ref_file.read_bytes() == before
    listing = site.call("status", "--json")
    assert listing.code == 1
    assert any(job_id in e for e in listing.json()["errors"])


def test_truncated_record(site: Site) -> None:
    job_id, ref = prepared(site)
    raw = site.git("show", f"{ref}:job.json").encode()
    replace_job_json(site, ref, raw[: len(raw) // 2])
    ref_file = site.path / ".git" / ref
    assert_reported_and_untouched(site, job_id, ref_file, ref_file.read_bytes(),
                                  needle="not valid JSON")


def test_unknown_format_version(site: Site) -> None:
    job_id, ref = prepared(site)
    data = json.loads(site.git("show", f"{ref}:job.json"))
    data["format"] = 99
    replace_job_json(site, ref, json.dumps(data).encode())
    ref_file = site.path / ".git" / ref
    assert_reported_and_untouched(site, job_id, ref_file, ref_file.read_bytes(),
                                  needle="unknown job record format 99")


def test_wrong_field_type(site: Site) -> None:
    job_id, ref = prepared(site)
    data = json.loads(site.git("show", f"{ref}:job.json"))
    data["attempt"] = "three"
    replace_job_json(site, ref, json.dumps(data).encode())
    ref_file = site.path / ".git" / ref
    assert_reported_and_untouched(site, job_id, ref_file, ref_file.read_bytes(),
                                  needle="attempt")


def test_empty_loose_ref(site: Site) -> None:
    """The crash symptom dulwich would paper over with a stale packed value."""
    job_id, ref = prepared(site)
    site.git("pack-refs", "--all")
    ref_file = site.path / ".git" / ref
    ref_file.parent.mkdir(parents=True, exist_ok=True)
    ref_file.write_bytes(b"")
    assert_reported_and_untouched(site, job_id, ref_file, b"", needle="corrupt")
    ref_file.unlink()  # leave the repository fsck-clean


def test_missing_state_object(site: Site, tmp_path: Path) -> None:
    job_id, ref = prepared(site)
    sha = site.git("rev-parse", ref).strip()
    obj = site.path / ".git" / "objects" / sha[:2] / sha[2:]
    saved = obj.read_bytes()
    obj.chmod(0o644)
    obj.unlink()
    ref_file = site.path / ".git" / ref
    assert_reported_and_untouched(site, job_id, ref_file, ref_file.read_bytes(),
                                  needle="missing")
    obj.write_bytes(saved)


def test_listing_goes_on_past_a_corrupt_job(site: Site) -> None:
    _, ref = prepared(site)
    site.call("prepare", "--key", "other", "--to", "posts/b.md", "-", input="y\n")
    replace_job_json(site, ref, b"{")
    r = site.call("status", "--all", "--json")
    assert r.code == 1
    assert len(r.json()["jobs"]) == 1 and len(r.json()["errors"]) == 1


def test_status_reads_only_unfinished_jobs(site: Site) -> None:
    """The active index: a store full of finished jobs costs `status` nothing."""
    _, ref = prepared(site)
    assert site.call("push").code == 0  # now PUBLISHED: out of the active index
    assert site.git("for-each-ref", "refs/pub/active/") == ""
    replace_job_json(site, ref, b"{")  # unreadable, but finished: status never reads it
    site.call("prepare", "--key", "other", "--to", "posts/b.md", "-", input="y\n")
    r = site.call("status", "--json")
    assert r.code == 0 and [j["target_paths"] for j in r.json()["jobs"]] == [["posts/b.md"]]
    assert site.call("status", "--all").code == 1


def test_many_loose_job_refs_are_packed_with_git_and_stay_usable(site: Site) -> None:
    from gitpub.git.repo import Repository
    from gitpub.store.maintenance import pack_refs_if_needed

    for i in range(4):
        site.call("prepare", "--key", f"k{i}", "--to", f"posts/{i}.md", "-", input=f"{i}\n")
    with Repository.discover(site.path) as repo:
        assert not pack_refs_if_needed(repo, threshold=100)
        assert pack_refs_if_needed(repo, threshold=2)
    jobs_dir = site.path / ".git" / "refs" / "pub" / "jobs"
    assert not jobs_dir.exists() or not list(jobs_dir.iterdir())
    assert site.call("push").code == 0  # CAS on packed refs still works
    assert len(site.call("status", "--all", "--json").json()["jobs"]) == 4
