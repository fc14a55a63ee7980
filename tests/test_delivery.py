"""Delivery against real remotes: bare repositories and git daemon behind a faulty proxy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Site, git, spawn
from netfaults import DropReplyProxy, GitDaemon

from gitpub.core.record import Lease
from gitpub.core.states import State
from gitpub.git.repo import Repository
from gitpub.store.jobs import JobStore, job_id_for_key
from gitpub.store.lease import Worker


def article(n: int | str) -> str:
    return f"---\ntitle: Post {n}\n---\n\n# Post {n}\n\nText {n}.\n"


def prepare(site: Site, key: str, path: str, text: str) -> dict[str, object]:
    r = site.call("prepare", "--json", "--key", key, "--to", path, "-", input=text)
    assert r.code == 0, r.err
    data: dict[str, object] = r.json()
    return data


def remote_job_ids(site: Site) -> list[str]:
    out = git(site.remote, "log", "--format=%(trailers:key=Blog-Job-Id,valueonly)", "main")
    return [line for line in out.splitlines() if line.strip()]


def other_writer(tmp_path: Path, site: Site, name: str = "other") -> Path:
    """A second clone of the same remote, as another person or node would have."""
    path = tmp_path / name
    git(tmp_path, "clone", "-q", str(site.remote), str(path))
    site.repos.append(path)
    return path


def commit_file(repo: Path, path: str, text: str, message: str = "hand edit", *,
                rebase: bool = False) -> str:
    """Commit ``text`` at ``path`` by hand and push it (after a ``pull --rebase`` if asked)."""
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", message)
    if rebase:
        git(repo, "pull", "-q", "--rebase", "origin", "main")
    git(repo, "push", "-q", "origin", "HEAD:main")
    return git(repo, "rev-parse", "HEAD").strip()


def test_prepare_push_publishes_once(site: Site) -> None:
    data = prepare(site, "k1", "posts/one.md", article(1))
    r = site.call("push", "--json")
    assert r.code == 0, r.err
    (job,) = r.json()["jobs"]
    assert job["state"] == "PUBLISHED" and job["remote_commit"]
    assert remote_job_ids(site) == [data["job_id"]]
    assert git(site.remote, "show", "main:posts/one.md") == article(1)
    # again: nothing to do, nothing pushed twice
    assert site.call("push", str(data["job_id"])).code == 0
    assert site.call("prepare", "--key", "k1", "--to", "posts/one.md", "-",
                     input=article(1)).code == 0
    assert site.call("push").code == 0
    assert remote_job_ids(site) == [data["job_id"]]
    # the checked-out branch followed, the working tree has the article
    assert (site.path / "posts/one.md").read_text() == article(1)
    assert site.git("status", "--porcelain") == ""


def test_rebases_onto_a_remote_that_moved(site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    prepare(site, "k1", "posts/mine.md", article("mine"))
    theirs = commit_file(other, "posts/theirs.md", article("theirs"))
    r = site.call("push", "--json")
    assert r.code == 0, r.err
    published = r.json()["jobs"][0]["remote_commit"]
    assert git(site.remote, "rev-parse", f"{published}^").strip() == theirs
    assert git(site.remote, "show", "main:posts/theirs.md") == article("theirs")


def test_update_conflict_keeps_their_version(site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    prepare(site, "k1", "posts/welcome.md", "# Welcome\n\nMy rewrite.\n")
    commit_file(other, "posts/welcome.md", "# Welcome\n\nTheir rewrite.\n")
    r = site.call("push", "--json")
    assert r.code == 4, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "CONFLICT" and "changed since the snapshot" in job["failure_detail"]
    assert git(site.remote, "show", "main:posts/welcome.md") == "# Welcome\n\nTheir rewrite.\n"
    assert remote_job_ids(site) == []


def test_new_path_created_remotely_is_a_conflict(site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    prepare(site, "k1", "posts/same.md", article("mine"))
    commit_file(other, "posts/same.md", article("theirs"))
    r = site.call("push", "--json")
    assert r.code == 4
    assert r.json()["jobs"][0]["state"] == "CONFLICT"
    assert git(site.remote, "show", "main:posts/same.md") == article("theirs")


def test_resolve_abandon(site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    data = prepare(site, "k1", "posts/welcome.md", "# Welcome\n\nMine.\n")
    commit_file(other, "posts/welcome.md", "# Welcome\n\nTheirs.\n")
    site.call("push")
    r = site.call("resolve", "--json", str(data["job_id"]), "--abandon")
    assert r.code == 0
    job = r.json()["jobs"][0]
    assert job["state"] == "SKIPPED" and job["failure_code"] == "abandoned"
    assert site.call("resolve", str(data["job_id"]), "--retry").code == 2


def test_dirty_checkout_is_left_alone(site: Site) -> None:
    prepare(site, "k1", "posts/welcome.md", "# Welcome\n\nNew text.\n")
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nunsaved local edit\n")
    before = site.git("rev-parse", "HEAD")
    r = site.call("push")
    assert r.code == 0, r.err
    assert "left alone" in r.out
    assert site.git("rev-parse", "HEAD") == before
    assert (site.path / "posts/welcome.md").read_text() == "# Welcome\n\nunsaved local edit\n"


# -- faults on the wire ----------------------------------------------------------------------

@pytest.fixture
def flaky(site: Site, tmp_path: Path) -> Iterator[DropReplyProxy]:
    """The site's origin is a git daemon reached through a proxy that can misbehave."""
    with GitDaemon(tmp_path) as daemon, DropReplyProxy(daemon.port) as proxy:
        site.git("remote", "set-url", "origin", proxy.url(site.remote.name))
        yield proxy


