"""``git pub confirm``'s fast paths judge as its slow ones do, on a hostile history.

The two ways of each step: the walk listed by one ``git log`` and searched here (what confirm
runs) or filtered by C git (``--grep``, counted by a second git); the first-parent diff asked
of ``git diff-tree`` or computed in-process on sound trees (``git.treediff``); and the branch
with the notes in one fetch. Each run below is made twice in fresh clones — once filtered
with every diff in-process, once listed with every diff from C git — and the two must say the
same — on a history with a tampered publication on a
merged side branch, a ``cherry-pick -x`` of a publication amended, a claim under the prefix in
lower case, a claim in an ISO-8859-1 message, and a second run (from the remote's notes, with
the key) after one more tampered commit, where the first BAD must stay open (sticky) and a
ledger forged by the attacker without the key is not believed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Site, git
from test_confirm import (
    KEY,
    attacker_clone,
    ci_clone,
    commit_as,
    job_commit_message,
    message_of,
    publish,
    report_unrecorded,
)
from test_confirm_gate import forged_notes_commit

import gitpub.verify.confirm
from gitpub.git import walk
from gitpub.store.fetchdir import fetch_ref, fetch_with


def paths(monkeypatch: pytest.MonkeyPatch, *, slow: bool) -> None:
    """Slow: every walk listed (the messages filtered here). Fast: every walk filtered by C
    git."""
    def scan(*args: Any, **kwargs: Any) -> walk.LogScan:
        shallow = bool(walk.shallow_commits(args[0]))  # only a listed walk can say
        return walk.log_scan(*args, **{**kwargs, "listed": slow or shallow})

    monkeypatch.setattr(gitpub.verify.confirm, "log_scan", scan)


def verdicts(site: Site, tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch, *,
             slow: bool) -> tuple[int, dict[str, Any]]:
    """One confirm run, in-process, in a fresh full clone, notes not pushed."""
    clone = ci_clone(site, tmp_path, name, depth=None)
    with monkeypatch.context() as m:
        m.setenv("GITPUB_CONFIRM_KEY", KEY)
        paths(m, slow=slow)
        r = clone.call("confirm", "--json", "--no-push-notes")
    data = r.json()
    data.pop("remarks")  # a remark may name the path taken
    return r.code, data


def both_ways(site: Site, tmp_path: Path, name: str,
              monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, Any]]:
    fast = verdicts(site, tmp_path, f"{name}-fast", monkeypatch, slow=False)
    slow = verdicts(site, tmp_path, f"{name}-slow", monkeypatch, slow=True)
    assert fast == slow
    return fast


@pytest.mark.slow
def test_fast_and_slow_paths_agree_on_a_hostile_history(
        site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report_unrecorded(site)  # the forged claims have no store record: BAD by that rule alone
    good, second = publish(site, 2)
    evil = attacker_clone(site, tmp_path)
    # a tampered copy of a publication on a side branch, merged
    git(evil, "checkout", "-q", "-b", "side")
    on_side = commit_as(evil, message_of(evil, good), {"evil.js": "alert(1)\n"})
    git(evil, "checkout", "-q", "main")
    commit_as(evil, b"Hand edit\n", {"posts/hand.md": "hand\n"})
    git(evil, "merge", "-q", "--no-ff", "-m", "Merge side", "side")
    # cherry-pick -x of a publication, then its content changed
    commit_as(evil, b"Remove it\n", {"posts/p1.md": None})
    git(evil, "cherry-pick", "-x", second)
    (evil / "posts/p1.md").write_text("tampered\n")
    git(evil, "commit", "-q", "-a", "--amend", "--no-edit")
    picked = git(evil, "rev-parse", "HEAD").strip()
    # a claim under the prefix in lower case, touching a path it does not list
    files = {"posts/lower.md": "# Lower\n"}
    message = job_commit_message(files).replace(b"Blog-Job-Id", b"blog-job-id")
    lower = commit_as(evil, message, {**files, "posts/other.md": "other\n"})
    # a claim in an ISO-8859-1 message
    files = {"posts/latin.md": "# Latin\n"}
    job = "1badf00d-0000-5000-8000-000000000000"
    git(evil, "config", "i18n.commitEncoding", "ISO-8859-1")
    latin = commit_as(evil, job_commit_message(files, job).replace(
        b"Publish: something", "Publié".encode("latin-1")), files)
    git(evil, "push", "-q", "origin", "HEAD:main")

    code, first = both_ways(site, tmp_path, "first", monkeypatch)
    assert code == 1
    assert set(first["bad"]) == {on_side, picked, lower}, first
    assert latin in [c["commit"] for c in first["commits"] if c["ok"]]
    assert first["checked"] == int(git(site.remote, "rev-list", "--count", "main"))

    # the run CI makes (notes pushed), then a second run after one more tampered commit, and
    # a ledger the attacker forged without the key on top of the notes
    ci = ci_clone(site, tmp_path, "seed", depth=None)
    assert ci.run_here("confirm").code == 1
    git(evil, "pull", "-q", "--no-rebase", "origin", "main")
    again = commit_as(evil, message_of(evil, good), {"posts/again.md": "again\n"})
    git(evil, "push", "-q", "origin", "HEAD:main")
    forged = forged_notes_commit(evil, ["Gitpub-Confirm-Ledger: v2",
                                        f"Gitpub-Checked-Through: {again}",
                                        "Gitpub-Ledger-Mac: hmac-sha256:" + "0" * 64])
    git(evil, "push", "-q", "origin", f"{forged}:refs/notes/pub")

    code, later = both_ways(site, tmp_path, "second", monkeypatch)
    assert code == 1 and later["checked"] == 1  # from the authentic point: the new commit
    assert later["bad"] == [again]
    assert {row["commit"] for row in later["open_bad"]} == {on_side, picked, lower, again}


def test_one_fetch_brings_exactly_the_notes_ref(site: Site, tmp_path: Path) -> None:
    """The notes come through the pattern ``refs/notes/pub*``: a ref it also matches is never
    taken for them, and a remote without them is no error — as two exact fetches would say."""
    from gitpub.git.remote import Remote
    from gitpub.git.repo import Repository
    from gitpub.verify.confirm import REMOTE_NOTES

    tip = git(site.remote, "rev-parse", "main").strip()
    other = git(site.remote, "commit-tree", f"{tip}^{{tree}}", input=b"not the notes\n").strip()
    git(site.remote, "update-ref", "refs/notes/pub-old", other)
    clone = ci_clone(site, tmp_path, "ci", depth=None)
    with Repository.discover(clone.path) as repo:
        remote = Remote(repo, "origin", "main")
        assert fetch_with(remote, "refs/notes/pub", REMOTE_NOTES) == (tip, None)
        assert repo.read_ref(REMOTE_NOTES) is None
        notes = git(site.remote, "commit-tree", f"{tip}^{{tree}}", input=b"notes\n").strip()
        git(site.remote, "update-ref", "refs/notes/pub", notes)
        assert fetch_with(remote, "refs/notes/pub", REMOTE_NOTES) == (tip, notes)
        assert repo.read_ref(REMOTE_NOTES) == notes
        assert fetch_ref(remote, "refs/notes/pub", REMOTE_NOTES) == notes  # the exact fetch
        assert repo.read_ref("refs/pub/remote-notes-old") is None  # never mirrored here


def test_which_claim_came_first_is_ancestry_not_the_walk(
        site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sound claims of one job id made in the same second, the later one (a descendant)
    sorting first by id: the ancestor is the publication, the descendant is BAD — filtered or
    listed."""
    from test_confirm import FORGED_JOB

    report_unrecorded(site)
    evil = attacker_clone(site, tmp_path)
    monkeypatch.setenv("GIT_COMMITTER_DATE", "1800000000 +0000")
    files = {"posts/twice.md": "# Twice\n"}
    message = job_commit_message(files)
    first = commit_as(evil, message, files)
    for attempt in range(64):
        git(evil, "reset", "-q", "--hard", first)
        commit_as(evil, b"Remove it %d\n" % attempt, {"posts/twice.md": None})
        again = commit_as(evil, message, files)
        if again < first:
            break
    else:
        raise AssertionError("no descendant sorting first by id")
    git(evil, "push", "-q", "origin", "HEAD:main")
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    code, data = both_ways(site, tmp_path, "twice", monkeypatch)
    assert code == 1 and data["bad"] == [again]
    row = next(c for c in data["commits"] if c["commit"] == again)
    assert row["job_id"] == FORGED_JOB
    assert row["problems"] == [f"job {FORGED_JOB} was already published by {first}"]
