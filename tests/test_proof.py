"""A proof of publication cannot be forged, and one job id is published at most once across
every clone of the remote. The attacker is a second clone with push access."""

from __future__ import annotations

from pathlib import Path

from conftest import Site, git
from netfaults import free_port
from test_delivery import article, other_writer, prepare

from gitpub.core.errors import EXIT_KEY_REUSED
from gitpub.core.files import pub_dir
from gitpub.git.repo import Repository
from gitpub.store.jobs import JobStore
from gitpub.verify.commit import verify_commit
from gitpub.verify.probe import probe


def job_message(site: Site, job_id: str) -> bytes:
    commit = site.git("rev-parse", f"refs/pub/jobs/{job_id}").strip()
    local = site.call("status", "--json", job_id).json()["local_commit"]
    assert commit and local
    return git(site.path, "cat-file", "commit", local).split("\n\n", 1)[1].encode()


def forge(attacker: Path, message: bytes, files: dict[str, str]) -> str:
    """A commit with ``message`` (copied trailers) changing ``files``, pushed to main."""
    git(attacker, "pull", "-q", "--ff-only", "origin", "main")
    for path, text in files.items():
        (attacker / path).parent.mkdir(parents=True, exist_ok=True)
        (attacker / path).write_text(text)
        git(attacker, "add", path)
    (attacker / "msg").write_bytes(message)
    git(attacker, "commit", "-q", "--cleanup=verbatim", "-F", "msg")
    git(attacker, "push", "-q", "origin", "HEAD:main")
    return git(attacker, "rev-parse", "HEAD").strip()


def remote_claims(site: Site, job_id: str) -> list[str]:
    out = git(site.remote, "log", "--format=%H %(trailers:key=Blog-Job-Id,valueonly,"
                                  "separator=%x2c)", "main")
    return [line.split()[0] for line in out.splitlines() if job_id in line]


