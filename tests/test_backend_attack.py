"""The git backend under attack: the user's environment, a git that hangs or is killed, the
shapes a repository and its working tree take (a submodule, a bare repository with
``GIT_WORK_TREE``), and paths git stores that gitpub would not write.

Each test is a hole found by attacking the backend (issue 21 part 1), kept closed: real git,
real repositories; a hung git is a real git behind a script that stops answering.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Site, git, make_site
from test_delivery import article, prepare

from gitpub.core.errors import CorruptStateError, GitpubError
from gitpub.core.paths import quoted
from gitpub.git import catfile, refs, run
from gitpub.git.catfile import CatFile
from gitpub.git.repo import MODE_FILE, Entry, Repository

REAL_GIT = shutil.which("git") or "git"


def hanging_git(tmp_path: Path, on: str) -> str:
    """A ``PATH`` whose git runs the real one, except that ``git … ON …`` never answers."""
    bin_dir = tmp_path / "hanging-bin"
    bin_dir.mkdir()
    script = bin_dir / "git"
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = "{on}" ] && exec sleep 30; done\n'
                      f'exec {REAL_GIT} "$@"\n')
    script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


# -- the cat-file process -------------------------------------------------------------------------

def test_a_pack_access_trace_from_the_user_does_not_stop_reads(site: Site) -> None:
    """``GIT_TRACE_PACK_ACCESS=2`` (inherited from the user) makes ``git cat-file`` write a
    line per object read on stderr: a pipe nobody drains fills, and git and gitpub wait on each
    other for good. Its stderr goes to a file: a thousand reads finish. (Blobs: a command
    keeps the commits and trees it read, and would not ask git again.)"""
    jobs = [prepare(site, f"trace-{i}", f"posts/trace-{i}.md", article(i)) for i in range(2)]
    site.git("gc", "-q")
    code = (
        "import sys\nfrom pathlib import Path\nfrom gitpub.git.repo import Repository\n"
        "with Repository.discover(Path(sys.argv[1])) as repo:\n"
        "    tip = repo.read_ref('refs/pub/jobs/' + sys.argv[2])\n"
        "    record = repo.lookup(repo.commit(tip).tree, 'job.json')\n"
        "    for _ in range(1500):\n"
        "        repo.blob(record.sha)\n"
        "print('done')\n")
    proc = subprocess.run([sys.executable, "-c", code, str(site.path), str(jobs[0]["job_id"])],
                          env={**site.env, "GIT_TRACE_PACK_ACCESS": "2"}, capture_output=True,
                          timeout=30)
    assert proc.returncode == 0 and proc.stdout == b"done\n", proc.stderr


def test_a_cat_file_killed_while_it_answers_is_asked_again(site: Site,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The OOM killer (or a person) ends ``git cat-file`` after gitpub asked for an object:
    that says nothing about the object, which a new process reads; it was reported as
    unreadable (corrupt) before."""
    head = site.git("rev-parse", "HEAD").strip()
    original = CatFile._read_line
    killed: list[int] = []

    def read_line(self: CatFile, name: str) -> bytes:
        if not killed:
            assert self._proc is not None
            killed.append(self._proc.pid)
            os.kill(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        return original(self, name)

    monkeypatch.setattr(CatFile, "_read_line", read_line)
    with Repository.discover(site.path) as repo:
        assert repo.commit(head).sha == head
        assert killed and repo.reader_pids() and repo.reader_pids() != killed


def test_a_hung_cat_file_is_given_up_once_with_a_clear_error(site: Site, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """A ``git cat-file`` that never answers (a hung file system) made every command hang for
    good; now it is killed after ``TIMEOUT`` seconds without a byte, the command says so, and
    later reads in the same command do not wait again. A passing fault, not damage: exit 5
    (run again later), never "state cannot be read"."""
    for i in range(3):
        prepare(site, f"hung-{i}", f"posts/hung-{i}.md", article(i))
    monkeypatch.setattr(catfile, "TIMEOUT", 0.5)
    monkeypatch.setenv("PATH", hanging_git(tmp_path, "cat-file"))
    started = time.monotonic()
    shown = site.call("status", "--all", "--json")
    took = time.monotonic() - started
    assert shown.code == 5, shown.out + shown.err
    assert "git cat-file did not answer in 0.5 seconds" in shown.out
    assert "cannot be read" not in shown.out
    assert "Traceback" not in shown.err and took < 10, took


def test_a_git_without_batch_command_is_named_too_old(site: Site, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A git older than 2.36 refuses ``cat-file --batch-command`` with its usage (exit 129):
    every command says that this git is too old, not that a job's state cannot be read."""
    prepare(site, "old-git", "posts/old-git.md", article(1))
    bin_dir = tmp_path / "old-bin"
    bin_dir.mkdir()
    script = bin_dir / "git"
    script.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = "--batch-command" ] && { '
                      'echo "error: unknown option \\`batch-command\'" >&2; '
                      'echo "usage: git cat-file <type> <object>" >&2; exit 129; }; done\n'
                      f'exec {REAL_GIT} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    shown = site.call("status", "--all", "--json")
    assert shown.code != 0, shown.out + shown.err
    assert "this git is too old for gitpub: it needs git 2.36 or newer" in shown.out
    assert "cannot be read" not in shown.out and "Traceback" not in shown.err


def test_a_hung_ref_transaction_is_given_up_with_a_clear_error(site: Site,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """A ``reference-transaction`` hook that never returns held ``git update-ref --stdin``,
    and gitpub with it, for good; now git is killed and the move reported, not taken for a
    lost race."""
    hooks = site.path / ".git/hooks"
    hook = hooks / "reference-transaction"
    hook.write_text("#!/bin/sh\n[ \"$1\" = prepared ] && exec sleep 30\nexit 0\n")
    hook.chmod(0o755)
    monkeypatch.setattr(refs, "TRANSACTION_TIMEOUT", 0.5)
    head = site.git("rev-parse", "HEAD").strip()
    try:
        with Repository.discover(site.path) as repo:
            started = time.monotonic()
            with pytest.raises(GitpubError, match=r"did not finish in 0\.5 seconds") as caught:
                repo.cas_ref("refs/pub/test/hung", None, head)
            assert not isinstance(caught.value, CorruptStateError)
            assert time.monotonic() - started < 10
    finally:
        hook.unlink()
        for lock in (site.path / ".git/refs/pub/test").glob("*.lock"):
            lock.unlink()


# -- the environment ------------------------------------------------------------------------------

def test_a_git_common_dir_from_the_user_is_refused(site: Site, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``GIT_COMMON_DIR`` naming another repository: git's rev-parse follows it, every later git
    gitpub runs did not (``GIT_DIR`` alone), so objects went to one repository and refs were
    moved in the other ("nonexistent object"). Refused at once, naming the variable."""
    other = tmp_path / "other.git"
    git(tmp_path, "init", "-q", "--bare", str(other))
    before = git(other, "count-objects").strip()
    monkeypatch.setenv("GIT_COMMON_DIR", str(other))
    try:
        r = site.call("prepare", "--key", "common", "--to", "posts/common.md", "-",
                      input=article("common"))
        assert r.code == 2 and "GIT_COMMON_DIR" in r.err, r.err
        monkeypatch.setenv("GIT_COMMON_DIR", str(site.path / ".git"))  # its own: fine
        assert site.call("status").code == 0
    finally:
        monkeypatch.delenv("GIT_COMMON_DIR")
    assert git(other, "count-objects").strip() == before


# -- where the working tree is --------------------------------------------------------------------

def test_a_submodule_checkout_is_updated_in_its_work_tree(site: Site, tmp_path: Path) -> None:
    """In a submodule (``.git`` is a file, ``core.worktree`` names the checkout) ``git worktree
    list`` puts the main worktree in the git directory: a push wrote the published file into
    ``.git/modules/<name>/`` and left the checkout with the file staged as deleted."""
    sup = tmp_path / "super"
    git(tmp_path, "init", "-q", "-b", "main", str(sup))
    git(sup, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(site.remote),
        "blog")
    blog = sup / "blog"
    git(blog, "checkout", "-q", "main")
    sub = Site(blog, site.remote, site.env, [blog])
    job = prepare(sub, "in-submodule", "posts/sub.md", article("sub"))
    assert sub.call("push", str(job["job_id"])).code == 0
    assert (blog / "posts/sub.md").read_text() == article("sub")
    assert git(blog, "status", "--porcelain") == ""
    assert not (sup / ".git/modules/blog/posts").exists()


def test_a_bare_repository_with_a_work_tree_is_a_checkout(site: Site, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """``GIT_DIR=bare.git GIT_WORK_TREE=dir`` (the dotfiles way): the branch HEAD names is
    checked out in ``dir``, though ``git worktree list`` calls the repository bare; moving it
    without the index left the published file staged as deleted."""
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(site.remote), str(bare))
    git(bare, "config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")
    git(bare, "fetch", "-q", "origin")
    work = tmp_path / "checkout"
    work.mkdir()
    monkeypatch.setenv("GIT_DIR", str(bare))
    monkeypatch.setenv("GIT_WORK_TREE", str(work))
    git(work, "checkout", "-q", "-f", "main")
    dotfiles = Site(work, site.remote, site.env, [bare])
    job = prepare(dotfiles, "bare", "posts/bare.md", article("bare"))
    assert dotfiles.call("push", str(job["job_id"])).code == 0
    assert (work / "posts/bare.md").read_text() == article("bare")
    assert git(work, "status", "--porcelain") == ""
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")


# -- paths git stores ------------------------------------------------------------------------------

def test_quoted_paths_are_one_line_as_git_quotes_them() -> None:
    raw = b"posts/caf\xe9.md".decode("utf-8", "surrogateescape")
    assert quoted("posts/ünï a.md") == "posts/ünï a.md"
    assert quoted(raw) == '"posts/caf\\351.md"'
    assert quoted('posts/a\nBlog-Job-Id: x\t"\\.md') == \
        '"posts/a\\nBlog-Job-Id: x\\t\\"\\\\.md"'


def test_uncommitted_changes_with_a_path_that_is_not_utf8_are_refused(site: Site) -> None:
    """A hand edit under a content path whose name is not UTF-8: sync failed with an
    unexpected ``UnicodeEncodeError`` building its commit message; it is refused with the
    reason, everything left as it was."""
    name = os.fsdecode(b"caf\xe9.md")
    (site.path / "posts" / name).write_text("hand\n")
    before = site.git("status", "--porcelain")
    r = site.call("sync")
    assert r.code == 4 and "unexpected" not in r.err, r.out + r.err
    assert "not valid UTF-8" in r.out
    assert site.git("status", "--porcelain") == before
    (site.path / "posts" / name).unlink()



def test_a_branch_named_head_is_refused(site: Site) -> None:
    """``branch: HEAD`` (git refuses to make such a branch) was taken: its tracking ref would be
    ``refs/remotes/origin/HEAD``, the remote's default branch, and jobs were prepared on it."""
    (site.path / ".gitpub.yaml").write_text(
        (site.path / ".gitpub.yaml").read_text().replace("branch: main", "branch: HEAD"))
    r = site.call("prepare", "--key", "head", "--to", "posts/head.md", "-", input=article(1))
    assert r.code == 2 and "branch: is not a valid git branch name" in r.err, r.err
    assert site.job_refs() == {}


def test_a_message_as_git_shows_it_has_no_signature_check(site: Site, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """``log.showSignature=true`` in the user's configuration: ``git show`` put the signature's
    verification ("No signature", gpg's lines) before the message of a signed commit stored in
    another encoding, and confirm read that as the message."""
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (site.path / "posts/signed.md").write_text("signed\n")
    site.git("add", "posts/signed.md")
    site.git("-c", "gpg.format=ssh", "-c", f"user.signingkey={key}", "-c",
             "i18n.commitEncoding=ISO-8859-1", "commit", "-q", "-S", "-F", "-",
             input=b"caf\xe9 signed\n")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'log.showsignature'='true'")
    with Repository.discover(site.path) as repo:
        shown = repo.message_as_git_shows(repo.read_ref("refs/heads/main") or "")
    assert shown == "café signed\n".encode()


def test_a_push_sends_no_tag_of_the_person(site: Site) -> None:
    """``push.followTags`` in the user's configuration: gitpub's push also published every
    local annotated tag on the pushed history (a draft tag, say); it sends its refs only."""
    site.git("config", "push.followTags", "true")
    site.git("tag", "-a", "-m", "not for publication", "draft", "HEAD")
    job = prepare(site, "tags", "posts/tags.md", article("tags"))
    assert site.call("push", str(job["job_id"])).code == 0
    assert git(site.remote, "tag", "-l") == ""


def test_a_repository_whose_path_holds_a_line_break_is_refused(tmp_path: Path,
                                                               hermetic: dict[str, str]) -> None:
    """git answers ``rev-parse`` one path per line: a line break in the repository's path
    shifted every answer (``/tmp/x`` taken for the git directory, ``false`` for the object
    format); it could name another repository. Refused, naming the directory."""
    parent = tmp_path / "a\nb"
    parent.mkdir()
    site = make_site(parent, hermetic)
    r = site.call("prepare", "--key", "nl", "--to", "posts/nl.md", "-", input=article(1))
    assert r.code == 2 and "holds a line break" in r.err and "\\n" in r.err, r.err
    assert site.job_refs() == {}


def test_grafts_give_no_commit_other_parents(site: Site) -> None:
    """``info/grafts`` was honoured by every walk and ``merge-base`` gitpub ran
    (``GIT_NO_REPLACE_OBJECTS`` covers replace refs only): a commit could be shown without its
    history, or with another."""
    head = site.git("rev-parse", "HEAD").strip()
    (site.path / "posts/more.md").write_text("more\n")
    site.git("add", "posts/more.md")
    site.git("commit", "-q", "-m", "more")
    tip = site.git("rev-parse", "HEAD").strip()
    grafts = site.path / ".git/info/grafts"
    grafts.parent.mkdir(exist_ok=True)
    grafts.write_text(f"{tip}\n")  # tip made a root commit
    try:
        with Repository.discover(site.path) as repo:
            proc = repo.git("merge-base", "--is-ancestor", head, tip)
            assert proc.returncode == 0 and proc.stderr == b""  # not even a deprecation hint
            assert repo.git("rev-list", "--count", tip).stdout.strip() == b"2"
    finally:
        grafts.unlink()


def test_a_group_shared_repository_gets_group_writable_object_directories(site: Site) -> None:
    """``core.sharedRepository=group``: git makes ``objects/xx/`` group-writable (and setgid);
    the ones gitpub's writes made followed the umask, and another member's git could then add
    no object there ("insufficient permission")."""
    site.git("config", "core.sharedRepository", "group")
    old = os.umask(0o022)
    try:
        with Repository.discover(site.path) as repo:
            blob = repo.write_blob(b"shared by a group, new\n")
    finally:
        os.umask(old)
    mode = (site.path / ".git/objects" / blob[:2]).stat().st_mode
    assert mode & 0o2070 == 0o2070, oct(mode)


def test_a_remote_in_another_object_format_is_a_clear_configuration_error(
        tmp_path: Path, hermetic: dict[str, str]) -> None:
    """A SHA-256 repository whose remote is SHA-1: every fetch failed with git's "mismatched
    algorithms", taken for a passing network failure (retried, attempts used up); it is the
    configuration, said as such (exit 2, no attempt used)."""
    remote = tmp_path / "sha1-remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    seed = tmp_path / "seed"
    git(tmp_path, "init", "-q", "-b", "main", str(seed))
    (seed / "README").write_text("sha1\n")
    git(seed, "add", "README")
    git(seed, "commit", "-q", "-m", "seed")
    git(seed, "push", "-q", str(remote), "main")
    path = tmp_path / "site"
    git(tmp_path, "init", "-q", "--object-format=sha256", "-b", "main", str(path))
    site = Site(path, remote, hermetic, [path])
    (path / "posts").mkdir()
    (path / "posts/welcome.md").write_text("# Welcome\n")
    site.write_config()
    site.git("add", ".")
    site.git("commit", "-q", "-m", "Start the site")
    site.git("remote", "add", "origin", str(remote))
    job = prepare(site, "formats", "posts/formats.md", article("formats"))
    r = site.call("push", "--json", str(job["job_id"]))
    assert r.code == 2 and "another hash" in r.out, r.out
    assert site.call("status", "--json", str(job["job_id"])).json()["attempt"] == 0


# -- a tree git fsck refuses on the remote ---------------------------------------------------------

def push_unsound_tree(site: Site, tmp_path: Path, where: str, entry: str,
                      mode: bytes | None = None) -> str:
    """Another writer pushes (past ``transfer.fsckObjects``) a commit whose tree ``where``
    ("" for the root) lists ``entry`` twice — or, with ``mode``, once with that mode as
    written: trees only a tool other than git writes. The remote's tip, fetched here too."""
    other = tmp_path / "unsound-writer"
    git(tmp_path, "clone", "-q", str(site.remote), str(other))

    def rebuild(tree: str, parts: list[str]) -> str:
        body = b""
        for line in git(other, "ls-tree", "-z", tree).split("\0"):
            if not line:
                continue
            meta, name = line.split("\t")
            kind_mode, _, sha = meta.split(" ")
            raw_mode, oid = kind_mode.lstrip("0").encode(), bytes.fromhex(sha)
            if parts and name == parts[0] and len(parts) > 1:
                oid = bytes.fromhex(rebuild(sha, parts[1:]))
            body += raw_mode + b" " + name.encode() + b"\0" + oid
            if parts == [name]:
                if mode is None:
                    body += raw_mode + b" " + name.encode() + b"\0" + oid  # twice
                else:
                    body = body[:-len(raw_mode + b" " + name.encode() + b"\0" + oid)]
                    body += mode + b" " + name.encode() + b"\0" + oid
        return git(other, "hash-object", "-t", "tree", "-w", "--literally", "--stdin",
                   input=body).strip()

    tree = rebuild(git(other, "rev-parse", "HEAD^{tree}").strip(),
                   [*where.split("/"), entry] if where else [entry])
    commit = git(other, "commit-tree", tree, "-p", "HEAD", "-m", "a tree only a tool writes"
                 ).strip()
    git(other, "-c", "transfer.fsckObjects=false", "push", "-q", "origin",
        f"{commit}:refs/heads/main")
    site.git("fetch", "-q", "origin")
    return commit


def unsound_site(site: Site) -> None:
    """The site and its remote hold a tree ``git fsck`` refuses on purpose: not checked at
    teardown (every other repository still is)."""
    site.repos.remove(site.remote)
    site.repos.remove(site.path)


def test_a_remote_tree_with_an_entry_twice_is_a_conflict_at_once(site: Site,
                                                                  tmp_path: Path) -> None:
    """A remote tree with the same name twice (``posts`` in the root): the rebase rebuilt it
    through a dictionary, dropping one of the two, so the commit "changed" files it never
    touched; every attempt failed the same way until FAILED, the tree never named. Now the
    first attempt stops in CONFLICT (``tree_unsound``) naming the tree and the name, no
    attempt used, nothing pushed; once a person repairs the branch, ``resolve --retry``
    publishes it."""
    job = prepare(site, "twice", "posts/twice.md", article("twice"))
    unsound_site(site)
    bad = push_unsound_tree(site, tmp_path, "", "posts")
    r = site.call("push", "--json", str(job["job_id"]))
    assert r.code == 4, r.out + r.err
    (shown,) = r.json()["jobs"]
    assert shown["state"] == "CONFLICT" and shown["failure_code"] == "tree_unsound", shown
    assert shown["attempt"] == 0
    assert "tree (root)" in shown["failure_detail"] and "'posts' appears twice" in \
        shown["failure_detail"], shown["failure_detail"]
    assert "git fsck" in shown["hint"] and "resolve" in shown["hint"], shown["hint"]
    assert git(site.remote, "rev-parse", "main").strip() == bad
    # a person repairs the branch: the retry delivers onto the repaired tip
    fixer = tmp_path / "fixer"
    git(tmp_path, "clone", "-q", str(site.remote), str(fixer))
    good = git(fixer, "commit-tree", git(fixer, "rev-parse", "HEAD~1^{tree}").strip(),
               "-p", "HEAD", "-m", "repair the tree").strip()
    git(fixer, "push", "-q", "origin", f"{good}:refs/heads/main")
    r = site.call("resolve", "--json", str(job["job_id"]), "--retry")
    assert r.code == 0, r.out + r.err
    assert site.call("status", "--json", str(job["job_id"])).json()["state"] == "PUBLISHED"
    assert git(site.remote, "rev-parse", "main~1").strip() == good


def test_a_job_prepared_on_a_tree_with_an_entry_twice_stops_at_the_snapshot(
        site: Site, tmp_path: Path) -> None:
    """The base itself has ``posts/welcome.md`` twice: prepare stops at the snapshot
    (nothing drafted, no commit built), naming the tree."""
    unsound_site(site)
    push_unsound_tree(site, tmp_path, "posts", "welcome.md")
    r = site.call("prepare", "--json", "--key", "base-twice", "--to", "posts/new.md", "-",
                  input=article("new"))
    assert r.code == 4, r.out + r.err
    shown = r.json()
    assert shown["state"] == "CONFLICT" and shown["failure_code"] == "tree_unsound"
    assert shown["local_commit"] is None
    assert "tree posts/" in shown["failure_detail"] and "'welcome.md' appears twice" in \
        shown["failure_detail"], shown["failure_detail"]


def test_a_hand_commit_onto_a_tree_with_an_entry_twice_is_refused_whole(
        site: Site, tmp_path: Path) -> None:
    """``sync`` would replay a hand commit into that tree: refused, everything as it was."""
    (site.path / "posts/hand.md").write_text(article("hand"))
    site.git("add", "posts/hand.md")
    site.git("commit", "-q", "-m", "hand")
    unsound_site(site)
    bad = push_unsound_tree(site, tmp_path, "", "posts")
    head = site.git("rev-parse", "HEAD")
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    reason = r.json()["commits"][0]["reason"]
    assert "'posts' appears twice" in reason and "git fsck refuses" in reason, reason
    assert site.git("rev-parse", "HEAD") == head
    assert git(site.remote, "rev-parse", "main").strip() == bad


@pytest.mark.parametrize("shape", ["twice elsewhere", "zero-padded mode"])
def test_what_a_rebuild_keeps_as_git_reads_it_is_built_on(site: Site, tmp_path: Path,
                                                          shape: str) -> None:
    """Safe to build on, and built on: an entry twice in a tree off the job's paths (reused
    by id, as the remote has it: the commit adds nothing git did not accept already), and a
    zero-padded mode on the way (old git wrote ``040000``; the rebuilt tree writes it unpadded,
    meaning the same)."""
    (site.path / "other").mkdir()
    (site.path / "other/a.txt").write_text("a\n")
    site.git("add", "other")
    site.git("commit", "-q", "-m", "other")
    site.git("push", "-q", "origin", "main")
    job = prepare(site, "safe", "posts/safe.md", article("safe"))
    unsound_site(site)
    if shape == "twice elsewhere":
        push_unsound_tree(site, tmp_path, "other", "a.txt")
    else:
        push_unsound_tree(site, tmp_path, "", "posts", mode=b"040000")
    r = site.call("push", "--json", str(job["job_id"]))
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    assert git(site.remote, "show", "main:posts/safe.md") == article("safe")
    assert git(site.remote, "diff-tree", "-r", "--name-only", "main~1", "main").split() == \
        ["posts/safe.md"]


def test_a_tree_with_an_entry_twice_is_never_rebuilt_without_one(site: Site) -> None:
    """Under every write (the job store, notes, the archive), not only the content commit's:
    a tree with a name twice is refused, never rewritten without one of the two."""
    blob = site.git("hash-object", "-w", "--stdin", input=b"x\n").strip()
    entry = b"100644 a.md\0" + bytes.fromhex(blob)
    tree = site.git("hash-object", "-t", "tree", "-w", "--literally", "--stdin",
                    input=entry + entry).strip()
    site.repos.remove(site.path)
    with Repository.discover(site.path) as repo:
        with pytest.raises(CorruptStateError, match=r"has 'a.md' twice"):
            repo.write_tree(tree, {"b.md": Entry(MODE_FILE, blob)})
        assert repo.unsound_trees(tree, ["b.md"]) == \
            [f"tree (root) {tree[:12]}: entry 'a.md' appears twice"]


# -- a local git that does not finish -------------------------------------------------------------

def run_with_timeouts(site: Site, seconds: float, *args: str,
                      env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``git pub ARGS`` in its own process (which ends, as a command does: its leases die
    with it) with every local git's timeout set to ``seconds``."""
    code = ("import sys\nfrom gitpub.git import catfile, refs, run\n"
            f"run.DEFAULT_TIMEOUT = catfile.TIMEOUT = refs.TRANSACTION_TIMEOUT = {seconds}\n"
            "from gitpub.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", code, "-C", str(site.path), *args],
                          env={**site.env, **(env or {})}, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("hung", ["diff-tree", "cat-file", "reference-transaction"])
def test_a_local_git_that_hangs_leaves_the_job_to_the_next_run(site: Site, tmp_path: Path,
                                                               hung: str) -> None:
    """A local git that does not finish (a hung file system, a hook that never returns) was
    killed after its timeout, and a ``subprocess.TimeoutExpired`` took the job to REVIEW as an
    internal error: a person asked to look at content for a passing fault. Now it is a
    ``TryLaterError`` naming the git: exit 5 ("run the same command again later"), the job
    exactly where its record was (no attempt used, no REVIEW), and the next run delivers it."""
    job = prepare(site, f"hung-{hung}", f"posts/{hung}.md", article(hung))
    hook = site.path / ".git/hooks/reference-transaction"
    env = {}
    if hung == "reference-transaction":
        hook.write_text("#!/bin/sh\n[ \"$1\" = prepared ] && exec sleep 30\nexit 0\n")
        hook.chmod(0o755)
    else:
        env["PATH"] = hanging_git(tmp_path, hung)
    r = run_with_timeouts(site, 0.5, "push", "--json", str(job["job_id"]), env=env)
    hook.unlink(missing_ok=True)
    assert r.returncode == 5, r.stdout + r.stderr
    said = json.loads(r.stdout)
    if "jobs" in said:  # contained to the job: not confirmed
        assert said["errors"] == [] and len(said["unconfirmed"]) == 1, said
        said = said["unconfirmed"][0]
    else:  # before any job (the first object read): the command's own error
        said = said["error"]
    assert f"git {'update-ref' if hung.startswith('ref') else hung} did not" in said, said
    assert "0.5 seconds" in said and "internal error" not in said, said
    shown = site.call("status", "--json", str(job["job_id"])).json()
    assert shown["state"] == "LOCAL_COMMITTED", shown
    assert shown["failure_code"] is None and shown["attempt"] == 0, shown
    again = site.call("push", "--json", str(job["job_id"]))
    assert again.code == 0, again.out + again.err
    assert again.json()["jobs"][0]["state"] == "PUBLISHED"
    assert git(site.remote, "show", f"main:posts/{hung}.md") == article(hung)


def test_a_hung_git_in_a_command_without_jobs_is_exit_5(site: Site, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside any job (``status`` listing the refs) the same timeout ends the command with
    exit 5 and git's name, not as an unexpected error (exit 1, "internal error")."""
    monkeypatch.setattr(run, "DEFAULT_TIMEOUT", 0.5)
    monkeypatch.setenv("PATH", hanging_git(tmp_path, "for-each-ref"))
    r = site.call("status")
    assert r.code == 5, r.out + r.err
    assert "git for-each-ref did not finish in 0.5 seconds" in r.err, r.err
    assert "unexpected" not in r.err and "Traceback" not in r.err
