"""The bounded history walk behind every proof of publication, against C git as the oracle."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

from conftest import git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitpub.history import walk_since
from gitpub.repo import Repository


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
