"""``git pub confirm`` attacked a third time (issue 22, what round two left): an acceptance
given in a fork whose CI has the same key, a run whose branch is not its anchor's, and notes
too large to read.

CI is modelled as in ``test_confirm_trust``: a fresh clone per run with the key and an anchor
file kept between runs. The attacker is a clone with push access; it never has the key or the
anchor file — but it may run a fork whose CI has the same key, and ask that fork's people to
accept what it pushed there.
"""

from __future__ import annotations

from pathlib import Path

from conftest import Site, git
from test_confirm import attacker_clone, ci_clone, commit_as, message_of, remote_notes
from test_confirm_trust import anchored, keyed_run

# -- 1. an acceptance given in a fork with the same key ---------------------------------------


def test_an_acceptance_given_in_a_fork_accepts_nothing_here(site: Site, tmp_path: Path) -> None:
    """A bad commit is pushed to A (open BAD) and, the same commit, to B: a fork whose CI has
    the same key. B's people accept it there. The attacker copies B's acceptance line (a valid
    MAC under the key) onto the commit's note in A's notes: A's BAD stays open."""
    good = anchored(site, tmp_path)
    evil = attacker_clone(site, tmp_path)
    bad = commit_as(evil, message_of(evil, good[0]), {"evil.js": "x\n"})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1 and bad in [b["commit"] for b in r.json()["open_bad"]], r.out
    # B: a fork of A as it is now (the bad commit too), its own CI and anchor, the same key
    fork = Site(tmp_path / "fork", tmp_path / "fork.git", site.env, site.repos)
    git(tmp_path, "clone", "-q", "--mirror", str(site.remote), str(fork.remote))
    git(fork.remote, "update-ref", "-d", "refs/notes/pub")
    site.repos.append(fork.remote)
    (tmp_path / "b").mkdir()
    r = ci_clone(fork, tmp_path / "b", "ci0", depth=None).run("confirm", "--json")
    assert r.code == 1 and bad in [b["commit"] for b in r.json()["open_bad"]], r.out
    r = ci_clone(fork, tmp_path / "b", "accept", depth=None).run(
        "confirm", "--accept", bad, "--reason", "fine in the fork")
    assert r.code == 0, r.out + r.err
    line = next(ln for ln in remote_notes(fork, bad).splitlines() if "accepted by" in ln)
    # the attack on A: B's acceptance line appended to the commit's note in A's notes
    git(evil, "fetch", "-q", "origin", "+refs/notes/pub:refs/notes/pub")
    git(evil, "notes", "--ref=pub", "append", "-m", line, bad)
    git(evil, "push", "-q", "origin", "refs/notes/pub")
    r = keyed_run(site, tmp_path, "ci2")
    assert r.code == 1, r.out + r.err
    assert [b["commit"] for b in r.json()["open_bad"]] == [bad], r.out
    assert r.json()["accepted"] == []
    # A's own people can still accept it, and then it is closed
    r = ci_clone(site, tmp_path, "accept", depth=None).run(
        "confirm", "--accept", bad, "--reason", "reverted by hand")
    assert r.code == 0, r.out + r.err
    r = keyed_run(site, tmp_path, "ci3")
    assert r.code == 0, r.out + r.err
    assert bad in [a["commit"] for a in r.json()["accepted"]], r.out


# -- 2. the anchor's branch -----------------------------------------------------------------------


def test_a_run_for_another_branch_than_its_anchors_is_refused(site: Site,
                                                              tmp_path: Path) -> None:
    """The anchor was written by runs confirming main. A run with the same anchor told to
    confirm another branch (a CI job's --branch changed, or a cache shared between the jobs
    of two branches) is refused: main's notes are no rollback check for that branch."""
    anchored(site, tmp_path)
    site.git("push", "-q", "origin", "main:release")
    r = keyed_run(site, tmp_path, "ci1", "--branch", "release")
    assert r.code == 1, r.out + r.err
    assert "anchor of branch main" in r.out and "release" in r.out, r.out
    r = keyed_run(site, tmp_path, "ci2", "--branch", "main")
    assert r.code == 0, r.out + r.err


def test_without_branch_the_anchors_branch_is_confirmed(site: Site, tmp_path: Path) -> None:
    """The remote's default branch moved to a decoy (its HEAD): a run without --branch still
    confirms the anchor's branch, where the bad commit is."""
    good = anchored(site, tmp_path)
    site.git("push", "-q", "origin", "main:decoy")
    git(site.remote, "symbolic-ref", "HEAD", "refs/heads/decoy")
    evil = attacker_clone(site, tmp_path)
    git(evil, "checkout", "-q", "-B", "main", "origin/main")
    bad = commit_as(evil, message_of(evil, good[0]), {"evil.js": "x\n"})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1 and bad in r.json()["bad"], r.out + r.err


# -- 3. notes too large to read ---------------------------------------------------------------


def test_an_oversized_note_is_not_read_and_said_so(site: Site, tmp_path: Path) -> None:
    """The attacker pushes a commit with a 2 MiB note on it: confirm reads no note larger
    than its bound; the run fails, naming the commit, the size and the bound (a person removes
    the note), instead of reading and rewriting it."""
    anchored(site, tmp_path)
    evil = attacker_clone(site, tmp_path)
    commit_as(evil, b"A hand edit\n", {"posts/hand.md": "hand\n"})
    git(evil, "push", "-q", "origin", "HEAD:main")
    tip = git(evil, "rev-parse", "HEAD").strip()
    git(evil, "fetch", "-q", "origin", "+refs/notes/pub:refs/notes/pub")
    big = tmp_path / "big.txt"
    big.write_text(("x" * 1023 + "\n") * ((2 << 20) // 1024))  # 2 MiB, twice the bound
    git(evil, "notes", "--ref=pub", "add", "-F", str(big), tip)
    git(evil, "push", "-q", "origin", "refs/notes/pub")
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1, r.out + r.err
    assert tip in r.out and "larger than" in r.out, r.out
    # the person removes it: the next run is fine
    git(evil, "notes", "--ref=pub", "remove", tip)
    git(evil, "push", "-q", "origin", "refs/notes/pub")
    r = keyed_run(site, tmp_path, "ci2")
    assert r.code == 0, r.out + r.err


def test_an_oversized_notes_commit_is_not_read_and_said_so(site: Site,
                                                           tmp_path: Path) -> None:
    """A notes commit on top with a 2 MiB message (a ledger padded out): not read."""
    from test_confirm_gate import forged_notes_commit

    anchored(site, tmp_path)
    reader = attacker_clone(site, tmp_path, "reader")
    padding = ["Gitpub-Checked-Prefix: " + "A" * 1000] * ((2 << 20) // 1000)
    forged = forged_notes_commit(reader, ["Gitpub-Confirm-Ledger: v4", *padding])
    git(reader, "push", "-q", "origin", f"{forged}:refs/notes/pub")
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1, r.out + r.err
    assert forged in r.out and "larger than" in r.out, r.out