def test_copied_trailers_on_another_change_publish_nothing(site: Site, tmp_path: Path) -> None:
    attacker = other_writer(tmp_path, site, "attacker")
    job = prepare(site, "k", "posts/a.md", article("a"))
    job_id = str(job["job_id"])
    forged = forge(attacker, job_message(site, job_id), {"evil.js": "alert(1)\n"})
    r = site.call("push", "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["jobs"]
    assert row["state"] == "PUBLISHED" and row["remote_commit"] != forged
    assert git(site.remote, "show", "main:posts/a.md") == article("a"), "the article landed"
    assert remote_claims(site, job_id) == [row["remote_commit"], forged]
    assert f"{forged[:12]} on the remote carries this job's id but is not its publication" \
        in r.err


def test_padded_and_partial_commits_publish_nothing(site: Site, tmp_path: Path) -> None:
    attacker = other_writer(tmp_path, site, "attacker")
    r = site.call("prepare", "--json", "--key", "two", "--to", "posts/x.md", "-",
                  "--to", "posts/y.md", str(_source(tmp_path, "y", article("y"))),
                  input=article("x"))
    assert r.code == 0, r.err
    job_id = r.json()["job_id"]
    message = job_message(site, job_id)
    partial = forge(attacker, message, {"posts/x.md": article("x")})
    padded = forge(attacker, message, {"posts/y.md": article("y"), "evil.js": "x\n"})
    with Repository.discover(site.path) as repo:
        git(site.path, "fetch", "-q", "origin")
        for commit, problem in ((partial, "posts/y.md: missing"),
                                (padded, "evil.js: changed, but not in the manifest")):
            verdict = verify_commit(repo, commit, ["Blog"])
            assert verdict is not None and problem in verdict.problems, verdict
        job = JobStore(repo).load(job_id)
        assert job is not None
        tip = repo.read_ref("refs/remotes/origin/main")
        assert tip is not None
        found = probe(repo, [tip], job.record, "Blog")
        assert found.published is None and found.reused is None
        assert {v.commit for v in found.forged} == {partial, padded}
    # Not PUBLISHED: the forgeries created the job's NEW targets, a visible CONFLICT
    r = site.call("push", "--json")
    assert r.code == 4, r.err
    assert r.json()["jobs"][0]["state"] == "CONFLICT"
    assert remote_claims(site, job_id) == [padded, partial]


def _source(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.src.md"
    path.write_text(text)
    return path


def second_site(site: Site, tmp_path: Path, name: str = "clone2") -> Site:
    """Another publishing clone of the same remote (its own job store)."""
    path = tmp_path / name
    git(tmp_path, "clone", "-q", str(site.remote), str(path))
    site.repos.append(path)
    return Site(path, site.remote, site.env)


def test_one_key_two_contents_two_clones_one_commit(site: Site, tmp_path: Path) -> None:
    other = second_site(site, tmp_path)
    first = prepare(site, "weekly-2024-05", "posts/a.md", article("a"))
    second = prepare(other, "weekly-2024-05", "posts/b.md", article("b"))
    assert first["job_id"] == second["job_id"]
    assert site.call("push").code == 0
    r = other.call("push", "--json")
    assert r.code == EXIT_KEY_REUSED, r.out + r.err
    (row,) = r.json()["jobs"]
    assert row["state"] == "REVIEW" and row["failure_code"] == "key_reused"
    assert remote_claims(site, str(first["job_id"])) != []
    assert len(remote_claims(site, str(first["job_id"]))) == 1
    assert git(site.remote, "ls-tree", "main", "posts/b.md").strip() == ""
    # asked again by name: still refused, still one commit
    assert other.call("push", str(second["job_id"])).code == EXIT_KEY_REUSED
    assert other.call("reconcile").code == EXIT_KEY_REUSED
    assert len(remote_claims(site, str(first["job_id"]))) == 1


def test_one_key_same_content_two_clones_is_one_publication(site: Site,
                                                             tmp_path: Path) -> None:
    other = second_site(site, tmp_path)
    prepare(site, "same", "posts/a.md", article("a"))
    prepare(other, "same", "posts/a.md", article("a"))
    r1 = site.call("push", "--json")
    r2 = other.call("push", "--json")
    assert r1.code == 0 and r2.code == 0, r2.err
    one, two = r1.json()["jobs"][0], r2.json()["jobs"][0]
    assert two["state"] == "PUBLISHED" and two["remote_commit"] == one["remote_commit"]
    assert len(remote_claims(site, str(one["job_id"]))) == 1


def test_a_failed_job_whose_key_was_used_elsewhere_stops(site: Site, tmp_path: Path) -> None:
    other = second_site(site, tmp_path)
    job = prepare(other, "k", "posts/b.md", article("b"))
    # an unreachable remote (a refused port: a transient failure; a missing path would be a
    # misconfiguration, which uses no attempt)
    git(other.path, "remote", "set-url", "origin", f"git://127.0.0.1:{free_port()}/site.git")
    for _ in range(6):
        other.call("push", str(job["job_id"]))
    assert other.call("status", "--json", str(job["job_id"])).json()["state"] == "FAILED"
    git(other.path, "remote", "set-url", "origin", str(site.remote))
    prepare(site, "k", "posts/a.md", article("a"))
    assert site.call("push").code == 0
    r = other.call("push", "--json", str(job["job_id"]))
    assert r.code == EXIT_KEY_REUSED, r.out + r.err
    assert r.json()["jobs"][0]["failure_code"] == "key_reused"


def test_recover_does_not_take_a_local_forgery(site: Site, tmp_path: Path) -> None:
    """A job whose commit attempt had an unknown outcome looks for its commit by trailers; a
    local commit with its trailers and other content is not it: the job rebuilds its own."""
    r = site.run("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-",
                 input=article("a"), env={"GITPUB_CRASH_AT": "commit.objects-written"})
    assert r.code == -9
    (job_ref,) = site.job_refs()
    job_id = job_ref.rsplit("/", 1)[1]
    with Repository.discover(site.path) as repo:
        job = JobStore(repo).load(job_id)
        assert job is not None and job.record.manifest_sha256
        manifest = JobStore(repo).read_file(job, "manifest")
    assert manifest is not None
    message = (b"Publish: forged\n\n" + manifest + b"\nBlog-Job-Id: " + job_id.encode()
               + b"\nBlog-Manifest-Sha256: " + job.record.manifest_sha256.encode() + b"\n")
    (site.path / "posts").mkdir(exist_ok=True)
    (site.path / "posts/a.md").write_text(article("a"))
    (site.path / "evil.js").write_text("x\n")
    site.git("add", "posts/a.md", "evil.js")
    (tmp_path / "msg").write_bytes(message)
    site.git("commit", "-q", "--cleanup=verbatim", "-F", str(tmp_path / "msg"))
    forged = site.git("rev-parse", "HEAD").strip()
    r = site.call("reconcile", "--json")
    assert r.code == 0, r.err
    row = next(j for j in r.json()["jobs"] if j["job_id"] == job_id)
    assert row["state"] == "PUBLISHED" and row["remote_commit"] != forged
    assert git(site.remote, "ls-tree", "main", "evil.js").strip() == ""
    events = site.call("log", "--json", job_id).json()["events"]
    assert not any(forged in e["reason"] for e in events), events
    assert any("rebuilding the commit" in e["reason"] for e in events), events


# -- one job id, one publication: also when the base already holds it ---------------------------

def test_the_same_key_in_a_fresh_clone_never_overwrites_the_publication(site: Site,
                                                                         tmp_path: Path) -> None:
    """An agent re-run on a fresh runner: the publication is in the new clone's base, where the
    probe (after the base) never looks. The once-per-job history search finds it."""
    first = prepare(site, "weekly-2024-05", "posts/weekly.md", article("one"))
    assert site.call("push").code == 0
    fresh = second_site(site, tmp_path, "fresh")
    r = fresh.call("prepare", "--json", "--key", "weekly-2024-05", "--to", "posts/weekly.md",
                   "-", input=article("TWO, regenerated"))
    assert r.code == EXIT_KEY_REUSED, r.out + r.err
    assert r.json()["failure_code"] == "key_reused" and r.json()["job_id"] == first["job_id"]
    assert fresh.call("push").code == 0  # nothing to deliver
    assert len(remote_claims(site, str(first["job_id"]))) == 1
    assert git(site.remote, "show", "main:posts/weekly.md") == article("one")
    # another path under the same key: refused the same way
    other = second_site(site, tmp_path, "fresh2")
    r = other.call("prepare", "--json", "--key", "weekly-2024-05", "--to", "posts/other.md",
                   "-", input=article("other"))
    assert r.code == EXIT_KEY_REUSED, r.out + r.err
    assert git(site.remote, "ls-tree", "main", "posts/other.md").strip() == ""


def test_the_same_request_in_a_clone_that_pulled_is_already_published(site: Site,
                                                                       tmp_path: Path) -> None:
    job = prepare(site, "k1", "posts/hello.md", article("hello"))
    r = site.call("push", "--json")
    assert r.code == 0, r.err
    published = r.json()["jobs"][0]["remote_commit"]
    other = second_site(site, tmp_path)
    r = other.call("prepare", "--json", "--key", "k1", "--to", "posts/hello.md", "-",
                   input=article("hello"))
    assert r.code == 0, r.err
    assert r.json()["state"] == "PUBLISHED" and r.json()["remote_commit"] == published
    assert other.call("push").code == 0
    assert remote_claims(site, str(job["job_id"])) == [published]
    events = other.call("log", "--json", str(job["job_id"])).json()["events"]
    assert any(e["phase"] == "history" and "already its publication" in e["reason"]
               for e in events), events


def test_a_local_base_is_searched_at_the_first_delivery(site: Site, tmp_path: Path) -> None:
    """A clone without the remote-tracking branch snapshots its local branch: its history is
    searched once, at the first delivery, in the fetched remote branch."""
    job = prepare(site, "k1", "posts/hello.md", article("hello"))
    assert site.call("push").code == 0
    other = second_site(site, tmp_path)
    other.git("update-ref", "-d", "refs/remotes/origin/main")
    # the remote's job store does not know the job (published by a clone of gitpub before the
    # shared store, or folded away): only the branch's history can tell
    git(site.remote, "update-ref", "-d", f"refs/pub/jobs/{job['job_id']}")
    r = other.call("prepare", "--json", "--key", "k1", "--to", "posts/hello.md", "-",
                   input=article("changed"))
    assert r.code == 0 and r.json()["state"] == "LOCAL_COMMITTED", r.err
    r = other.call("push", "--json")
    assert r.code == EXIT_KEY_REUSED, r.out + r.err
    assert len(remote_claims(site, str(job["job_id"]))) == 1
    events = other.call("log", "--json", str(job["job_id"])).json()["events"]
    assert [e["phase"] for e in events].count("history") == 2  # deferred, then searched


def test_the_history_index_follows_the_branch(site: Site, tmp_path: Path) -> None:
    """``.git/pub/job-ids`` is brought up to each base incrementally, and rebuilt when the
    branch was rewritten under it."""
    from gitpub.verify.history import INDEX_FILE, commits_mentioning

    message = job_message_for(site, prepare(site, "a", "posts/a.md", article("a")))
    site.call("push")
    with Repository.discover(site.path) as repo:
        tip = repo.read_ref("refs/remotes/origin/main")
        assert tip is not None
        job_id = message[1]
        assert commits_mentioning(repo, tip, job_id) == [tip]
        index = pub_dir(repo.common_dir) / INDEX_FILE
        assert index.read_bytes().startswith(b"gitpub job-id index v1 through " + tip.encode())
        # a rewritten branch: the entry is gone with it
        site.git("update-ref", "refs/remotes/origin/main", f"{tip}~1")
        older = repo.read_ref("refs/remotes/origin/main")
        assert older is not None and commits_mentioning(repo, older, job_id) == []
        index.write_bytes(b"torn")
        assert commits_mentioning(repo, tip, job_id) == [tip]  # unreadable: rebuilt


def job_message_for(site: Site, job: dict[str, object]) -> tuple[bytes, str]:
    return job_message(site, str(job["job_id"])), str(job["job_id"])


def test_a_prefix_change_after_a_lost_push_reply_is_not_a_second_publication(
        site: Site, tmp_path: Path) -> None:
    """Killed right after the push; meanwhile `trailer_prefix` changed on the remote and the
    publisher pulled. The probe reads the job's own commit's prefix too."""
    job = prepare(site, "k1", "posts/hello.md", article("hello"))
    r = site.run("push", env={"GITPUB_CRASH_AT": "delivery.pushed"})
    assert r.code == -9
    attacker = tmp_path / "colleague"
    git(tmp_path, "clone", "-q", str(site.remote), str(attacker))
    site.repos.append(attacker)
    config = (attacker / ".gitpub.yaml").read_text() + "trailer_prefix: Site\n"
    (attacker / ".gitpub.yaml").write_text(config)
    git(attacker, "commit", "-q", "-am", "config: our own trailer prefix")
    git(attacker, "push", "-q", "origin", "HEAD:main")
    site.git("pull", "-q", "--no-rebase", "origin", "main")
    r = site.call("reconcile", "--json")
    assert r.code == 0, r.out + r.err
    row = next(j for j in r.json()["jobs"] if j["job_id"] == job["job_id"])
    assert row["state"] == "PUBLISHED"
    assert len(remote_claims(site, str(job["job_id"]))) == 1


def test_an_encoding_that_hides_the_claim_from_its_bytes_is_no_proof(tmp_path: Path) -> None:
    """A message stored as EBCDIC (``encoding IBM037``): git shows the job's trailers, its raw
    bytes hold none — never a proof. The same message stored as ISO-8859-1 makes the same
    claim both ways, and is judged on its content (sync delivers such commits)."""
    repo_dir = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo_dir))
    (repo_dir / "posts").mkdir()
    body = b"# Hi\n"
    (repo_dir / "posts/hi.md").write_bytes(body)
    git(repo_dir, "add", "posts/hi.md")
    tree = git(repo_dir, "write-tree").strip()
    import hashlib

    from gitpub.core.manifest import Manifest, ManifestEntry

    manifest = Manifest.of([ManifestEntry("posts/hi.md", 0o100644,
                                          hashlib.sha256(body).hexdigest())])
    text = manifest.serialize().decode()
    job_id = "0bc6bad1-2704-5617-b116-efdb78f1cf70"
    message = (f"Publish: Hi\n\n{text}\nBlog-Job-Id: {job_id}\n"
               f"Blog-Manifest-Sha256: {manifest.sha256()}\n")

    def commit_in(encoding: str, codec: str) -> str:
        head = (f"tree {tree}\nauthor A <a@example.com> 1700000000 +0000\n"
                f"committer A <a@example.com> 1700000000 +0000\nencoding {encoding}\n\n")
        raw = head.encode() + message.encode(codec)
        return git(repo_dir, "hash-object", "-t", "commit", "-w", "--stdin",
                   "--literally", input=raw).strip()

    with Repository.discover(repo_dir) as repo:
        hidden = verify_commit(repo, commit_in("IBM037", "cp037"), ["Blog"])
        assert hidden is not None and not hidden.ok
        assert any("IBM037" in p for p in hidden.problems), hidden.problems
        same = verify_commit(repo, commit_in("ISO-8859-1", "latin-1"), ["Blog"])
        assert same is not None and same.ok, same.problems
