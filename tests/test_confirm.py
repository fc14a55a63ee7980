"""`git pub confirm` as CI runs it: a fresh (shallow) clone, notes pushed, racing runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import Site, git
from test_delivery import article, prepare

from gitpub.git.notes import add_notes
from gitpub.git.repo import Repository


def publish(site: Site, n: int, start: int = 0) -> list[str]:
    for i in range(start, start + n):
        prepare(site, f"job-{i}", f"posts/p{i}.md", article(i))
    r = site.call("push", "--json")
    assert r.code == 0, r.err
    return [str(j["remote_commit"]) for j in r.json()["jobs"]]


def ci_clone(site: Site, tmp_path: Path, name: str, depth: int | None = 1) -> Site:
    path = tmp_path / name
    args = ["clone", "-q", "--no-local"] + ([f"--depth={depth}"] if depth else [])
    git(tmp_path, *args, site.remote.as_uri(), str(path))
    site.repos.append(path)
    return Site(path, site.remote, site.env)


def remote_notes(site: Site, commit: str) -> str:
    return git(site.remote, "notes", "--ref=pub", "show", commit, check=False)


def test_confirm_in_a_shallow_ci_clone(site: Site, tmp_path: Path) -> None:
    commits = publish(site, 3)
    ci = ci_clone(site, tmp_path, "ci")
    r = ci.run("confirm", "--json")
    assert r.code == 0, r.out + r.err
    data = r.json()
    assert sorted(c["commit"] for c in data["commits"]) == sorted(commits)
    assert data["deepened"] > 0 and data["notes_pushed"]
    for c in commits:
        assert "gitpub-confirm: ok job=" in remote_notes(site, c)
    # a second run checks only what came since
    more = publish(site, 1, start=3)
    ci2 = ci_clone(site, tmp_path, "ci2")
    r = ci2.run("confirm", "--json")
    assert r.code == 0, r.out + r.err
    assert [c["commit"] for c in r.json()["commits"]] == more
    assert r.json()["checked"] <= 2


def test_tampered_job_commit_is_flagged(site: Site, tmp_path: Path) -> None:
    publish(site, 1)
    other = tmp_path / "tamper"
    git(tmp_path, "clone", "-q", str(site.remote), str(other))
    site.repos.append(other)
    (other / "posts/p0.md").write_text("tampered\n")
    git(other, "commit", "-q", "-a", "--amend", "--no-edit")
    git(other, "push", "-q", "-f", "origin", "HEAD:main")
    bad = git(other, "rev-parse", "HEAD").strip()
    ci = ci_clone(site, tmp_path, "ci", depth=None)
    r = ci.run("confirm")
    assert r.code == 1
    assert bad in r.out and "posts/p0.md: content differs" in r.out
    assert "BAD" in remote_notes(site, bad)


def test_racing_confirm_runs_keep_each_others_notes(site: Site, tmp_path: Path) -> None:
    commits = publish(site, 4)
    first = git(site.remote, "rev-list", "--max-parents=0", "main").strip()
    clones = [ci_clone(site, tmp_path, f"ci{i}", depth=None) for i in range(2)]
    ranges = [f"{first}..{commits[1]}", f"{commits[1]}..{commits[3]}"]
    procs = [subprocess.Popen([sys.executable, "-m", "gitpub", "-C", str(c.path), "confirm",
                               "--range", rng], env=site.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for c, rng in zip(clones, ranges,
                                                                         strict=True)]
    results = [(*p.communicate(timeout=120), p.returncode) for p in procs]
    assert all(code == 0 for _, _, code in results), results
    for c in commits:
        assert "gitpub-confirm: ok" in remote_notes(site, c), c


def test_concurrent_note_writers_lose_nothing(site: Site) -> None:
    script = (
        "import sys\nfrom pathlib import Path\nfrom gitpub.git.repo import Repository\n"
        "from gitpub.git.notes import add_notes\n"
        "with Repository.discover(Path(sys.argv[1])) as r:\n"
        "    head = r.read_ref('refs/heads/main')\n"
        "    for i in range(25):\n"
        "        add_notes(r, {head: [f'writer {sys.argv[2]} line {i}']}, 'test')\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(site.path), str(w)],
                              env=site.env) for w in range(4)]
    assert all(p.wait(120) == 0 for p in procs)
    head = site.git("rev-parse", "main").strip()
    lines = site.git("notes", "--ref=pub", "show", head).splitlines()
    assert len(lines) == 100 and len(set(lines)) == 100
    with Repository.discover(site.path) as repo:
        assert add_notes(repo, {head: ["writer 0 line 0"]}, "again") == site.git(
            "rev-parse", "refs/notes/pub").strip(), "an existing line is not added twice"


def test_deepened_counts_the_commits_actually_fetched(site: Site, tmp_path: Path) -> None:
    """A 4-commit history in a depth-1 clone: 3 commits fetched, though 64 were asked for."""
    publish(site, 3)
    total = int(git(site.remote, "rev-list", "--count", "main").strip())
    ci = ci_clone(site, tmp_path, "ci")
    r = ci.run("confirm", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["deepened"] == total - 1 == 3
    assert int(git(ci.path, "rev-list", "--count", "origin/main").strip()) == total
