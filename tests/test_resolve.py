"""`git pub resolve`: it never destroys. A second clone is the other writer; a SIGKILL at a named
crash point leaves a job in each interrupted state; a proxy drops a push reply."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Site, git, set_up_once
from netfaults import DropReplyProxy, GitDaemon
from test_delivery import commit_file as delivery_commit_file
from test_delivery import other_writer

from gitpub.core.states import State
from gitpub.git.repo import Repository
from gitpub.pipeline.sources import MAX_MERGED_BYTES
from gitpub.store.jobs import JobStore
from gitpub.store.lease import Worker

ISSUE = "docs/issue-2.md"
ORIGINAL = "# Issue 2\n\nThe original text.\n"
OURS = "# Issue 2\n\nWriter A's rewrite.\n"
THEIRS = "# Issue 2\n\nWriter B's edit.\n"


def commit_file(repo: Path, path: str, text: str, message: str = "hand edit") -> str:
    return delivery_commit_file(repo, path, text, message, rebase=True)


def remote_file(site: Site, path: str = ISSUE) -> str:
    return git(site.remote, "show", f"main:{path}")


def prepare(site: Site, key: str, path: str, text: str) -> str:
    r = site.call("prepare", "--json", "--key", key, "--to", path, "-", input=text)
    assert r.code == 0, r.out + r.err
    return str(r.json()["job_id"])


def events(site: Site, job_id: str) -> list[dict[str, str]]:
    r = site.call("log", "--json", job_id)
    assert r.code == 0, r.err
    rows: list[dict[str, str]] = r.json()["events"]
    return rows


def state_of(site: Site, job_id: str) -> str:
    return str(site.call("status", "--json", job_id).json()["state"])


@pytest.fixture
def conflict(site: Site, tmp_path: Path) -> tuple[str, Path]:
    """Writer B published an edit to docs/issue-2.md; writer A's job on it is CONFLICT. Made
    once per test process and copied (``set_up_once``: the conflict is where the tests start,
    not what they test); B's clone (``other``) is a new clone of the copied remote (a test's
    ``commit_file`` on it pulls first)."""

    def build(template: Site, where: Path) -> str:
        template.write_config('content: ["docs/**/*.md"]\n')  # docs/ in the write scope
        template.git("add", ".gitpub.yaml")  # committed with the article below
        commit_file(template.path, ISSUE, ORIGINAL, "add issue 2")
        template.git("fetch", "-q", "origin")
        other = other_writer(where, template)
        job_id = prepare(template, "a-issue-2", ISSUE, OURS)
        commit_file(other, ISSUE, THEIRS, "B edits issue 2")
        r = template.call("push", "--json")
        assert r.code == 4, r.out + r.err
        assert r.json()["jobs"][0]["state"] == "CONFLICT"
        return job_id

    return set_up_once(site, "resolve-conflict", build), other_writer(tmp_path, site)


def test_retry_on_conflict_keeps_the_other_writers_version(
        site: Site, conflict: tuple[str, Path]) -> None:
    job_id, _ = conflict
    r = site.call("resolve", "--json", job_id, "--retry")
    assert r.code == 4, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "CONFLICT"
    assert remote_file(site) == THEIRS, "B's edit is still on the remote"
    # The hint is a command a person can paste: real object ids, theirs then ours.
    theirs = git(site.remote, "rev-parse", f"main:{ISSUE}").strip()
    ours = site.git("hash-object", "--stdin", input=OURS.encode()).strip()
    assert f"git diff {theirs} {ours}" in job["hint"]
    diff = site.git("diff", theirs, ours)
    assert "-Writer B's edit." in diff and "+Writer A's rewrite." in diff
    text = site.call("resolve", job_id, "--retry")
    assert "hint: compare: `git diff" in text.out and "--overwrite" in text.out
    assert any(e["phase"] == "resolve" and "still there" in e["reason"]
               for e in events(site, job_id))


def test_retry_after_their_change_is_gone_publishes(
        site: Site, conflict: tuple[str, Path]) -> None:
    job_id, other = conflict
    commit_file(other, ISSUE, ORIGINAL, "B reverts")
    r = site.call("resolve", "--json", job_id, "--retry")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    assert remote_file(site) == OURS


def test_overwrite_replaces_theirs_and_records_both_hashes(
        site: Site, conflict: tuple[str, Path]) -> None:
    job_id, _ = conflict
    theirs_blob = git(site.remote, "rev-parse", f"main:{ISSUE}").strip()
    r = site.call("resolve", "--json", job_id, "--overwrite")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    assert remote_file(site) == OURS
    import hashlib

    (event,) = [e for e in events(site, job_id) if "overwrite" in e["reason"]]
    assert hashlib.sha256(THEIRS.encode()).hexdigest() in event["reason"]
    assert hashlib.sha256(OURS.encode()).hexdigest() in event["reason"]
    assert theirs_blob in event["reason"]


def test_overwrite_still_respects_a_third_writer(
        site: Site, conflict: tuple[str, Path]) -> None:
    """--overwrite replaces the version it saw, not whatever comes later: killed after it
    recorded the push, a third writer lands, and the next delivery stops at CONFLICT."""
    job_id, other = conflict
    third = "# Issue 2\n\nWriter C's edit.\n"
    r = site.run("resolve", job_id, "--overwrite",
                 env={"GITPUB_CRASH_AT": "delivery.pushing-recorded"})
    assert r.code == -9, r.out + r.err
    commit_file(other, ISSUE, third, "C edits issue 2")
    r = site.call("push", "--json")
    assert r.json()["jobs"][0]["state"] == "CONFLICT", r.out + r.err
    assert remote_file(site) == third, "C's version, which --overwrite never saw, stays"


def test_from_file_publishes_the_merge_under_the_same_job(
        site: Site, conflict: tuple[str, Path], tmp_path: Path) -> None:
    job_id, _ = conflict
    merged = "# Issue 2\n\nWriter A's rewrite.\n\nWriter B's edit.\n"
    path = tmp_path / "merged.md"
    path.write_text(merged)
    r = site.call("resolve", "--json", job_id, "--from", str(path))
    assert r.code == 0, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "PUBLISHED" and job["job_id"] == job_id
    assert remote_file(site) == merged
    reasons = [e["reason"] for e in events(site, job_id)]
    assert any("merged content from" in x and "a new snapshot against" in x for x in reasons)
    published = job["remote_commit"]
    # exactly one publication of the job, on top of B's commit
    assert git(site.remote, "show", "-s", "--format=%(trailers:key=Blog-Job-Id,valueonly)",
               published).strip() == job_id
    assert git(site.remote, "show", f"{published}^:{ISSUE}") == THEIRS


def test_from_file_with_a_secret_is_refused_and_not_stored(
        site: Site, conflict: tuple[str, Path], tmp_path: Path) -> None:
    job_id, _ = conflict
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    path = tmp_path / "merged.md"
    path.write_text(f"# Issue 2\n\ntoken = {secret}\n")
    before = site.job_refs()
    r = site.call("resolve", "--json", job_id, "--from", str(path))
    assert r.code == 2, r.out + r.err
    assert r.json()["error"] and secret not in r.out + r.err
    assert site.job_refs() == before
    assert secret.encode() not in site.all_objects_text()


def test_from_file_keeping_their_example_key_publishes(
        site: Site, tmp_path: Path) -> None:
    """--from is judged as the gates judge it: by what it adds to their version. Their edit
    shows an example key; a merge that keeps it publishes, one that adds a token does not."""
    site.write_config('content: ["docs/**/*.md"]\n')
    site.git("add", ".gitpub.yaml")
    commit_file(site.path, ISSUE, ORIGINAL, "add issue 2")
    site.git("fetch", "-q", "origin")
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "a-issue-2", ISSUE, OURS)
    example = "AKIA" + "IOSFODNN7EXAMPLE"
    theirs = f"{THEIRS}\n    aws_access_key_id = {example}\n"
    commit_file(other, ISSUE, theirs, "B edits issue 2, with an example")
    assert site.call("push").code == 4
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    merged = f"# Issue 2\n\nWriter A's rewrite.\n\n    aws_access_key_id = {example}\n"
    leaky = tmp_path / "leaky.md"
    leaky.write_text(merged + f"\ntoken = {token}\n")
    r = site.call("resolve", "--json", job_id, "--from", str(leaky))
    assert r.code == 2 and "docs/issue-2.md:7: possible secret (github-token" in r.json()["error"]
    assert token.encode() not in site.all_objects_text()
    path = tmp_path / "merged.md"
    path.write_text(merged)
    r = site.call("resolve", "--json", job_id, "--from", str(path))
    assert r.code == 0, r.out + r.err
    assert remote_file(site) == merged


def test_from_needs_one_conflicting_file(site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    r = site.call("prepare", "--json", "--key", "two", "--to", "posts/x.md", "--to",
                  "posts/y.md", "-", str(_write(tmp_path / "y", "# Y mine\n")),
                  input="# X mine\n")
    job_id = r.json()["job_id"]
    commit_file(other, "posts/x.md", "# X theirs\n")
    commit_file(other, "posts/y.md", "# Y theirs\n")
    assert site.call("push").code == 4
    r = site.call("resolve", "--json", job_id, "--from", str(_write(tmp_path / "m", "# M\n")))
    assert r.code == 2 and "exactly one" in r.json()["error"]
    assert state_of(site, job_id) == "CONFLICT"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- REVIEW -------------------------------------------------------------------------------------

def review_job(site: Site, tmp_path: Path, path: str = "posts/r.md",
               text: str = "# R\n\nText.\n") -> tuple[str, Path]:
    marker = tmp_path / "gate-fails"
    marker.write_text("x")
    site.write_config(f"gates:\n  - {{name: marker, run: 'test ! -e {marker}'}}\n")
    r = site.call("prepare", "--json", "--key", "r", "--to", path, "-", input=text)
    assert r.code == 4 and r.json()["state"] == "REVIEW", r.out + r.err
    assert "resolve" in r.json()["hint"] and "--retry" in r.json()["hint"]
    return str(r.json()["job_id"]), marker


def test_review_retry_stops_before_pushing_unless_asked(site: Site, tmp_path: Path) -> None:
    job_id, marker = review_job(site, tmp_path)
    marker.unlink()
    before = git(site.remote, "rev-parse", "main")
    r = site.call("resolve", "--json", job_id, "--retry")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "LOCAL_COMMITTED"
    assert git(site.remote, "rev-parse", "main") == before, "nothing pushed"
    assert "git pub push" in r.json()["jobs"][0]["hint"]


def test_review_retry_with_push_delivers(site: Site, tmp_path: Path) -> None:
    job_id, marker = review_job(site, tmp_path)
    marker.unlink()
    r = site.call("resolve", "--json", job_id, "--retry", "--push")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    assert git(site.remote, "show", "main:posts/r.md") == "# R\n\nText.\n"


def test_review_retry_keeps_the_snapshot_so_it_never_overwrites(
        site: Site, tmp_path: Path) -> None:
    """An UPDATE in REVIEW whose file another writer changed meanwhile: the retry keeps the
    job's compare-and-swap condition, so the delivery stops at CONFLICT."""
    other = other_writer(tmp_path, site)
    job_id, marker = review_job(site, tmp_path, "posts/welcome.md", "# Welcome\n\nMine.\n")
    commit_file(other, "posts/welcome.md", "# Welcome\n\nTheirs.\n")
    site.git("fetch", "-q", "origin")
    marker.unlink()
    r = site.call("resolve", "--json", job_id, "--retry", "--push")
    assert r.code == 4, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "CONFLICT"
    assert git(site.remote, "show", "main:posts/welcome.md") == "# Welcome\n\nTheirs.\n"


