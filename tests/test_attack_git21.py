"""The git backend of issue 21 under attack: what the person's git configuration and
environment make git do, a repository changed by the person's own git while a command runs.

Each test is a hole found by attacking the backend (``git cat-file``, ``update-ref --stdin``,
the network segment, the checkout), kept closed: real git, real repositories, in process.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import Site, git, spawn, wait_stopped
from test_delivery import article, prepare

REAL_GIT = shutil.which("git") or "git"


def killing_git(tmp_path: Path, *words: str) -> str:
    """A ``PATH`` whose git runs the real one, except that a git given one of ``words`` is
    killed (SIGKILL, as the OOM killer kills) before it answers."""
    bin_dir = tmp_path / "-".join(("killing", *words)).replace("--", "-")
    bin_dir.mkdir()
    script = bin_dir / "git"
    test = " || ".join(f'[ "$a" = "{w}" ]' for w in words)
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do if {test}; then kill -9 $$; fi; done\n'
                      f'exec {REAL_GIT} "$@"\n')
    script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def test_a_remote_configured_as_a_mirror_still_takes_gitpubs_pushes(site: Site) -> None:
    """``remote.origin.mirror=true`` (a clone that mirrors itself to a backup, say) makes
    every ``git push origin <refspec>`` die: "--mirror can't be combined with refspecs".
    Each run spent an attempt on it and left the job waiting (exit 5), for good. gitpub's
    pushes name their refs exactly: they push those, never a mirror of every ref."""
    site.git("config", "remote.origin.mirror", "true")
    site.git("tag", "draft")  # a mirror push would send it; gitpub's must not
    job = prepare(site, "mirror", "posts/mirror.md", article("mirror"))
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED", r.out
    assert git(site.remote, "show", "main:posts/mirror.md") == article("mirror")
    assert git(site.remote, "for-each-ref", "refs/tags", "refs/remotes") == ""
    assert f"refs/pub/jobs/{job['job_id']}" in git(site.remote, "for-each-ref")
    checks = {c["name"]: c for c in site.call("doctor", "--json").json()["checks"]}
    assert checks["remote"]["status"] == "ok", checks["remote"]  # its push --dry-run too


def _kill_once(site: Site, marker: Path, ref: str) -> None:
    """A ``reference-transaction`` hook that kills its ``git update-ref`` (SIGKILL, as the OOM
    killer would) once, when a transaction moving ``ref`` is prepared: its locks taken,
    nothing moved."""
    hook = site.path / ".git/hooks/reference-transaction"
    hook.write_text(f'#!/bin/sh\n[ "$1" = prepared ] && [ ! -e "{marker}" ] && '
                    f'grep -q " {ref}" && touch "{marker}" && kill -9 $PPID\nexit 0\n')
    hook.chmod(0o755)


def test_a_ref_transaction_killed_from_outside_is_no_refusal(site: Site, tmp_path: Path
                                                             ) -> None:
    """``git update-ref --stdin`` killed by a signal while it moved a job's refs was reported
    as git refusing the move ("git refused to move a ref: ", exit 1, a hint to run
    ``git fsck``): nothing was refused, nothing is damaged. A passing fault (exit 5, run
    again), which the next run gets past."""
    _kill_once(site, tmp_path / "killed", "refs/pub/jobs/")
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/k.md", "-",
                  input=article("k"))
    assert r.code == 5 and "killed" in r.out and "refused" not in r.out, r.out + r.err
    assert (tmp_path / "killed").exists() and site.job_refs() == {}
    job = prepare(site, "k", "posts/k.md", article("k"))
    assert job["state"] == "LOCAL_COMMITTED"


def test_a_branch_move_killed_from_outside_is_finished_by_the_next_run(site: Site,
                                                                      tmp_path: Path) -> None:
    """The same kill in the move of the local branch after a publication (a logged ref: its
    own ``update-ref``, not the command's session): said to be refused by git before. The
    publication stands, the move is a passing fault (exit 5) that the next run finishes."""
    job = prepare(site, "k", "posts/k.md", article("k"))
    _kill_once(site, tmp_path / "killed", "refs/heads/main")
    r = site.call("push", "--json")
    assert r.code == 5 and r.json()["jobs"][0]["state"] == "PUBLISHED", r.out + r.err
    assert "killed" in r.out and "refused" not in r.out, r.out
    assert site.git("rev-parse", "main") != site.git("rev-parse", "origin/main")
    assert site.call("push").code == 0
    assert site.git("rev-parse", "main") == site.git("rev-parse", "origin/main")
    assert site.git("status", "--porcelain") == ""
    assert git(site.remote, "log", "-1", "--format=%(trailers:key=Blog-Job-Id,valueonly)",
               "main").strip() == job["job_id"]


def test_a_git_killed_from_outside_is_no_answer_for_confirm(site: Site, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """``git merge-base --is-ancestor`` (and the ``rev-list`` before it) killed by a signal
    exits -9, which was read as git's answer "not an ancestor": a keyed ``confirm`` found
    every checked-through point "not in the history of the branch any more: it was
    rewritten (a force-push?)" and pushed BAD verdicts to the notes, for a person to accept.
    A git killed is no answer: exit 5, nothing judged, nothing pushed. (A walk's ``git log``
    killed was "git log failed", exit 1: no damage either.)"""
    monkeypatch.setenv("GITPUB_CONFIRM_KEY", "ci-secret-0123456789abcdef")
    assert site.call("confirm", "--no-anchor", "--first-run").code == 0
    for i in range(2):
        prepare(site, f"k{i}", f"posts/k{i}.md", article(i))
        assert site.call("push").code == 0
        assert site.call("confirm", "--no-anchor").code == 0
    prepare(site, "k2", "posts/k2.md", article(2))
    assert site.call("push").code == 0
    notes = git(site.remote, "for-each-ref", "refs/notes/")
    for words in (("--is-ancestor", "--max-count=1"), ("log",)):  # ``log``: the walk's
        monkeypatch.setenv("PATH", killing_git(tmp_path, *words))
        r = site.call("confirm", "--json", "--no-anchor")
        assert r.code == 5 and "killed" in r.out and "BAD" not in r.out, r.out + r.err
        assert git(site.remote, "for-each-ref", "refs/notes/") == notes


@pytest.mark.parametrize("variable", ["GIT_ICASE_PATHSPECS", "GIT_GLOB_PATHSPECS"])
def test_the_persons_pathspec_variables_do_not_reach_gitpubs_git(site: Site,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 variable: str) -> None:
    """``GIT_ICASE_PATHSPECS=1`` or ``GIT_GLOB_PATHSPECS=1`` exported by the person: every
    ``git --literal-pathspecs`` gitpub runs died ("global 'literal' pathspec setting is
    incompatible with all other global pathspec settings"), so ``sync`` could commit no
    uncommitted change (exit 1), and a checkout move could read no index entry. gitpub says
    how each of its pathspecs is meant; the person's defaults do not reach its git."""
    monkeypatch.setenv(variable, "1")
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nEdited.\n")
    (site.path / "posts/new.md").write_text(article("new"))
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert [c["status"] for c in r.json()["commits"]] == ["published"], r.out
    assert git(site.remote, "show", "main:posts/new.md") == article("new")
    assert site.git("status", "--porcelain") == ""


def test_a_hook_that_refuses_the_branch_move_leaves_the_branch_with_a_note(site: Site
                                                                          ) -> None:
    """A ``reference-transaction`` hook of the person's that refuses moves of the local
    branch (``core.hooksPath``: "main is protected here"): the publication went out, yet the
    push failed the job's report (exit 1, "git refused to move a ref", a hint to run
    ``git fsck``) showing it LOCAL_COMMITTED ("`git pub push` publishes it"), and every later
    push failed again. The branch is the person's: it is left alone, with a note that says
    why, its files as they were; the job is PUBLISHED."""
    hook = site.path / ".git/hooks/reference-transaction"
    hook.write_text('#!/bin/sh\n[ "$1" = prepared ] && grep -q " refs/heads/main$" && '
                    '{ echo "main is protected here" >&2; exit 1; }\nexit 0\n')
    hook.chmod(0o755)
    old = site.git("rev-parse", "main")
    prepare(site, "k", "posts/k.md", article("k"))
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "PUBLISHED", r.out
    assert "left alone" in job["note"] and "main is protected here" in job["note"], job
    assert git(site.remote, "show", "main:posts/k.md") == article("k")
    assert site.git("rev-parse", "main") == old
    assert site.git("status", "--porcelain") == "" and not (site.path / "posts/k.md").exists()
    assert site.call("push").code == 0


def test_a_hand_commit_in_latin_1_naming_a_path_that_is_not_ascii_is_refused_at_once(
        site: Site) -> None:
    """A person's commit stored in ISO-8859-1 (``i18n.commitEncoding``) that adds
    ``posts/naïve.md``: the manifest gitpub adds to its message names the path in UTF-8, which
    git, reading the message as ISO-8859-1, shows as ``naÃ¯ve.md``. Each run built the
    commit, found it was no proof of the job, and left the job waiting (exit 5, an attempt
    spent) — for good. Refused before any job, as an encoding in which ASCII is other
    characters is, saying what to do."""
    (site.path / "posts/naïve.md").write_text(article("naïve"))
    site.git("add", "posts/naïve.md")
    site.git("-c", "i18n.commitEncoding=ISO-8859-1", "commit", "-q", "-F", "-",
             input="Café: a naïve page\n".encode("latin-1"))
    tip = git(site.remote, "rev-parse", "main")
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    [commit] = r.json()["commits"]
    assert commit["status"] == "refused" and commit["job_id"] is None, commit
    assert "ISO-8859-1" in commit["reason"] and "UTF-8" in commit["reason"], commit
    assert site.job_refs() == {} and git(site.remote, "rev-parse", "main") == tip


def _prune_under_prepare(site: Site) -> None:
    """``git gc --prune=now`` run by the person while ``prepare`` has written the job's content
    commit and not yet recorded it (git's documented hazard of ``--prune=now``)."""
    p = spawn(site, "prepare", "--key", "k", "--to", "posts/k.md", "-",
              env={"GITPUB_PAUSE_AT": "commit.objects-written"}, input=article("k").encode())
    try:
        wait_stopped(p.pid, 30)
        subprocess.run(["git", "gc", "-q", "--prune=now"], cwd=site.path, check=True)
    finally:
        os.kill(p.pid, signal.SIGCONT)
    p.communicate(timeout=60)


def test_a_commit_pruned_before_it_was_recorded_is_built_again(site: Site) -> None:
    """The pruned content commit was recorded all the same, as an extra parent of the job's
    state commit: the job's history named a commit this repository no longer had (``git
    fsck``: broken link), every push of its state failed, for good. It is not recorded (the
    command stops, exit 5); the next run builds it again (the same commit) and publishes."""
    _prune_under_prepare(site)
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED", r.out
    assert git(site.remote, "show", "main:posts/k.md") == article("k")
    # fsck --strict at teardown: no broken link


def test_an_object_a_push_must_send_and_lacks_is_no_refusal_of_the_remote(site: Site) -> None:
    """A job's content commit gone from this repository after it was recorded (damage, or a
    prune in the instant before): every push said "the remote 'origin' refuses gitpub's job
    store (refs/pub/*): [remote rejected] (unpacker error)" — exit 2, a hint to change the
    remote's permissions — while git had said "Could not read <id>" here. It is this
    repository that lacks the object: said so."""
    job = prepare(site, "k", "posts/k.md", article("k"))
    commit = str(job["local_commit"])
    (site.path / ".git/objects" / commit[:2] / commit[2:]).unlink()
    site.repos.remove(site.path)  # damaged on purpose: no fsck at teardown
    r = site.call("push", "--json")
    assert r.code == 1, r.out + r.err
    assert "refuses gitpub's job store" not in r.out and "lacks" in r.out, r.out
    assert "git fsck" in r.out and "--prune=now" in r.out, r.out


def test_an_object_a_push_must_send_and_cannot_read_is_no_refusal_of_the_remote(
        site: Site) -> None:
    """The same with the content commit's file truncated (damage): git says "loose object …
    is corrupt" here and the server "unpacker error"; that was a refusal of the remote (exit
    2, change its permissions) too. It is this repository's object: said so."""
    job = prepare(site, "k", "posts/k.md", article("k"))
    commit = str(job["local_commit"])
    obj = site.path / ".git/objects" / commit[:2] / commit[2:]
    obj.chmod(0o644)
    obj.write_bytes(obj.read_bytes()[:20])
    site.repos.remove(site.path)  # damaged on purpose: no fsck at teardown
    r = site.call("push", "--json")
    assert r.code == 1, r.out + r.err
    assert "refuses gitpub's job store" not in r.out and "cannot read" in r.out, r.out
    assert f"object {commit} corrupt" in r.out and "git fsck" in r.out, r.out


def test_file_urls_as_git_reads_them_are_repositories(site: Site, tmp_path: Path) -> None:
    """``file://localhost/srv/my%20blog.git`` is a repository to git (the host of a file URL is
    ignored, the path is percent-decoded), and ``git push`` there works; gitpub's check before
    the network took the URL's text for a path and refused every push: "is not a git
    repository" (exit 2, change the URL)."""
    spaced = tmp_path / "my blog.git"
    site.remote.rename(spaced)
    site.remote = spaced
    site.repos[1] = spaced
    for i, url in enumerate((f"file://localhost{spaced}",
                             "file://" + str(spaced).replace(" ", "%20"))):
        site.git("remote", "set-url", "origin", url)
        prepare(site, f"url-{i}", f"posts/url-{i}.md", article(i))
        r = site.call("push", "--json")
        assert r.code == 0, r.out + r.err
        assert git(spaced, "show", f"main:posts/url-{i}.md") == article(i)


def test_a_trailer_reader_killed_is_no_verdict_on_a_hand_commit(site: Site, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """``git interpret-trailers`` (how git reads a message's trailers) killed by a signal while
    ``sync`` checked that a person's commit can carry the proof: the commit was refused —
    "its message cannot carry gitpub's proof ... reword it" (exit 4, a person acts) — for a
    passing fault. Exit 5; the next run publishes it."""
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nFixed.\n")
    site.git("commit", "-q", "-am", "Fix the welcome page")
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", killing_git(tmp_path, "interpret-trailers"))
    r = site.call("sync", "--json")
    assert r.code == 5 and "killed" in r.out and "refused" not in r.out, r.out + r.err
    assert site.job_refs() == {}
    monkeypatch.setenv("PATH", path)
    r = site.call("sync", "--json")
    assert r.code == 0 and [c["status"] for c in r.json()["commits"]] == ["published"], r.out