def test_lost_push_reply_is_confirmed_not_repushed(
        site: Site, flaky: DropReplyProxy, tmp_path: Path) -> None:
    counter = tmp_path / "drafts"
    site.write_config(
        f"draft: 'echo x >> {counter} && mkdir -p \"$GITPUB_OUTPUT/posts\" && "
        "cp \"$GITPUB_SOURCE\" \"$GITPUB_OUTPUT/posts/lost.md\"'\n")
    data = prepare(site, "k1", "posts/lost.md", article("lost"))
    flaky.mode = "drop_branch_push_reply"  # the claim gets its reply, the delivery does not
    r = site.call("push", "--json")
    assert r.code == 5, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "RETRY_WAIT"
    assert flaky.replies_dropped == 1
    assert remote_job_ids(site) == [data["job_id"]], "the push did land"
    flaky.mode = "pass"
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    assert flaky.branch_pushes_seen == 1, "confirmed from the remote, not pushed again"
    assert remote_job_ids(site) == [data["job_id"]]
    assert len(counter.read_text().splitlines()) == 1, "never regenerated"


def test_budget_exhausted_then_probe_publishes(
        site: Site, flaky: DropReplyProxy, tmp_path: Path) -> None:
    site.write_config("retry: {max_attempts: 2, backoff_base: 0.01, backoff_max: 0.02}\n")
    data = prepare(site, "k1", "posts/a.md", article("a"))
    flaky.mode = "refuse"
    assert site.call("push").code == 5
    r = site.call("push", "--json", str(data["job_id"]))
    job = r.json()["jobs"][0]
    assert job["state"] == "FAILED" and job["failure_code"] == "delivery_exhausted"
    assert job["attempt"] == 2
    # Someone delivers the very commit by other means; the next probe sees the trailers.
    commit = str(job["local_commit"])
    git(site.path, "push", "-q", str(site.remote), f"{commit}:refs/heads/main")
    assert site.call("push").code == 5, "a FAILED job is not probed before its time"
    flaky.mode = "pass"
    r = site.call("push", "--json", str(data["job_id"]))
    assert r.json()["jobs"][0]["state"] == "PUBLISHED", r.out
    assert remote_job_ids(site) == [data["job_id"]]


def test_stale_lease_holder_cannot_overwrite(site: Site) -> None:
    data = prepare(site, "k1", "posts/a.md", article("a"))
    job_id = str(data["job_id"])
    with Repository.discover(site.path) as repo:
        slow = JobStore(repo, Worker("slow", "elsewhere:1:1", ttl=-1.0))  # expires at once
        fast = JobStore(repo, Worker("fast", "elsewhere:2:2"))
        job = slow.load(job_id)
        assert job is not None
        stale = slow.acquire(job)
        assert stale is not None and stale.record.lease == Lease(
            "slow", "elsewhere:1:1", stale.record.lease.expires_at if stale.record.lease else 0)
        taken = fast.acquire(stale)
        assert taken is not None and fast.worker.holds(taken.record.lease)
        from gitpub.core.errors import LostRace

        with pytest.raises(LostRace):
            slow.transition(stale, stale.record.evolve(state=State.PUSHING), phase="push",
                            reason="stale writer")
        now = slow.load(job_id)
        assert now is not None and now.commit == taken.commit
        assert slow.acquire(now) is None, "a live lease of another worker is respected"