def test_review_from_file_runs_the_pipeline_on_it(site: Site, tmp_path: Path) -> None:
    """Issue 24.4: `--retry --from FILE` is REVIEW's way out too: the person's content replaces
    the job's article, under the same job; it stops before pushing unless --push."""
    job_id, marker = review_job(site, tmp_path)
    marker.unlink()
    fixed = tmp_path / "fixed.md"
    fixed.write_text("# R\n\nFixed text.\n")
    before = git(site.remote, "rev-parse", "main")
    r = site.call("resolve", "--json", job_id, "--retry", "--from", str(fixed))
    assert r.code == 0, r.out + r.err
    (job,) = r.json()["jobs"]
    assert (job["job_id"], job["state"]) == (job_id, "LOCAL_COMMITTED")
    assert git(site.remote, "rev-parse", "main") == before, "nothing pushed"
    assert any(f"content from {fixed}" in e["reason"] for e in events(site, job_id))
    r = site.call("push", "--json", job_id)
    assert r.code == 0 and r.json()["jobs"][0]["state"] == "PUBLISHED", r.out + r.err
    assert remote_file(site, "posts/r.md") == "# R\n\nFixed text.\n"


def test_review_from_file_keeps_the_snapshot_so_it_never_overwrites(
        site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    job_id, marker = review_job(site, tmp_path, "posts/welcome.md", "# Welcome\n\nMine.\n")
    commit_file(other, "posts/welcome.md", "# Welcome\n\nTheirs.\n")
    site.git("fetch", "-q", "origin")
    marker.unlink()
    fixed = tmp_path / "fixed.md"
    fixed.write_text("# Welcome\n\nMine, fixed.\n")
    r = site.call("resolve", "--json", job_id, "--retry", "--from", str(fixed), "--push")
    assert r.code == 4, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "CONFLICT"
    assert remote_file(site, "posts/welcome.md") == "# Welcome\n\nTheirs.\n"


def test_review_from_file_with_a_secret_is_refused_and_not_stored(
        site: Site, tmp_path: Path) -> None:
    job_id, marker = review_job(site, tmp_path)
    marker.unlink()
    token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    leaky = tmp_path / "leaky.md"
    leaky.write_text(f"# R\n\ntoken = {token}\n")
    refs = site.git("for-each-ref", "refs/pub")
    r = site.call("resolve", job_id, "--retry", "--from", str(leaky))
    assert r.code == 2, r.out + r.err
    assert "possible secret" in r.err and "nothing was stored" in r.err and token not in r.err
    assert site.git("for-each-ref", "refs/pub") == refs
    assert state_of(site, job_id) == "REVIEW"
    assert token.encode() not in site.all_objects_text()


def test_review_from_file_refuses_a_sync_job(site: Site, tmp_path: Path) -> None:
    """A sync job delivers a person's commit whole: --from cannot replace its content."""
    site.write_config("gates:\n  - {name: strict, run: 'exit 1'}\n")
    site.git("commit", "-qam", "A strict gate")
    site.git("push", "-q", "origin", "main")
    (site.path / "posts" / "hand.md").write_text("# Hand\n")
    site.git("add", ".")
    site.git("commit", "-q", "-m", "A page by hand")
    assert site.call("sync").code == 4
    (job,) = site.call("status", "--json").json()["jobs"]
    fixed = tmp_path / "fixed.md"
    fixed.write_text("# Hand, fixed\n")
    r = site.call("resolve", job["job_id"], "--retry", "--from", str(fixed))
    assert r.code == 2, r.out + r.err
    assert "whole: --from cannot change it" in r.err and "git pub sync" in r.err
    assert state_of(site, job["job_id"]) == "REVIEW"


# -- usage ------------------------------------------------------------------------------------

def test_retry_and_abandon_together_is_a_usage_error(
        site: Site, conflict: tuple[str, Path]) -> None:
    job_id, _ = conflict
    for extra in (["--retry", "--abandon"], ["--overwrite", "--abandon"],
                  ["--overwrite", "--from", "x"], []):
        r = site.call("resolve", "--json", job_id, *extra)
        assert r.code == 2, (extra, r.out, r.err)
        assert r.json()["exit"] == 2 and r.json()["hint"]
        assert r.err.startswith("git-pub: error: ") and "\nhint: " in r.err
    assert state_of(site, job_id) == "CONFLICT"


def test_retry_in_other_states_names_the_right_command(site: Site) -> None:
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    r = site.call("resolve", job_id, "--retry")
    assert r.code == 2 and f"git pub push {job_id[:13]}" in r.err
    assert site.call("resolve", job_id, "--overwrite").code == 2


# -- abandon, in every state ------------------------------------------------------------------

def crash_prepare(site: Site, point: str, extra_config: str = "") -> str:
    site.write_config(extra_config)
    r = site.run("prepare", "--key", "crashed", "--to", "posts/a.md", "-", input="# A\n",
                 env={"GITPUB_CRASH_AT": point})
    assert r.code == -9, r.out + r.err
    (ref,) = site.job_refs()
    return ref.rsplit("/", 1)[1]


LOCAL_CRASHES = {
    "RECEIVED": "prepare.job-created",
    "PREPARING": "prepare.base-snapshotted",
    "READY_TO_COMMIT": "prepare.ready-recorded",
    "LOCAL_COMMITTING": "commit.committing-recorded",
}


@pytest.mark.parametrize("state", sorted(LOCAL_CRASHES))
def test_abandon_an_interrupted_local_job(site: Site, state: str) -> None:
    job_id = crash_prepare(site, LOCAL_CRASHES[state])
    assert state_of(site, job_id) == state
    shown = site.call("status", job_id)
    assert "hint: " in shown.out and "reconcile" in shown.out
    before = git(site.remote, "rev-parse", "main")
    r = site.call("resolve", "--json", job_id, "--abandon")
    assert r.code == 0, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "SKIPPED" and job["failure_code"] == "abandoned"
    assert site.call("push").code == 0 and site.call("reconcile").code == 0
    assert git(site.remote, "rev-parse", "main") == before, "an abandoned job is never pushed"
    assert state_of(site, job_id) == "SKIPPED"


def test_abandon_recovering_job(site: Site) -> None:
    job_id = crash_prepare(site, "commit.committing-recorded")
    with Repository.discover(site.path) as repo:
        store = JobStore(repo)
        job = store.load(job_id)
        assert job is not None
        store.transition(job, job.record.evolve(state=State.RECOVERING), phase="recover",
                         reason="test: recovery under way", keep_lease=False)
    assert site.call("resolve", job_id, "--abandon").code == 0
    assert state_of(site, job_id) == "SKIPPED"


def test_abandon_local_committed_is_never_published(site: Site) -> None:
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    before = git(site.remote, "rev-parse", "main")
    assert site.call("resolve", job_id, "--abandon").code == 0
    assert site.call("push").code == 0 and site.call("sync").code == 0
    assert git(site.remote, "rev-parse", "main") == before


def test_abandon_review_and_conflict(site: Site, conflict: tuple[str, Path]) -> None:
    job_id, _ = conflict
    r = site.call("resolve", "--json", job_id, "--abandon")
    assert r.code == 0 and r.json()["jobs"][0]["state"] == "SKIPPED"
    assert remote_file(site) == THEIRS
    r = site.call("resolve", "--json", job_id, "--abandon")
    assert r.code == 2, "an ended job cannot be abandoned again"


def test_abandon_recheck_candidates(site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    site.write_config("judge: 'cat > /dev/null; echo KEEP'\n")
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    commit_file(other, "posts/b.md", "# B\n")
    r = site.run("push", env={"GITPUB_CRASH_AT": "delivery.recheck-ran"})
    assert r.code == -9
    assert state_of(site, job_id) == "RECHECK_CANDIDATES"
    assert site.call("resolve", job_id, "--abandon").code == 0
    assert state_of(site, job_id) == "SKIPPED"


def test_abandon_pushing_probes_first(site: Site) -> None:
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    assert site.run("push", env={"GITPUB_CRASH_AT": "delivery.pushing-recorded"}).code == -9
    assert state_of(site, job_id) == "PUSHING"
    r = site.call("resolve", "--json", job_id, "--abandon")
    assert r.code == 0 and r.json()["jobs"][0]["state"] == "SKIPPED", r.out + r.err
    assert any("found it absent" in e["reason"] for e in events(site, job_id))


def test_abandon_a_job_that_is_on_the_remote_publishes_it(site: Site) -> None:
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    assert site.run("push", env={"GITPUB_CRASH_AT": "delivery.pushed"}).code == -9
    assert state_of(site, job_id) == "PUSHING"
    r = site.call("resolve", "--json", job_id, "--abandon")
    assert r.code == 0, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "PUBLISHED" and "not abandoned" in job["note"]
    assert git(site.remote, "show", "main:posts/a.md") == "# A\n"


def test_abandon_local_committed_probes_a_hand_pushed_job(site: Site) -> None:
    """A person pushed the job's commit by hand (or a push's report was lost): the job is on
    the remote although it is LOCAL_COMMITTED, so --abandon probes and finds it."""
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    commit = site.call("status", "--json", job_id).json()["local_commit"]
    site.git("push", "-q", "--no-verify", "origin", f"{commit}:refs/heads/main")
    r = site.call("resolve", "--json", job_id, "--abandon")
    assert r.code == 0, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "PUBLISHED" and "not abandoned" in job["note"], job


def test_abandon_local_committed_refuses_without_the_remote(site: Site) -> None:
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    site.git("remote", "set-url", "origin", str(site.remote.parent / "gone.git"))
    r = site.call("resolve", "--json", job_id, "--abandon")
    assert r.code != 0 and r.json()["hint"], r.out + r.err
    assert state_of(site, job_id) == "LOCAL_COMMITTED"


#: A server whose reference-transaction hook applies the push, then prints an authentication
#: failure (a mirror or proxy message) and kills receive-pack: no porcelain line comes back.
_AUTH_TEXT_AFTER_LANDING = """#!/bin/sh
cat >/dev/null
if [ "$1" = committed ] && [ ! -f "$GIT_DIR/once" ]; then touch "$GIT_DIR/once"
  echo "remote: fatal: Authentication failed for 'https://mirror.example.org/blog.git/'" >&2
  kill -9 $PPID
fi
"""


def test_a_push_that_landed_is_sent_whatever_stderr_says(site: Site) -> None:
    hook = site.remote / "hooks" / "reference-transaction"
    hook.write_text(_AUTH_TEXT_AFTER_LANDING)
    hook.chmod(0o755)
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    r = site.call("push", "--json")
    assert (site.remote / "once").exists(), "the hook did not run"
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    log = git(site.remote, "log", "--format=%(trailers:key=Blog-Job-Id,valueonly)", "main")
    assert log.split().count(job_id) == 1
    assert site.call("resolve", job_id, "--abandon").code == 2, "published: never abandoned"
    assert state_of(site, job_id) == "PUBLISHED"


@pytest.fixture
def flaky(site: Site, tmp_path: Path) -> Iterator[DropReplyProxy]:
    with GitDaemon(tmp_path) as daemon, DropReplyProxy(daemon.port) as proxy:
        site.git("remote", "set-url", "origin", proxy.url(site.remote.name))
        yield proxy


def test_abandon_retry_wait_whose_push_landed(site: Site, flaky: DropReplyProxy) -> None:
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    flaky.mode = "drop_branch_push_reply"  # the delivery's reply (the claim gets its own)
    assert site.call("push").code == 5
    assert state_of(site, job_id) == "RETRY_WAIT"
    flaky.mode = "refuse"
    r = site.call("resolve", "--json", job_id, "--abandon")
    assert r.code == 5, "no probe, no abandon: the remote does not answer"
    assert "nothing was changed" in r.json()["hint"]
    assert state_of(site, job_id) == "RETRY_WAIT"
    flaky.mode = "pass"
    r = site.call("resolve", "--json", job_id, "--abandon")
    assert "jobs" in r.json(), r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED", r.out + r.err


def test_abandon_retry_wait_and_failed_when_absent(site: Site, flaky: DropReplyProxy) -> None:
    site.write_config("retry: {max_attempts: 2, backoff_base: 0.01, backoff_max: 0.02}\n")
    first = prepare(site, "k1", "posts/a.md", "# A\n")
    flaky.mode = "refuse"
    assert site.call("push", first).code == 5
    assert state_of(site, first) == "RETRY_WAIT"
    assert site.call("push", first).code == 5
    assert state_of(site, first) == "FAILED"
    failed = site.call("status", first)
    assert "hint: " in failed.out and "--retry" in failed.out
    flaky.mode = "pass"
    r = site.call("resolve", "--json", first, "--abandon")
    assert r.code == 0 and r.json()["jobs"][0]["state"] == "SKIPPED", r.out + r.err
    flaky.mode = "refuse"
    second = prepare(site, "k2", "posts/b.md", "# B\n")
    assert site.call("push", second).code == 5
    flaky.mode = "pass"
    r = site.call("resolve", "--json", second, "--abandon")
    assert r.json()["jobs"][0]["state"] == "SKIPPED"
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/").split() == \
        ["posts/welcome.md"]


def test_abandon_leaves_a_job_another_process_holds(site: Site) -> None:
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    with Repository.discover(site.path) as repo:
        store = JobStore(repo, Worker("someone-else", Worker.current().owner))
        job = store.load(job_id)
        assert job is not None and store.acquire(job) is not None
    r = site.call("resolve", "--json", job_id, "--abandon")
    assert r.code == 5 and "being worked on" in r.json()["error"]
    assert state_of(site, job_id) == "LOCAL_COMMITTED"


def test_published_job_cannot_be_abandoned(site: Site) -> None:
    job_id = prepare(site, "k", "posts/a.md", "# A\n")
    assert site.call("push").code == 0
    r = site.call("resolve", job_id, "--abandon")
    assert r.code == 2 and "PUBLISHED" in r.err


def test_git_c_diff_hint_is_pasteable(site: Site, conflict: tuple[str, Path]) -> None:
    """The hint's command runs as it is, in the repository, and shows the two versions."""
    job_id, _ = conflict
    hint = site.call("status", "--json", job_id).json()["hint"]
    command = hint.split("`")[1]
    assert command.startswith("git diff ")
    proc = subprocess.run(command.split(), cwd=site.path, capture_output=True, text=True)
    assert proc.returncode == 0 and "Writer B's edit" in proc.stdout


# -- what --from reads (attack repro r04: --from /dev/null wiped their file, a FIFO hung) ----

@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/null"])
def test_from_accepts_only_a_regular_file(site: Site, conflict: tuple[str, Path],
                                          tmp_path: Path, kind: str) -> None:
    job_id, _ = conflict
    source = kind
    if kind == "fifo":
        source = str(tmp_path / "fifo")
        os.mkfifo(source)
    before = site.job_refs()
    r = site.run("--json", "resolve", job_id, "--from", source, timeout=30)  # a hang fails here
    assert r.code == 2, r.out + r.err
    assert "only a regular file" in r.json()["error"] and r.json()["hint"]
    assert site.job_refs() == before and remote_file(site) == THEIRS
    assert state_of(site, job_id) == "CONFLICT"


def test_from_empty_stdin_is_refused_unless_allowed(site: Site,
                                                    conflict: tuple[str, Path]) -> None:
    job_id, _ = conflict
    r = site.run_here("--json", "resolve", job_id, "--from", "-", input=b"")
    assert r.code == 2 and "is empty" in r.json()["error"], r.out + r.err
    assert "--allow-empty" in r.json()["hint"]
    assert remote_file(site) == THEIRS and state_of(site, job_id) == "CONFLICT"
    r = site.run_here("--json", "resolve", job_id, "--from", "-", "--allow-empty", input=b"")
    assert r.code == 0, r.out + r.err
    assert remote_file(site) == "", "asked for explicitly: the file becomes empty"


def test_allow_empty_needs_from(site: Site, conflict: tuple[str, Path]) -> None:
    job_id, _ = conflict
    r = site.run_here("--json", "resolve", job_id, "--retry", "--allow-empty")
    assert r.code == 2 and "--from" in r.json()["error"], r.out + r.err


def test_from_reads_a_bounded_size(site: Site, conflict: tuple[str, Path],
                                   tmp_path: Path) -> None:
    job_id, _ = conflict
    huge = tmp_path / "huge.md"
    with huge.open("wb") as f:
        f.truncate(MAX_MERGED_BYTES + 1)  # sparse: costs no disk
    r = site.run_here("--json", "resolve", job_id, "--from", str(huge))
    assert r.code == 2 and "more than 100 MiB" in r.json()["error"], r.out + r.err
    assert remote_file(site) == THEIRS and state_of(site, job_id) == "CONFLICT"
