"""`git pub confirm` as CI runs it: a fresh (shallow) clone, notes pushed, racing runs."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Result, Site, git, spawn
from test_delivery import article, prepare

from gitpub.git.notes import add_notes
from gitpub.git.repo import Repository

#: CI's secret (``GITPUB_CONFIRM_KEY``): the runs in CI clones are authenticated.
KEY = "ci-secret-0123456789abcdef"


def publish(site: Site, n: int, start: int = 0) -> list[str]:
    for i in range(start, start + n):
        prepare(site, f"job-{i}", f"posts/p{i}.md", article(i))
    r = site.call("push", "--json")
    assert r.code == 0, r.err
    return [str(j["remote_commit"]) for j in r.json()["jobs"]]


@dataclass
class CI(Site):
    """A fresh CI clone with CI's key and its rollback anchor (``GITPUB_CONFIRM_ANCHOR``: one
    file per test, kept between its CI clones as a CI cache keeps it). The first keyed run of a
    test is the one a person started with ``--first-run`` (when the anchor does not exist
    yet); the tests of that rule itself (``test_confirm_trust``) give the flags themselves."""

    anchor: Path = Path()
    first_runs: bool = True

    def run(self, *args: str, input: bytes | str | None = None,
            env: dict[str, str] | None = None, timeout: float = 60) -> Result:
        return super().run(*self.flags(args, env), input=input, env=env, timeout=timeout)

    def run_here(self, *args: str, input: bytes | str | None = None,
                 env: dict[str, str] | None = None) -> Result:
        return super().run_here(*self.flags(args, env), input=input, env=env)

    def call(self, *args: str, input: bytes | str = b"") -> Result:
        """In this process: the anchor from the environment as a CI job sets it."""
        before = os.environ.get("GITPUB_CONFIRM_ANCHOR")
        os.environ["GITPUB_CONFIRM_ANCHOR"] = str(self.anchor)
        try:
            return super().call(*self.flags(args, None), input=input)
        finally:
            if before is None:
                del os.environ["GITPUB_CONFIRM_ANCHOR"]
            else:
                os.environ["GITPUB_CONFIRM_ANCHOR"] = before

    def flags(self, args: tuple[str, ...], env: dict[str, str] | None) -> tuple[str, ...]:
        keyed = bool({**self.env, **os.environ, **(env or {})}.get("GITPUB_CONFIRM_KEY"))
        if self.first_runs and keyed and "confirm" in args and "--accept" not in args and \
                "--range" not in args and "--first-run" not in args and \
                not self.anchor.exists():
            return (*args, "--first-run")
        return args


def ci_clone(site: Site, tmp_path: Path, name: str, depth: int | None = 1, *,
             first_runs: bool = True) -> CI:
    path = tmp_path / name
    args = ["clone", "-q", "--no-local"] + ([f"--depth={depth}"] if depth else [])
    git(tmp_path, *args, site.remote.as_uri(), str(path))
    site.repos.append(path)
    anchor = tmp_path / "ci-cache" / "confirm-anchor.json"
    return CI(path, site.remote, {**site.env, "GITPUB_CONFIRM_KEY": KEY,
                                  "GITPUB_CONFIRM_ANCHOR": str(anchor)},
              anchor=anchor, first_runs=first_runs)


def remote_notes(site: Site, commit: str) -> str:
    return git(site.remote, "notes", "--ref=pub", "show", commit, check=False)


@pytest.mark.slow
def test_confirm_in_a_shallow_ci_clone(site: Site, tmp_path: Path) -> None:
    commits = publish(site, 3)
    ci = ci_clone(site, tmp_path, "ci")
    r = ci.run_here("confirm", "--json")
    assert r.code == 0, r.out + r.err
    data = r.json()
    assert sorted(c["commit"] for c in data["commits"]) == sorted(commits)
    assert data["deepened"] > 0 and data["notes_pushed"]
    for c in commits:
        assert "gitpub-confirm: ok job=" in remote_notes(site, c)
    # a second run checks only what came since
    more = publish(site, 1, start=3)
    ci2 = ci_clone(site, tmp_path, "ci2")
    r = ci2.run_here("confirm", "--json")
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
    r = ci.run_here("confirm")
    assert r.code == 1
    assert bad in r.out and "posts/p0.md: content differs" in r.out
    assert "BAD" in remote_notes(site, bad)


@pytest.mark.slow
def test_racing_confirm_runs_keep_each_others_notes(site: Site, tmp_path: Path) -> None:
    commits = publish(site, 4)
    first = git(site.remote, "rev-list", "--max-parents=0", "main").strip()
    clones = [ci_clone(site, tmp_path, f"ci{i}", depth=None) for i in range(2)]
    ranges = [f"{first}..{commits[1]}", f"{commits[1]}..{commits[3]}"]
    procs = [spawn(c, "confirm", "--range", rng) for c, rng in zip(clones, ranges, strict=True)]
    results = [(*p.communicate(timeout=120), p.returncode) for p in procs]
    assert all(code == 0 for _, _, code in results), results
    for c in commits:
        assert "gitpub-confirm: ok" in remote_notes(site, c), c


@pytest.mark.slow
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


# -- confirm as a security gate: each tampering is BAD, and BAD stays until accepted ----------

def attacker_clone(site: Site, tmp_path: Path, name: str = "attacker") -> Path:
    path = tmp_path / name
    git(tmp_path, "clone", "-q", str(site.remote), str(path))
    site.repos.append(path)
    return path


def report_unrecorded(site: Site) -> None:
    """Commit and push ``confirm_unrecorded: report``: the forged publications of a test about
    another rule have no record in the job store, which is BAD by itself otherwise."""
    site.write_config("confirm_unrecorded: report\n")
    site.git("commit", "-qam", "confirm: report unrecorded job commits")
    site.git("push", "-q", "origin", "main")


def commit_as(repo: Path, message: bytes, files: dict[str, str | None], *,
              amend: bool = False) -> str:
    for path, text in files.items():
        if text is None:
            git(repo, "rm", "-q", path)
            continue
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
        git(repo, "add", path)
    (repo / ".git" / "msg").write_bytes(message)
    git(repo, "commit", "-q", "--allow-empty", "--cleanup=verbatim", "-F", ".git/msg",
        *(["--amend"] if amend else []))
    return git(repo, "rev-parse", "HEAD").strip()


def message_of(repo: Path, commit: str) -> bytes:
    return git(repo, "cat-file", "commit", commit).split("\n\n", 1)[1].encode()


FORGED_JOB = "0badf00d-0000-5000-8000-000000000000"


def job_commit_message(files: dict[str, str], job_id: str = FORGED_JOB) -> bytes:
    """A well-formed job message for ``files``: its manifest and hash are right."""
    from gitpub.core.manifest import Manifest

    manifest = Manifest.build((p, 0o100644, t.encode()) for p, t in files.items())
    return (b"Publish: something\n\n" + manifest.serialize() + b"\nBlog-Job-Id: "
            + job_id.encode() + b"\nBlog-Manifest-Sha256: " + manifest.sha256().encode()
            + b"\n")


def confirm_in_ci(site: Site, tmp_path: Path, name: str, *args: str) -> Result:
    return ci_clone(site, tmp_path, name).run_here("confirm", *args)


@pytest.mark.slow
def test_extra_paths_are_bad_and_bad_stays_until_accepted(site: Site, tmp_path: Path) -> None:
    (good,) = publish(site, 1)
    assert confirm_in_ci(site, tmp_path, "ci0").code == 0
    evil = attacker_clone(site, tmp_path)
    bad = commit_as(evil, message_of(evil, good), {"evil.js": "alert(1)\n",
                                                   "posts/welcome.md": "changed\n"})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = confirm_in_ci(site, tmp_path, "ci1")
    assert r.code == 1, r.out + r.err
    assert f"BAD {bad}" in r.out
    assert "evil.js: changed, but not in the manifest" in r.out
    assert "posts/welcome.md: changed, but not in the manifest" in r.out
    # the next push's run is still red, although the bad commit is behind it now
    git(evil, "pull", "-q", "--ff-only", "origin", "main")
    commit_as(evil, b"A hand edit\n", {"posts/hand.md": "hand\n"})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = ci_clone(site, tmp_path, "ci2").run_here("confirm", "--json")
    assert r.code == 1, r.out + r.err
    assert r.json()["checked"] == 1 and r.json()["bad"] == []
    assert [row["commit"] for row in r.json()["open_bad"]] == [bad]
    # a person accepts it (the reason is sanitized), and later runs show the acceptance
    ci3 = ci_clone(site, tmp_path, "ci3")
    secret = "ghp_" + "A" * 36
    r = ci3.run_here("confirm", "--accept", bad, "--reason", f"reverted by hand {secret}")
    assert r.code == 0, r.out + r.err
    assert secret not in remote_notes(site, bad)
    assert "gitpub-confirm: accepted by" in remote_notes(site, bad)
    r = ci_clone(site, tmp_path, "ci4").run_here("confirm")
    assert r.code == 0, r.out + r.err
    assert f"accepted {bad}" in r.out


def test_accept_refuses_a_commit_without_a_bad_verdict(site: Site, tmp_path: Path) -> None:
    (good,) = publish(site, 1)
    ci = ci_clone(site, tmp_path, "ci")
    assert ci.run_here("confirm").code == 0
    r = ci.run_here("confirm", "--accept", good, "--reason", "why not")
    assert r.code == 2 and "no BAD verdict" in r.err


def test_cherry_pick_x_then_amend_is_bad(site: Site, tmp_path: Path) -> None:
    (good,) = publish(site, 1)
    assert confirm_in_ci(site, tmp_path, "ci0").code == 0
    evil = attacker_clone(site, tmp_path)
    commit_as(evil, b"Remove it\n", {"posts/p0.md": None})
    git(evil, "cherry-pick", "-x", good)
    (evil / "posts/p0.md").write_text("tampered\n")
    git(evil, "commit", "-q", "-a", "--amend", "--no-edit")
    picked = git(evil, "rev-parse", "HEAD").strip()
    assert "(cherry picked from commit" in message_of(evil, picked).decode()
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = confirm_in_ci(site, tmp_path, "ci1")
    assert r.code == 1, r.out + r.err
    assert f"BAD {picked}" in r.out and "posts/p0.md: content differs" in r.out


@pytest.mark.slow
def test_a_prefix_switch_in_the_same_push_does_not_hide_a_tampered_commit(
        site: Site, tmp_path: Path) -> None:
    (good,) = publish(site, 1)
    assert confirm_in_ci(site, tmp_path, "ci0").code == 0
    evil = attacker_clone(site, tmp_path)
    config = (evil / ".gitpub.yaml").read_text() + "trailer_prefix: Evil\n"
    switch = commit_as(evil, b"Switch the prefix\n", {".gitpub.yaml": config})
    commit_as(evil, b"Remove it\n", {"posts/p0.md": None})
    bad = commit_as(evil, message_of(evil, good), {"posts/p0.md": "tampered\n"})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = ci_clone(site, tmp_path, "ci1").run_here("confirm", "--json")
    assert r.code == 1, r.out + r.err
    data = r.json()
    assert data["bad"] == [bad] and data["config_changes"] == [switch]
    # the switch only adds a prefix to check: Blog (the start's and the default) stays
    assert data["prefixes"] == ["Blog", "Evil"]
    assert any("trailer_prefix changes to Evil" in r for r in data["remarks"])
    # from the next run on, the new configuration applies, and Blog is still checked
    r = ci_clone(site, tmp_path, "ci2").run_here("confirm", "--json")
    assert r.json()["prefixes"] == ["Evil", "Blog"] and r.code == 1


def test_two_commits_claiming_one_job_id_are_bad(site: Site, tmp_path: Path) -> None:
    (good,) = publish(site, 1)
    assert confirm_in_ci(site, tmp_path, "ci0").code == 0
    evil = attacker_clone(site, tmp_path)
    text = (evil / "posts/p0.md").read_text()
    commit_as(evil, b"Remove it\n", {"posts/p0.md": None})
    again = commit_as(evil, message_of(evil, good), {"posts/p0.md": text})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = confirm_in_ci(site, tmp_path, "ci1")
    assert r.code == 1, r.out + r.err
    assert f"BAD {again}" in r.out and f"already published by {good}" in r.out


def test_two_claims_of_one_job_id_in_one_run_are_bad(site: Site, tmp_path: Path) -> None:
    report_unrecorded(site)
    evil = attacker_clone(site, tmp_path)
    files = {"posts/new.md": "# New\n"}
    first = commit_as(evil, job_commit_message(files), files)
    commit_as(evil, b"Remove it\n", {"posts/new.md": None})
    second = commit_as(evil, job_commit_message(files), files)
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = ci_clone(site, tmp_path, "ci").run_here("confirm", "--json")
    assert r.code == 1
    assert r.json()["bad"] == [second], r.out
    assert first in r.out


def test_a_job_commit_touching_a_steering_path_is_bad(site: Site, tmp_path: Path) -> None:
    evil = attacker_clone(site, tmp_path)
    files = {".github/workflows/evil.yml": "on: push\n", "posts/x.md": "# X\n"}
    bad = commit_as(evil, job_commit_message(files), files)
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = ci_clone(site, tmp_path, "ci").run_here("confirm")
    assert r.code == 1
    assert ".github/workflows/evil.yml: a path that steers git, CI or gitpub" in r.out
    assert bad in r.out


@pytest.mark.slow
def test_the_checked_through_point_comes_from_the_remote_notes(site: Site,
                                                               tmp_path: Path) -> None:
    publish(site, 2)
    first = ci_clone(site, tmp_path, "ci0", depth=None).run_here("confirm", "--json")
    assert first.code == 0 and first.json()["checked"] == 3  # the site's first commit, 2 jobs
    more = publish(site, 1, start=2)
    again = ci_clone(site, tmp_path, "ci1", depth=None).run_here("confirm", "--json")
    assert again.code == 0, again.err
    assert again.json()["checked"] == 1 and again.json()["start"] != more[0]
    nothing = ci_clone(site, tmp_path, "ci2").run_here("confirm", "--json")
    assert nothing.json()["checked"] == 0 and nothing.code == 0


def test_readme_notes_commands_work_in_a_publishers_clone(site: Site, tmp_path: Path) -> None:
    assert site.call("hooks", "install").code == 0
    assert site.git("fetch", "origin") == ""  # no notes on the remote yet: no failure
    (good,) = publish(site, 1)
    site.git("notes", "--ref=pub", "add", "-m", "a local note", "HEAD~1")
    assert ci_clone(site, tmp_path, "ci").run_here("confirm").code == 0
    site.git("fetch", "origin")
    site.git("notes", "--ref=pub", "merge", "refs/notes/remotes/origin/pub")
    shown = site.git("log", "--notes=pub", "-2")
    assert "gitpub-confirm: ok job=" in shown and "a local note" in shown
    assert good in shown


@pytest.mark.slow
def test_deepened_counts_the_commits_actually_fetched(site: Site, tmp_path: Path) -> None:
    """A 4-commit history in a depth-1 clone: 3 commits fetched, though 64 were asked for."""
    publish(site, 3)
    total = int(git(site.remote, "rev-list", "--count", "main").strip())
    ci = ci_clone(site, tmp_path, "ci")
    r = ci.run_here("confirm", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["deepened"] == total - 1 == 3
    assert int(git(ci.path, "rev-list", "--count", "origin/main").strip()) == total
