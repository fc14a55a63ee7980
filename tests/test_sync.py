"""`git pub sync`: a person's commits reach the remote whole, or nothing changes at all.

Every test works on real repositories and checks the result with C git: the published commit's
tree, modes, author and message on the remote; and, when sync must stop, that the branch, the
index and the working tree are byte for byte what they were.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Site, git
from test_delivery import article, commit_file, other_writer, prepare, remote_job_ids


def hand_commit(site: Site, path: str, text: str, message: str | None = None) -> str:
    (site.path / path).parent.mkdir(parents=True, exist_ok=True)
    (site.path / path).write_text(text)
    site.git("add", path)
    site.git("commit", "-q", "-m", message or f"edit {path}", "--", path)  # only this path
    return site.git("rev-parse", "HEAD").strip()


def snapshot(site: Site) -> dict[str, Any]:
    """Everything a person could lose: the branch, the index, the working tree (bytes)."""
    files = {}
    for root, dirs, names in os.walk(site.path):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            p = Path(root, name)
            files[str(p.relative_to(site.path))] = (os.readlink(p) if p.is_symlink()
                                                    else p.read_bytes())
    return {"head": site.git("rev-parse", "HEAD"), "main": site.git("rev-parse", "main"),
            "cached": site.git("diff", "--cached", "--binary"),
            "unstaged": site.git("diff", "--binary"),
            "status": site.git("status", "--porcelain=v2", "--untracked-files=all"),
            "files": files}


def statuses(r: Any) -> list[str]:
    return [c["status"] for c in r.json()["commits"]]


def test_hand_commit_reaches_the_remote_with_its_own_message(site: Site) -> None:
    commit = hand_commit(site, "posts/welcome.md", "# Welcome\n\nFixed a typo.\n",
                         "fix typo in issue 999")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    (job,) = r.json()["jobs"]
    assert job["state"] == "PUBLISHED" and job["idempotency_key"] == f"sync:{commit}"
    (line,) = r.json()["commits"]
    assert line["commit"] == commit and line["status"] == "published"
    assert git(site.remote, "show", "main:posts/welcome.md") == "# Welcome\n\nFixed a typo.\n"
    body = git(site.remote, "log", "-1", "--format=%B", "main")
    assert body.startswith("fix typo in issue 999\n\ngitpub-manifest v1\n")
    sync_id = git(site.remote, "log", "-1", "--format=%(trailers:key=Blog-Sync-Id,valueonly)",
                  "main").strip()
    assert sync_id == commit
    assert site.git("rev-parse", "main") == git(site.remote, "rev-parse", "main")
    assert site.git("status", "--porcelain") == ""
    assert site.call("sync").code == 0 and len(remote_job_ids(site)) == 1


def test_deletion_rename_exec_and_symlink_are_published_exactly(site: Site) -> None:
    """The Done-when case: one hand commit that deletes, renames, makes a file executable and
    adds a symlink, by another author, with a signed-off message — published as it is. The
    hooks are installed, so the pre-push check verifies the v2 manifest on the way out."""
    assert site.call("hooks", "install").code == 0
    (site.path / "posts/gone.md").write_text(article("gone"))
    (site.path / "posts/old-name.md").write_text(article("renamed"))
    (site.path / "posts/run.sh").write_text("#!/bin/sh\necho hi\n")
    site.write_config("content: ['posts/**']\n")
    site.git("add", ".")
    site.git("commit", "-q", "-m", "setup")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")
    site.git("rm", "-q", "posts/gone.md")
    site.git("mv", "posts/old-name.md", "posts/new-name.md")
    os.chmod(site.path / "posts/run.sh", 0o755)
    os.symlink("new-name.md", site.path / "posts/latest.md")
    site.git("add", "-A", "posts")
    message = ("Tidy the posts\n\nRemove one, rename one, make the script runnable.\n\n"
               "Signed-off-by: Ada Lovelace <ada@example.com>\n")
    site.git("commit", "-q", "--author", "Ada Lovelace <ada@example.com>", "-m", message)
    commit = site.git("rev-parse", "HEAD").strip()
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert statuses(r) == ["published"]
    published = git(site.remote, "rev-parse", "main").strip()
    # byte- and mode-exact: nothing else changed on the remote, so the trees are identical
    assert git(site.remote, "rev-parse", "main^{tree}") == site.git("rev-parse",
                                                                    f"{commit}^{{tree}}")
    tree = git(site.remote, "ls-tree", "-r", "main", "posts/").splitlines()
    modes = {line.split("\t")[1]: line.split()[0] for line in tree}
    assert modes["posts/run.sh"] == "100755" and modes["posts/latest.md"] == "120000"
    assert "posts/gone.md" not in modes and "posts/old-name.md" not in modes
    fmt = "%an <%ae>%n%ad"
    assert git(site.remote, "log", "-1", f"--format={fmt}", "main") == site.git(
        "log", "-1", f"--format={fmt}", commit)
    body = git(site.remote, "log", "-1", "--format=%B", "main")
    assert body.startswith("Tidy the posts\n\nRemove one, rename one, make the script "
                           "runnable.\n\ngitpub-manifest v2\n")
    signed = git(site.remote, "log", "-1",
                 "--format=%(trailers:key=Signed-off-by,valueonly)", "main").strip()
    assert signed == "Ada Lovelace <ada@example.com>", "the person's trailer stays a trailer"
    parsed = git(site.remote, "interpret-trailers", "--parse", input=body.encode())
    assert parsed.startswith("Signed-off-by: Ada Lovelace")
    assert f"Blog-Sync-Id: {commit}" in parsed
    # the proof checks out, deletions included
    r = site.call("confirm", "--json", "--no-push-notes")
    assert r.code == 0, r.out + r.err
    assert [c["ok"] for c in r.json()["commits"] if c["commit"] == published] == [True]
    # the local branch follows and the working tree is clean, symlink and mode included
    assert site.git("rev-parse", "main") == published + "\n"
    assert site.git("status", "--porcelain") == ""
    assert os.readlink(site.path / "posts/latest.md") == "new-name.md"
    assert os.access(site.path / "posts/run.sh", os.X_OK)


def test_uncommitted_content_is_synced_and_nothing_else_is_staged(site: Site) -> None:
    (site.path / "posts/new.md").write_text(article("new"))
    (site.path / "README.md").write_text("not content\n")
    (site.path / "notes.txt").write_text("untracked, not content\n")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "show", "main:posts/new.md") == article("new")
    assert git(site.remote, "ls-tree", "--name-only", "main", "README.md") == ""
    status = site.git("status", "--porcelain").splitlines()
    assert sorted(status) == ["?? README.md", "?? notes.txt"]
    assert r.json()["commits"][0]["uncommitted"] is True


def test_a_content_file_staged_then_changed_again_is_left_exactly_as_it_was(site: Site) -> None:
    """Staged one way, changed again on disk: committing the working tree's version would drop
    the staged one, so sync refuses the uncommitted changes (and, as for any refused commit,
    delivers nothing) and changes nothing at all."""
    hand_commit(site, "posts/a.md", article("a"))
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nThe staged version.\n")
    site.git("add", "posts/welcome.md")
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nThe working tree's version.\n")
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["blocked", "refused"]
    assert r.json()["commits"][1]["uncommitted"] is True
    assert "posts/welcome.md staged, then changed again" in r.json()["commits"][1]["reason"]
    assert snapshot(site) == before
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/") == "posts/welcome.md\n"
    site.git("add", "posts/welcome.md")  # the person decides: the working tree's version
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "show", "main:posts/welcome.md") == (
        "# Welcome\n\nThe working tree's version.\n")


def test_a_staged_non_content_change_survives_sync(site: Site) -> None:
    (site.path / "README.md").write_text("staged by the person\n")
    site.git("add", "README.md")
    (site.path / "README.md").write_text("staged by the person\nand more, unstaged\n")
    hand_commit(site, "posts/welcome.md", "# Welcome\n\nEdited.\n")
    (site.path / "posts/extra.md").write_text(article("extra"))  # uncommitted content
    cached = site.git("diff", "--cached", "--", "README.md")
    unstaged = site.git("diff", "--", "README.md")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert statuses(r) == ["published", "published"]
    assert site.git("diff", "--cached", "--", "README.md") == cached
    assert site.git("diff", "--", "README.md") == unstaged
    assert site.git("status", "--porcelain").splitlines() == ["AM README.md"]
    assert git(site.remote, "ls-tree", "--name-only", "main", "README.md") == ""


def test_with_every_hook_event_lost_reconcile_and_sync_deliver(site: Site,
                                                               tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    commit_file(other, "posts/theirs.md", article("theirs"))
    hand_commit(site, "posts/committed.md", article("committed"))
    (site.path / "posts/uncommitted.md").write_text(article("uncommitted"))
    r = site.call("reconcile", "--json")
    assert r.code == 0, r.out + r.err
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    for name in ("committed", "uncommitted", "theirs"):
        assert git(site.remote, "show", f"main:posts/{name}.md") == article(name)
    assert (site.path / "posts/theirs.md").read_text() == article("theirs")
    assert site.git("status", "--porcelain") == ""


def test_a_conflicting_hand_commit_changes_nothing(site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    hand_commit(site, "posts/welcome.md", "# Welcome\n\nMine.\n")
    hand_commit(site, "posts/second.md", article("second"))
    commit_file(other, "posts/welcome.md", "# Welcome\n\nTheirs.\n")
    (site.path / "README.md").write_text("staged\n")
    site.git("add", "README.md")
    (site.path / "posts/draft.md").write_text(article("draft"))  # uncommitted content
    before = snapshot(site)
    remote_before = git(site.remote, "rev-parse", "main")
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["conflict", "blocked", "blocked"]
    assert "posts/welcome.md: changed on the remote" in r.json()["commits"][0]["reason"]
    assert "left as they were" in r.json()["local"]
    assert snapshot(site) == before
    assert git(site.remote, "rev-parse", "main") == remote_before
    assert site.job_refs() == {}, "no job is made for a plan that stops"
    # the person brings the remote in and sorts it out; then sync delivers
    site.git("stash", "-q", "--include-untracked")
    site.git("pull", "-q", "--rebase", "-X", "theirs", "origin", "main")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err


def test_a_commit_mixing_content_and_other_paths_is_refused_whole(site: Site) -> None:
    first = hand_commit(site, "posts/first.md", article("first"))
    (site.path / "README.md").write_text("readme\n")
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nEdited.\n")
    site.git("add", "README.md", "posts/welcome.md")
    site.git("commit", "-q", "-m", "readme and post")
    before = snapshot(site)
    remote_before = git(site.remote, "rev-parse", "main")
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["blocked", "refused"]
    assert "mixes content paths (posts/welcome.md) with other paths (README.md)" in \
        r.json()["commits"][1]["reason"]
    assert r.json()["commits"][0]["commit"] == first
    assert snapshot(site) == before
    assert git(site.remote, "rev-parse", "main") == remote_before
    r = site.call("sync")
    assert "refused" in r.out and "split it" in r.out, "the reason is in the text output too"


def test_held_commits_stay_local_and_the_content_around_them_lands(site: Site,
                                                                   tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    commit_file(other, "posts/theirs.md", article("theirs"))
    hand_commit(site, "posts/one.md", article("one"))
    held = hand_commit(site, "README.md", "mine, not content\n", "my readme")
    hand_commit(site, "posts/two.md", article("two"))
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert statuses(r) == ["published", "held", "published"]
    assert r.json()["commits"][1]["commit"] == held
    assert git(site.remote, "ls-tree", "--name-only", "main", "README.md") == ""
    log = git(site.remote, "log", "--format=%s", "main").splitlines()
    assert log[:3] == ["edit posts/two.md", "edit posts/one.md", "hand edit"]
    # local main: the remote, then the held commit replayed on top (same author, message)
    assert site.git("log", "--format=%s", "-1", "main").strip() == "my readme"
    assert site.git("rev-parse", "main^") == git(site.remote, "rev-parse", "main")
    assert site.git("status", "--porcelain") == ""
    assert (site.path / "README.md").read_text() == "mine, not content\n"
    assert (site.path / "posts/theirs.md").read_text() == article("theirs")
    # the held commit is still the person's to push, and sync says so again
    r = site.call("sync", "--json")
    assert r.code == 0 and statuses(r) == ["held"]


def test_a_held_commit_is_replayed_as_git_would_stamp_it(site: Site, tmp_path: Path,
                                                          monkeypatch: Any) -> None:
    """The replayed held commit is committed by whom and when git says
    (``GIT_COMMITTER_NAME``/``EMAIL``/``DATE``, any date format git reads, its time zone);
    its author stays the person's, byte for byte."""
    other = other_writer(tmp_path, site)
    commit_file(other, "posts/theirs.md", article("theirs"))
    held = hand_commit(site, "README.md", "mine, not content\n", "my readme")
    author = site.git("log", "-1", "--format=%an <%ae> %ad", "--date=raw", held).strip()
    hand_commit(site, "posts/two.md", article("two"))
    for name, value in (("GIT_COMMITTER_NAME", "Rebaser"), ("GIT_COMMITTER_EMAIL", "r@ex.org"),
                        ("GIT_COMMITTER_DATE", "2021-03-04 05:06:07 +0530")):
        monkeypatch.setenv(name, value)
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    replayed = site.git("log", "-1", "--format=%s%n%cn <%ce> %cd%n%an <%ae> %ad",
                        "--date=raw", "main").splitlines()
    assert replayed == ["my readme", "Rebaser <r@ex.org> 1614814567 +0530", author]
    assert git(site.path, "var", "GIT_COMMITTER_IDENT") == replayed[1] + "\n"


