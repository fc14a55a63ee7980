"""The bounded history walk behind every proof of publication, against C git as the oracle."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest
from conftest import git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitpub.git.repo import Repository
from gitpub.git.walk import walk_since


def random_history(path: Path, seed: int, size: int, skew: bool) -> list[str]:
    """A DAG of commits with merges, and (``skew``) badly skewed committer dates."""
    rnd = random.Random(seed)
    tree = git(path, "mktree", input=b"").strip()
    commits: list[str] = []
    for i in range(size):
        parents = rnd.sample(commits, k=min(len(commits), rnd.choice([1, 1, 1, 2])))
        offset = rnd.randint(-10**7, 10**7) if skew else i * 60
        date = f"{1_700_000_000 + offset} +0000"
        args = ["commit-tree", tree, "-m", f"c{i}"]
        for p in parents:
            args += ["-p", p]
        env_date = {"GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date}
        out = subprocess.run(["git", *args], cwd=path, capture_output=True, check=True,
                             env={**os.environ, **env_date}).stdout
        commits.append(out.decode().strip())
    return commits


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), size=st.integers(2, 30), skew=st.booleans(),
       data=st.data())
def test_walk_matches_git_rev_list(tmp_path_factory: object, hermetic: dict[str, str],
                                   seed: int, size: int, skew: bool,
                                   data: st.DataObject) -> None:
    """Exactly ``git rev-list tip ^base``; with skewed clocks it may also walk a few commits
    reachable from the base (still in the tip's history: harmless for a proof of publication),
    never miss one."""
    from _pytest.tmpdir import TempPathFactory

    assert isinstance(tmp_path_factory, TempPathFactory)
    path = tmp_path_factory.mktemp("walk")
    git(path, "init", "-q")
    commits = random_history(path, seed, size, skew)
    tip = data.draw(st.sampled_from(commits))
    base = data.draw(st.one_of(st.none(), st.sampled_from(commits)))
    expected = set(git(path, "rev-list", tip, *([f"^{base}"] if base else [])).split())
    with Repository.discover(path) as repo:
        walked = [sha for sha, _ in walk_since(repo, [tip], base)]
    assert len(walked) == len(set(walked)), "no commit twice"
    assert set(walked) >= expected, "never misses a commit"
    assert set(walked) <= set(git(path, "rev-list", tip).split()), "only the tip's history"
    if not skew:
        assert set(walked) == expected


@pytest.mark.slow
def test_confirmation_with_many_commits_jobs_and_multiline_bodies(
        tmp_path: Path, hermetic: dict[str, str]) -> None:
    """The reference's trap: a log parser that only got the first record right. Twelve jobs
    interleaved with 96 hand commits whose bodies have several paragraphs, trailer-like prose
    and other jobs' ids; every job must find exactly its own remote commit."""
    from conftest import make_site

    site = make_site(tmp_path, hermetic)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(site.remote), str(other))
    expected: dict[str, str] = {}
    for i in range(12):
        r = site.call("prepare", "--json", "--key", f"job-{i}", "--to", f"posts/j{i}.md", "-",
                      input=f"# Job {i}\n\nBody {i}.\n")
        assert r.code == 0, r.err
        job_id = r.json()["job_id"]
        git(other, "pull", "-q", "--rebase", "origin", "main")
        for k in range(8):
            (other / "notes.txt").write_text(f"{i}-{k}\n")
            git(other, "add", "notes.txt")
            git(other, "commit", "-q", "-m", f"hand {i}-{k}",
                "-m", f"Mentions job {job_id} in prose.\nBlog-Job-Id: {job_id}",
                "-m", "Signed-off-by: Someone <s@example.com>\nBlog-Job-Id: not-a-job")
        git(other, "push", "-q", "origin", "HEAD:main")
        r = site.call("push", "--json")
        assert r.code == 0, r.out + r.err
        expected[job_id] = r.json()["jobs"][0]["remote_commit"]
    from gitpub.store.jobs import JobStore
    from gitpub.verify.probe import find_job_commit

    tip = git(site.remote, "rev-parse", "main").strip()
    site.git("fetch", "-q", "origin")
    with Repository.discover(site.path) as repo:
        store = JobStore(repo)
        for job_id, commit in expected.items():
            job = store.load(job_id)
            assert job is not None
            assert find_job_commit(repo, [tip], job.record, "Blog") == commit
    ids = git(site.remote, "log", "--format=%(trailers:key=Blog-Job-Id,valueonly)", "main")
    for job_id in expected:
        assert ids.split().count(job_id) == 1  # the quotes in hand commits are not trailers