# -- two writers -----------------------------------------------------------------------------

@pytest.mark.slow
def test_two_writers_ten_jobs_each_all_land_once(site: Site, tmp_path: Path) -> None:
    second = Site(other_writer(tmp_path, site, "writer2"), site.remote, site.env)
    writers = [site, second]
    for writer in writers:
        writer.write_config("retry: {max_attempts: 50, backoff_base: 0.01, backoff_max: 0.05}\n")
    expected = set()
    for w, writer in enumerate(writers):
        for i in range(10):
            data = prepare(writer, f"w{w}-{i}", f"posts/w{w}/{i}.md", article(f"{w}-{i}"))
            expected.add(data["job_id"])
    procs = [spawn(w, "push") for w in writers]
    outs = [p.communicate(timeout=300) for p in procs]
    for w in writers:  # a writer that ran out of rebase rounds finishes on its next run
        for _ in range(5):
            r = w.run("push")
            if r.code == 0:
                break
        assert r.code == 0, (outs, r.out, r.err)
    ids = remote_job_ids(site)
    assert sorted(ids) == sorted(expected), "every job landed exactly once"
    assert job_id_for_key("w0-0") in ids


@pytest.mark.parametrize("form", ["path", "file-url", "git-daemon"])
def test_remote_url_forms(site: Site, tmp_path: Path, form: str) -> None:
    if form == "git-daemon":
        with GitDaemon(tmp_path) as daemon:
            site.git("remote", "set-url", "origin", daemon.url(site.remote.name))
            prepare(site, "k", "posts/a.md", article("a"))
            assert site.call("push").code == 0
    else:
        url = str(site.remote) if form == "path" else site.remote.as_uri()
        site.git("remote", "set-url", "origin", url)
        prepare(site, "k", "posts/a.md", article("a"))
        assert site.call("push").code == 0
    assert len(remote_job_ids(site)) == 1


def test_credentials_in_a_remote_url_are_never_persisted(site: Site) -> None:
    secret = "hunter2" + "hunter2hunter2"
    site.git("remote", "set-url", "origin", f"https://deploy:{secret}@127.0.0.1:9/site.git")
    prepare(site, "k", "posts/a.md", article("a"))
    r = site.call("push", "--json")
    assert r.code == 5
    job = r.json()["jobs"][0]
    assert job["state"] == "RETRY_WAIT" and job["failure_detail"]
    log = site.call("log", str(job["job_id"]))
    assert secret.encode() not in site.all_objects_text()
    assert secret not in r.out + r.err + log.out


def test_prepare_never_waits_on_the_delivery_lock(site: Site) -> None:
    import fcntl

    lock = site.path / ".git" / "pub" / "delivery.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # a push stuck on the network holds it
        r = site.run("prepare", "--key", "k", "--to", "posts/a.md", "-", input=article("a"),
                     timeout=20)
        assert r.code == 0, r.err
    assert site.call("push").code == 0


def test_reconcile_reports_a_bad_job_and_goes_on(site: Site) -> None:
    good = prepare(site, "good", "posts/good.md", article("good"))
    bad = prepare(site, "bad", "posts/bad.md", article("bad"))
    ref = f"refs/pub/jobs/{bad['job_id']}"
    blob = site.git("hash-object", "-w", "--stdin", input=b"{").strip()
    tree = site.git("mktree", input=f"100644 blob {blob}\tjob.json\n".encode()).strip()
    site.git("update-ref", ref, site.git("commit-tree", tree, "-p", ref, "-m", "x").strip())
    r = site.call("reconcile", "--json")
    assert r.code == 1
    assert [j["job_id"] for j in r.json()["jobs"]] == [good["job_id"]]
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    assert any(str(bad["job_id"]) in e for e in r.json()["errors"])


def test_prepare_with_push_delivers_in_one_command(site: Site) -> None:
    r = site.call("prepare", "--json", "--push", "--key", "k", "--to", "posts/a.md", "-",
                  input=article("a"))
    assert r.code == 0, r.out + r.err
    assert r.json()["state"] == "PUBLISHED" and "fast-forwarded" in r.json()["note"]
    assert remote_job_ids(site) == [r.json()["job_id"]]
    phases = [e["phase"] for e in site.call("log", "--json", r.json()["job_id"]).json()["events"]]
    assert "lease" not in phases, "the lease is kept from prepare to push, not retaken"