def test_a_held_commit_the_remote_conflicts_with_stops_sync(site: Site,
                                                            tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    commit_file(other, ".gitpub.yaml", (site.path / ".gitpub.yaml").read_text() + "# theirs\n")
    hand_commit(site, "posts/one.md", article("one"))
    site.write_config("# mine\n")
    site.git("commit", "-q", "-am", "my config")
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["blocked", "conflict"]
    assert "could not be rebuilt" in r.json()["commits"][1]["reason"]
    assert snapshot(site) == before


def test_a_merge_commit_is_refused(site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    commit_file(other, "posts/theirs.md", article("theirs"))
    hand_commit(site, "posts/mine.md", article("mine"))
    site.git("pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["blocked", "refused"]
    assert "a merge commit" in r.json()["commits"][1]["reason"]
    assert snapshot(site) == before


def test_a_message_git_reads_differently_is_refused(site: Site) -> None:
    hand_commit(site, "posts/welcome.md", "# Welcome\n\nEdited.\n",
                "edit welcome\n\n---\nnotes after a divider\n")
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["refused"]
    assert "reword it" in r.json()["commits"][0]["reason"]
    assert snapshot(site) == before


def test_a_chain_lands_in_order_one_commit_each(site: Site) -> None:
    shas = [hand_commit(site, "posts/welcome.md", f"# Welcome\n\nVersion {i}.\n",
                        f"welcome v{i}") for i in range(3)]
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert statuses(r) == ["published"] * 3
    ids = git(site.remote, "log", "--reverse", "-3",
              "--format=%(trailers:key=Blog-Sync-Id,valueonly)", "main").split()
    assert ids == shas
    assert git(site.remote, "log", "--reverse", "-3", "--format=%s", "main").split("\n")[:3] \
        == ["welcome v0", "welcome v1", "welcome v2"]


def test_jobs_and_hand_edits_in_one_sync(site: Site) -> None:
    prepare(site, "job", "posts/job.md", article("job"))
    hand_commit(site, "posts/hand.md", article("hand"))
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert sorted(j["state"] for j in r.json()["jobs"]) == ["PUBLISHED", "PUBLISHED"]
    assert len(remote_job_ids(site)) == 2


def test_reconcile_registers_lost_events_and_sync_clears_them(site: Site) -> None:
    commit = hand_commit(site, "posts/welcome.md", "# Welcome\n\nLost event.\n")
    r = site.call("reconcile")
    assert r.code == 0 and "pending hand edits" in r.err
    assert site.git("for-each-ref", "--format=%(objectname)", "refs/pub/outbox/").split() == [
        commit]
    assert site.call("sync").code == 0
    assert site.git("for-each-ref", "refs/pub/outbox/") == ""


def test_unreachable_remote_leaves_everything_and_a_later_sync_delivers(site: Site) -> None:
    hand_commit(site, "posts/welcome.md", "# Welcome\n\nOffline edit.\n")
    url = site.git("remote", "get-url", "origin").strip()
    site.git("remote", "set-url", "origin", str(site.path.parent / "nowhere.git"))
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code != 0
    assert snapshot(site) == before
    site.git("remote", "set-url", "origin", url)
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "show", "main:posts/welcome.md") == "# Welcome\n\nOffline edit.\n"


def test_a_job_of_an_amended_commit_is_superseded_not_delivered(site: Site,
                                                                tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    hand_commit(site, "posts/welcome.md", "# Welcome\n\nFirst try.\n")
    # a job exists for it (e.g. made by an earlier sync that was interrupted), then the remote
    # moves and the person amends their commit
    r = site.run("sync", env={"GITPUB_CRASH_AT": "delivery.fetched"})
    assert r.code < 0 or r.code == 137, r.out + r.err
    commit_file(other, "posts/theirs.md", article("theirs"))
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nSecond try.\n")
    site.git("commit", "-q", "-a", "--amend", "-m", "edit welcome, better")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    states = sorted(j["state"] for j in r.json()["jobs"])
    assert states == ["PUBLISHED", "SKIPPED"]
    assert git(site.remote, "show", "main:posts/welcome.md") == "# Welcome\n\nSecond try.\n"
    assert len(remote_job_ids(site)) == 1


def test_a_scissors_line_after_a_divider_is_refused_without_hanging(site: Site) -> None:
    """git 2.39 loops forever reading such a message: sync refuses it before git sees it."""
    hand_commit(site, "posts/welcome.md", "# Welcome\n\nEdited.\n",
                "edit\n\n---\n# ------------------------ >8 ------------------------\nx\n")
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["refused"] and "scissors" in r.json()["commits"][0]["reason"]
    assert snapshot(site) == before


def signed_commit(site: Site, message: str) -> str:
    """A commit of the index with a ``gpgsig`` header (its signature is not checked here: only
    whether sync keeps it or says it does not), made the branch's tip."""
    tree = site.git("write-tree").strip()
    parent = site.git("rev-parse", "HEAD").strip()
    raw = (f"tree {tree}\nparent {parent}\nauthor Ada <ada@example.com> 1700000000 +0530\n"
           "committer Ada <ada@example.com> 1700000100 +0530\n"
           "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAd\n =abcd\n"
           " -----END PGP SIGNATURE-----\n"
           f"\n{message}\n").encode()
    sha = site.git("hash-object", "-t", "commit", "-w", "--stdin", input=raw).strip()
    site.git("update-ref", "refs/heads/main", sha, parent)
    return sha


def test_a_signature_sync_cannot_keep_is_said_to_be_dropped(site: Site) -> None:
    """A signature covers the parent and the message, which sync changes: the published commit
    and the replayed held commit are unsigned, and the output says so for each."""
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nSigned edit.\n")
    site.git("add", "posts/welcome.md")
    content = signed_commit(site, "signed content edit")
    (site.path / "README.md").write_text("signed, not content\n")
    site.git("add", "README.md")
    held = signed_commit(site, "signed readme")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert statuses(r) == ["published", "held"]
    remark, local = r.json()["remark"], r.json()["local"]
    assert f"{content[:12]} is signed: it is published unsigned" in remark, remark
    assert f"without the signature of {held[:12]}" in local, local
    assert "gpgsig" not in git(site.remote, "cat-file", "-p", "main")
    assert git(site.remote, "log", "-1", "--format=%an %ad", "--date=raw", "main") == (
        "Ada 1700000000 +0530\n")


def test_a_commit_removed_from_the_remote_is_not_published_again(site: Site,
                                                                  tmp_path: Path) -> None:
    """Somebody force-pushed the remote to drop a commit (a leaked draft, say) that the local
    branch still has: `git pull --rebase` would drop it (fork-point); sync must not publish it
    again, and changes nothing."""
    leaked = hand_commit(site, "posts/leak.md", article("leaked draft"), "oops")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")
    other = other_writer(tmp_path, site)
    git(other, "reset", "-q", "--hard", "HEAD~1")
    git(other, "push", "-q", "--force", "origin", "main")
    later = hand_commit(site, "posts/welcome.md", "# Welcome\n\nA later edit.\n")
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert [(c["commit"], c["status"]) for c in r.json()["commits"]] == [
        (leaked, "refused"), (later, "blocked")]
    assert "was removed from it since" in r.json()["commits"][0]["reason"]
    assert snapshot(site) == before
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/") == "posts/welcome.md\n"
    site.git("rebase", "-q", "--onto", f"{leaked}^", leaked, "main")  # the person drops it
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/") == "posts/welcome.md\n"
    assert git(site.remote, "show", "main:posts/welcome.md") == "# Welcome\n\nA later edit.\n"


def test_a_commit_in_another_encoding_is_published_in_it(site: Site) -> None:
    """An ``encoding ISO-8859-1`` commit keeps its header and bytes on the remote, and its
    subject is shown decoded as the commit says (not as mojibake)."""
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nEncoded.\n")
    site.git("add", "posts/welcome.md")
    tree = site.git("write-tree").strip()
    parent = site.git("rev-parse", "HEAD").strip()
    raw = (f"tree {tree}\nparent {parent}\nauthor J\xf6rg <j@example.com> 1700000000 +0100\n"
           "committer J\xf6rg <j@example.com> 1700000000 +0100\nencoding ISO-8859-1\n\n"
           "S\xfc\xdfes Update\n").encode("latin-1")
    sha = site.git("hash-object", "-t", "commit", "-w", "--stdin", input=raw).strip()
    site.git("update-ref", "refs/heads/main", sha, parent)
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert [c["subject"] for c in r.json()["commits"]] == ["S\xfc\xdfes Update"]
    published = subprocess.run(["git", "cat-file", "commit", "main"], cwd=site.remote,
                               capture_output=True, check=True).stdout
    assert b"\nencoding ISO-8859-1\n" in published and b"\nS\xfc\xdfes Update\n" in published
    assert b"\nauthor J\xf6rg <j@example.com> 1700000000 +0100\n" in published


def manifest_lines(site: Site, rev: str = "main") -> dict[str, str]:
    """The published commit's manifest paragraph: path -> mode (``000000``: deleted)."""
    body = git(site.remote, "log", "-1", "--format=%B", rev)
    paragraph = body.split("gitpub-manifest v2\n", 1)[1].split("\n\n", 1)[0]
    return {line.split(" ", 2)[2]: line.split(" ", 2)[0] for line in paragraph.splitlines()}


def test_a_staged_git_rm_and_git_mv_are_synced_as_deletions_and_additions(site: Site) -> None:
    """Issue 23.1: a deletion and a rename staged with ``git rm``/``git mv`` (no longer in the
    index nor in the working tree) are the uncommitted change, not a pathspec git add rejects."""
    hand_commit(site, "posts/a.md", article("a"))
    assert site.call("sync").code == 0
    site.git("rm", "-q", "posts/a.md")
    site.git("mv", "posts/welcome.md", "posts/hello.md")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert statuses(r) == ["published"] and r.json()["commits"][0]["uncommitted"] is True
    assert git(site.remote, "ls-tree", "-r", "--name-only", "main", "posts/") == (
        "posts/hello.md\n")
    assert git(site.remote, "show", "main:posts/hello.md") == "# Welcome\n\nThe first post.\n"
    assert manifest_lines(site) == {"posts/a.md": "000000", "posts/hello.md": "100644",
                                    "posts/welcome.md": "000000"}
    assert site.git("rev-parse", "main") == git(site.remote, "rev-parse", "main")
    assert site.git("status", "--porcelain") == ""
    r = site.call("confirm", "--json", "--no-push-notes")
    assert r.code == 0, r.out + r.err


def test_a_staged_deletion_of_a_file_kept_in_the_working_tree_is_left_alone(site: Site) -> None:
    """``git rm --cached``: the index says deleted, the working tree still has the file; which
    one the person means is theirs to say, so nothing is done and nothing changes."""
    site.git("rm", "-q", "--cached", "posts/welcome.md")
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["refused"]
    assert "posts/welcome.md staged, then changed again" in r.json()["commits"][0]["reason"]
    assert snapshot(site) == before
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/") == "posts/welcome.md\n"


SECRET = "ghp_" + "a1B2" * 9

SHAPES = {
    # name: (what the person does, the remote's posts/ afterwards)
    "folder to file": (lambda p: (shutil.rmtree(p / "posts/img"),
                                  (p / "posts/img").write_text("now a file\n")),
                       {"posts/img", "posts/logo", "posts/welcome.md"}),
    "file to folder": (lambda p: ((p / "posts/logo").unlink(), (p / "posts/logo").mkdir(),
                                  (p / "posts/logo/x.png").write_text("in a folder\n")),
                       {"posts/img/a.png", "posts/logo/x.png", "posts/welcome.md"}),
    "case-only rename": (lambda p: (p / "posts/welcome.md").rename(p / "posts/Welcome.md"),
                         {"posts/img/a.png", "posts/logo", "posts/Welcome.md"}),
}


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "uncommitted"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_path_changing_shape_is_no_conflict(site: Site, shape: str, committed: bool) -> None:
    """Issue 23.2: a folder replaced by a file, a file by a folder, a case-only rename: the
    job's own deletions make way for its additions; no false CONFLICT."""
    (site.path / "posts/img").mkdir()
    (site.path / "posts/img/a.png").write_text("png\n")
    (site.path / "posts/logo").write_text("logo\n")
    site.write_config("content: ['posts/**']\n")
    site.git("add", ".")
    site.git("commit", "-q", "-m", "setup")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")
    change, expected = SHAPES[shape]
    change(site.path)
    if committed:
        site.git("add", "-A", "posts")
        site.git("commit", "-q", "-m", shape)
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert statuses(r) == ["published"]
    listed = git(site.remote, "ls-tree", "-r", "--name-only", "main", "posts/").splitlines()
    assert set(listed) == expected
    assert site.git("rev-parse", "main") == git(site.remote, "rev-parse", "main")
    assert site.git("status", "--porcelain") == ""


def test_resolve_retry_of_a_hand_commit_conflicting_at_its_commit_does_not_crash(
        site: Site) -> None:
    """A sync job in CONFLICT before it has a content commit (as the false conflicts of a
    folder replaced by a file left them; here a case twin, made without sync's own plan, which
    refuses it first): ``resolve --retry`` snapshots it again from the hand commit, its base
    (the commit's parent) kept, and says it still conflicts. No AssertionError."""
    from gitpub.core.states import Kind
    from gitpub.pipeline.prepare import drive
    from gitpub.pipeline.request import Request, ensure_job
    from gitpub.runtime.session import open_session

    parent = site.git("rev-parse", "HEAD").strip()
    commit = hand_commit(site, "posts/Welcome.md", article("twin"))
    with open_session(site.path, lambda _: None) as ctx:
        job, _ = ensure_job(ctx, Request(("posts/Welcome.md",), (), False, key=f"sync:{commit}",
                                         kind=Kind.SYNC, base=parent, commit=commit))
        job = drive(ctx, job)
    assert job.state.value == "CONFLICT" and job.record.local_commit is None
    r = site.call("resolve", job.job_id, "--retry", "--json")
    assert r.code == 4, r.out + r.err
    (after,) = r.json()["jobs"]
    assert after["state"] == "CONFLICT" and "differs only in case" in after["failure_detail"]
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/") == "posts/welcome.md\n"


def test_resolve_retry_of_a_hand_commit_in_review_runs_its_pipeline_again(site: Site) -> None:
    """A hand commit's job in REVIEW (a secret in it) has no sources: ``resolve --retry`` runs
    its pipeline again from the commit (REVIEW again, the secret is still there), instead of
    failing for want of stored content."""
    hand_commit(site, "posts/leak.md", f"# Leak\n\ntoken {SECRET}\n")
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    (job,) = r.json()["jobs"]
    assert job["state"] == "REVIEW"
    r = site.call("resolve", job["job_id"], "--retry", "--json")
    assert r.code == 4, r.out + r.err
    (after,) = r.json()["jobs"]
    assert after["state"] == "REVIEW" and after["failure_code"] == "secret_in_source"


def test_a_case_twin_is_refused_before_anything_is_done(site: Site) -> None:
    """A file added next to one that differs only in case is one file on macOS and Windows:
    committed or not, sync refuses it before anything is stored or committed, and says why;
    local main, its index and working tree stay exactly as they were."""
    (site.path / "posts/Welcome.md").write_text(article("twin"))
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["refused"] and r.json()["commits"][0]["uncommitted"] is True
    assert "posts/Welcome.md and posts/welcome.md differ only in case" in r.json()[
        "commits"][0]["reason"]
    assert "left as they were" in r.json()["local"], r.json()["local"]
    assert snapshot(site) == before and site.job_refs() == {}
    site.git("add", "posts/Welcome.md")
    site.git("commit", "-q", "-m", "a twin")
    r = site.call("sync", "--json")
    assert r.code == 4 and statuses(r) == ["refused"], r.out + r.err
    assert site.job_refs() == {}
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/") == "posts/welcome.md\n"


def test_uncommitted_changes_behind_a_stopped_job_are_not_committed(site: Site) -> None:
    """Issue 23.2: when a hand commit's job stops (here REVIEW), the uncommitted content
    changes after it are not committed onto local main: the output says main was left as it
    was, and it was."""
    hand_commit(site, "posts/leak.md", f"# Leak\n\ntoken {SECRET}\n")
    (site.path / "posts/new.md").write_text(article("new"))
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["review", "blocked"]
    assert r.json()["commits"][1]["uncommitted"] is True
    assert "left as they were" in r.json()["local"], r.json()["local"]
    assert snapshot(site) == before
    assert [j["state"] for j in r.json()["jobs"]] == ["REVIEW"]
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/") == "posts/welcome.md\n"


def reachable_text(repo: Path) -> bytes:
    """Every object reachable from any ref (branches, refs/pub/, notes) or reflog, raw."""
    objects = subprocess.run(["git", "rev-list", "--objects", "--all", "--reflog"], cwd=repo,
                             capture_output=True, check=True).stdout
    ids = b"\n".join(line.split(b" ")[0] for line in objects.splitlines())
    return subprocess.run(["git", "cat-file", "--batch"], cwd=repo, input=ids + b"\n",
                          capture_output=True, check=True).stdout


def test_gates_run_before_uncommitted_content_is_committed(site: Site) -> None:
    """Issue 23.3: a secret in uncommitted content is refused (REVIEW, exit 4) before sync
    commits anything: HEAD, the index and the working tree exactly as they were, and no ref,
    note or remote object holds the secret."""
    hand_commit(site, "posts/a.md", article("a"))
    (site.path / "posts/welcome.md").write_text(f"# Welcome\n\ntoken {SECRET}\n")
    (site.path / "posts/new.md").write_text(article("new"))
    site.git("add", "posts/new.md")
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    # the secret scan reads the working tree before any object is written: a refusal of the
    # whole run (top-level "refused"), the hand commit before it not delivered either
    assert statuses(r) == ["blocked"]
    reason = r.json()["refused"]
    assert "posts/welcome.md:3: possible secret (github-token" in reason, reason
    assert SECRET not in r.out + r.err
    assert "left as they were" in r.json()["local"]
    assert snapshot(site) == before
    assert r.json()["jobs"] == [] and site.job_refs() == {}
    assert SECRET.encode() not in reachable_text(site.path)
    assert SECRET.encode() not in reachable_text(site.remote)
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/") == "posts/welcome.md\n"


def test_a_configured_gate_refusing_uncommitted_content_changes_nothing(site: Site) -> None:
    """A configured gate (here: a size limit) refusing the uncommitted content: REVIEW, exit 4,
    nothing committed; fixed, the next sync delivers it."""
    site.write_config("gates:\n  - name: size\n    run: [sh, -c, 'for f in $GITPUB_FILES; do "
                      "test $(wc -c < $f) -le 200 || exit 1; done']\n")
    site.git("commit", "-q", "-am", "a size gate")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")
    (site.path / "posts/big.md").write_text("# Big\n\n" + "x" * 300 + "\n")
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["review"] and "gate size" in r.json()["commits"][0]["reason"]
    assert snapshot(site) == before and site.job_refs() == {}
    (site.path / "posts/big.md").write_text("# Big\n\nsmall now\n")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "show", "main:posts/big.md") == "# Big\n\nsmall now\n"


@pytest.mark.parametrize(("encoding", "codec", "why"), [
    ("IBM037", "cp037", "in which ASCII text is other characters"),
    ("UTF-16", "utf-16", "in which ASCII text is other characters"),
    ("X-NO-SUCH-CHARSET", "ascii", "unknown to gitpub"),
])
def test_a_commit_in_an_encoding_that_cannot_carry_the_proof_is_refused_up_front(
        site: Site, encoding: str, codec: str, why: str) -> None:
    """Issue 23.4: the proof sync adds is ASCII; in IBM037 or UTF-16 git reads those bytes as
    other characters (and an unknown encoding, who knows): refused at once (exit 4, nothing
    stored, nothing changed), not delivered and retried until FAILED. Re-committed in UTF-8,
    as the reason says, it is published."""
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nEncoded.\n")
    site.git("add", "posts/welcome.md")
    tree = site.git("write-tree").strip()
    parent = site.git("rev-parse", "HEAD").strip()
    raw = (f"tree {tree}\nparent {parent}\nauthor J <j@example.com> 1700000000 +0100\n"
           f"committer J <j@example.com> 1700000000 +0100\nencoding {encoding}\n\n").encode() \
        + "Edit welcome\n".encode(codec)
    sha = site.git("hash-object", "-t", "commit", "-w", "--stdin", input=raw).strip()
    site.git("update-ref", "refs/heads/main", sha, parent)
    before = snapshot(site)
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert statuses(r) == ["refused"] and r.json()["jobs"] == []
    reason = r.json()["commits"][0]["reason"]
    assert f"its message is in the encoding '{encoding}', {why}" in reason, reason
    assert "git reset --soft HEAD^" in reason
    assert snapshot(site) == before and site.job_refs() == {}
    assert git(site.remote, "rev-parse", "main") == site.git("rev-parse", "origin/main")
    site.git("reset", "-q", "--soft", "HEAD^")
    site.git("commit", "-q", "-m", "Edit welcome")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "show", "main:posts/welcome.md") == "# Welcome\n\nEncoded.\n"
    # the person's UTF-16 commit (NUL bytes: `git fsck --strict` objects) is theirs to drop:
    # nothing of gitpub's keeps it alive
    site.git("reflog", "expire", "--expire=now", "--all")
    site.git("prune", "--expire=now")
    proc = subprocess.run(["git", "cat-file", "-e", sha], cwd=site.path, capture_output=True)
    assert proc.returncode != 0


def test_an_article_replaced_by_a_folder_of_other_files_stages_only_the_deletion(
        site: Site) -> None:
    """posts/welcome.md becomes a folder holding a non-content file: the uncommitted change
    is the article's deletion; the folder's file is not content, and stays untracked."""
    (site.path / "posts/welcome.md").unlink()
    (site.path / "posts/welcome.md").mkdir()
    (site.path / "posts/welcome.md/notes.txt").write_text("not content\n")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "ls-tree", "-r", "--name-only", "main", "posts/") == ""
    assert site.git("status", "--porcelain", "--untracked-files=all").splitlines() == [
        "?? posts/welcome.md/notes.txt"]
