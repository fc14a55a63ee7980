"""`git pub doctor [--fix]` and `push/sync --dry-run`, each check proven by injecting its fault:
a stale lock, missing or outdated hooks, a clobbering notes refspec, a shallow clone, a garbage
job ref, a lost active-index entry, an uncommitted font source, a hand edit, a bad remote."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Site, git


def doctor(site: Site, *args: str) -> tuple[int, dict[str, Any]]:
    r = site.call("doctor", "--json", *args)
    data = r.json()
    return r.code, {c["name"]: c for c in data["checks"]}


def healthy(site: Site) -> None:
    assert site.call("hooks", "install").code == 0
    _code, checks = doctor(site, "--fix")
    # `hooks install` set the notes refspec up; doctor agrees and adds none (issue 24.4)
    assert checks["notes refspec"]["status"] == "ok" and not checks["notes refspec"]["fixed"]


def test_a_healthy_site(site: Site) -> None:
    healthy(site)
    code, checks = doctor(site)
    assert code == 0, checks
    assert {c["status"] for c in checks.values()} == {"ok"}, checks
    assert "accepts a push" in checks["remote"]["message"]
    text = site.call("doctor")
    assert text.code == 0 and len(text.out.splitlines()) == len(checks)


def test_stale_locks_are_removed_by_fix_held_ones_kept(site: Site) -> None:
    """Locks no live process may hold (old or young) are removed by --fix; a lock a live C git
    transaction holds is reported and left (issue 23 point 10)."""
    from test_locks import hold_ref_lock

    healthy(site)
    gitdir = site.path / ".git"
    stale = gitdir / "refs" / "heads" / "main.lock"
    stale.write_text("")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    obj = gitdir / "objects" / "ab"
    obj.mkdir(exist_ok=True)
    young = obj / "cd.lock"
    young.write_text("")
    code, checks = doctor(site)
    assert code == 1 and checks["stale locks"]["status"] == "fail"
    assert "refs/heads/main.lock" in checks["stale locks"]["message"]
    assert checks["stale locks"]["safe_fix"]
    code, checks = doctor(site, "--fix")
    assert code == 0 and checks["stale locks"]["fixed"]
    assert not stale.exists() and not young.exists()
    obj.rmdir()
    holder = hold_ref_lock(site, "refs/heads/main")
    try:
        code, checks = doctor(site, "--fix")
        assert checks["stale locks"]["status"] == "warn", checks["stale locks"]
        assert (gitdir / "refs/heads/main.lock").exists(), "a lock in use is left alone"
    finally:
        assert holder.stdin is not None
        holder.stdin.close()  # git aborts its transaction, as it would on its own
        holder.wait(30)


def test_hooks_missing_or_outdated(site: Site) -> None:
    healthy(site)
    hook = site.path / ".git" / "hooks" / "pre-push"
    hook.write_text(hook.read_text() + "# edited\n")
    _code, checks = doctor(site)
    assert checks["hooks"]["status"] == "warn" and "pre-push" in checks["hooks"]["message"]
    _code, checks = doctor(site, "--fix")
    assert checks["hooks"]["fixed"]
    assert doctor(site)[1]["hooks"]["status"] == "ok"
    assert "# edited" not in hook.read_text()


def test_a_shim_of_an_older_gitpub_fails_and_fix_rewrites_it(site: Site) -> None:
    """Shims installed by gitpub 0.1 run ``gitpub.hookfast``, which is gone: every push is
    refused. doctor says so (fail, naming each shim and the module), and --fix rewrites them."""
    healthy(site)
    hooks = site.path / ".git" / "hooks"
    for name in ("pre-push", "post-commit"):
        text = (hooks / name).read_text()
        (hooks / name).write_text(text.replace("from gitpub.hooks.fast import main",
                                               "from gitpub.hookfast import main"))
    code, checks = doctor(site)
    assert code == 1 and checks["hooks"]["status"] == "fail", checks["hooks"]
    assert "post-commit runs gitpub.hookfast" in checks["hooks"]["message"]
    assert "pre-push runs gitpub.hookfast" in checks["hooks"]["message"]
    assert checks["hooks"]["safe_fix"] and checks["hooks"]["fix"] is not None
    code, checks = doctor(site, "--fix")
    assert code == 0 and checks["hooks"]["fixed"], checks["hooks"]
    code, checks = doctor(site)
    assert code == 0 and checks["hooks"]["status"] == "ok", checks["hooks"]
    assert not [p.name for p in hooks.iterdir() if "hookfast" in p.read_text()]


def test_a_clobbering_notes_refspec_is_reported_not_changed(site: Site) -> None:
    healthy(site)
    site.git("config", "--add", "remote.origin.fetch", "+refs/notes/*:refs/notes/*")
    code, checks = doctor(site, "--fix")
    assert code == 1 and checks["notes refspec"]["status"] == "fail"
    assert not checks["notes refspec"]["fixed"]
    assert "+refs/notes/*:refs/notes/*" in site.git("config", "--get-all", "remote.origin.fetch")


def test_shallow_clone(site: Site, tmp_path: Path) -> None:
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", site.remote.as_uri(), str(shallow))
    site.repos.append(shallow)
    clone = Site(shallow, site.remote, site.env)
    _code, checks = doctor(clone)
    assert checks["shallow clone"]["status"] == "warn"
    assert "--unshallow" in checks["shallow clone"]["fix"]


def test_unreadable_job_ref_and_active_index(site: Site) -> None:
    healthy(site)
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-", input="# A\n")
    job_id = r.json()["job_id"]
    active = f"refs/pub/active/{job_id}"
    site.git("update-ref", "-d", active)
    assert site.call("status", "--json").json()["jobs"] == [], "invisible without its entry"
    code, checks = doctor(site)
    assert checks["active index"]["status"] == "fail"
    code, checks = doctor(site, "--fix")
    assert checks["active index"]["fixed"]
    assert [j["job_id"] for j in site.call("status", "--json").json()["jobs"]] == [job_id]
    bad = site.path / ".git" / "refs" / "pub" / "jobs" / "x"
    bad.write_text("garbage\n")
    code, checks = doctor(site, "--fix")
    assert code == 1 and checks["job refs"]["status"] == "fail"
    assert bad.read_text() == "garbage\n", "unreadable state is left for repair"
    bad.unlink()


def test_font_source_not_committed_and_hand_edits(site: Site) -> None:
    healthy(site)
    site.write_config("fonts:\n  - {source: fonts/site.ttf, output: fonts/site.woff2, "
                      "text: ['posts/**/*.md']}\n")
    (site.path / "posts" / "typo.md").write_text("# Typo fixed by hand\n")
    _code, checks = doctor(site)
    assert checks["font sources"]["status"] == "fail"
    assert "fonts/site.ttf" in checks["font sources"]["message"]
    assert checks["hand edits"]["status"] == "warn"
    assert "sync --dry-run" in checks["hand edits"]["fix"]


def test_bad_remote_and_bad_config(site: Site) -> None:
    site.git("remote", "set-url", "origin", str(site.path.parent / "nowhere.git"))
    code, checks = doctor(site)
    assert code == 1 and checks["remote"]["status"] == "fail"
    assert "git remote set-url" in checks["remote"]["fix"]
    site.write_config("retry: {max_attempts: three}\n")
    code, checks = doctor(site)
    assert checks["configuration"]["status"] == "fail"
    assert checks["remote"]["status"] == "skipped"


# -- dry runs ---------------------------------------------------------------------------------

def snapshot(site: Site) -> tuple[str, str, str]:
    return (site.git("for-each-ref"), site.git("count-objects", "-v"),
            git(site.remote, "for-each-ref"))


def test_push_dry_run_changes_nothing(site: Site, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(site.remote), str(other))
    site.repos.append(other)
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-", input="# A\n")
    job_id = r.json()["job_id"]
    (other / "posts" / "b.md").write_text("# B\n")
    git(other, "add", ".")
    git(other, "commit", "-qm", "B")
    git(other, "push", "-q", "origin", "HEAD:main")
    (site.path / "posts" / "hand.md").write_text("# by hand\n")
    before = snapshot(site)
    r = site.call("push", "--dry-run", "--json")
    assert r.code == 0, r.out + r.err
    (step,) = r.json()["jobs"]
    assert step["job_id"] == job_id and step["action"] == "publish"
    assert "the remote moved" in step["detail"]
    r = site.call("sync", "--dry-run", "--json")
    assert r.json()["hand_edits"]["uncommitted"] == ["posts/hand.md"]
    text = site.call("sync", "--dry-run")
    assert "would commit 1 content path(s): posts/hand.md" in text.out
    assert snapshot(site) == before, "a dry run writes no ref and no object"
    assert site.call("push").code == 0, "and the real push still works"


def test_dry_run_sees_a_conflict_and_a_publication(site: Site, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(site.remote), str(other))
    site.repos.append(other)
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/welcome.md", "-",
                  input="# Welcome\n\nMine.\n")
    (other / "posts" / "welcome.md").write_text("# Welcome\n\nTheirs.\n")
    git(other, "commit", "-qam", "theirs")
    git(other, "push", "-q", "origin", "HEAD:main")
    site.git("fetch", "-q", "origin")
    before = snapshot(site)
    r = site.call("push", "--dry-run", "--json")
    assert r.json()["jobs"][0]["action"] == "conflict"
    assert snapshot(site) == before
    r2 = site.call("prepare", "--json", "--key", "k2", "--to", "posts/new.md", "-",
                   input="# New\n")
    assert site.call("push", r2.json()["job_id"]).code == 0
    assert site.call("push", "--dry-run").out.count("would") == 1


def test_dry_run_of_a_named_job_that_needs_a_person(site: Site, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(site.remote), str(other))
    site.repos.append(other)
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/welcome.md", "-",
                  input="# Welcome\n\nMine.\n")
    job_id = r.json()["job_id"]
    (other / "posts" / "welcome.md").write_text("# Welcome\n\nTheirs.\n")
    git(other, "commit", "-qam", "theirs")
    git(other, "push", "-q", "origin", "HEAD:main")
    assert site.call("push").code == 4
    r = site.call("push", "--dry-run", "--json", job_id)
    assert r.json()["jobs"][0]["action"] == "nothing"


# -- doctor and dry runs leave the user's index alone (its lock and its bytes) ----------------

def _index_state(site: Site) -> tuple[bytes, int]:
    index = site.path / ".git" / "index"
    return index.read_bytes(), index.stat().st_mtime_ns


def test_doctor_and_dry_runs_never_write_the_index(site: Site) -> None:
    """`git status` refreshes the index opportunistically: it takes .git/index.lock and
    rewrites the index when a file's stat data changed. A read-only command must not (a user's
    `git commit` at that moment would fail on the lock)."""
    site.call("prepare", "--key", "k", "--to", "posts/a.md", "-", input="# A\n")
    welcome = site.path / "posts" / "welcome.md"
    old = time.time() - 3600
    os.utime(welcome, (old, old))  # stat data changed, content not: a refresh would write
    (site.path / "posts" / "hand.md").write_text("# by hand\n")
    before = _index_state(site)
    for args in (["doctor"], ["push", "--dry-run"], ["sync", "--dry-run"]):
        r = site.call(*args)
        assert r.code == 0, (args, r.out + r.err)
        assert _index_state(site) == before, f"{args} wrote the index"


def test_doctor_and_dry_runs_work_while_the_user_holds_the_index_lock(site: Site) -> None:
    site.call("prepare", "--key", "k", "--to", "posts/a.md", "-", input="# A\n")
    (site.path / "posts" / "hand.md").write_text("# by hand\n")
    lock = site.path / ".git" / "index.lock"
    lock.write_bytes(b"a user's git add, under way")
    old = time.time() - 7200
    os.utime(lock, (old, old))  # old, so a lock sweep would think it stale: it is not ours
    r = site.call("doctor", "--fix")
    assert lock.read_bytes() == b"a user's git add, under way", "doctor took the user's lock"
    for args in (["push", "--dry-run"], ["sync", "--dry-run"], ["doctor"]):
        r = site.call(*args)
        assert r.code == 0, (args, r.out + r.err)
        assert "would" in r.out or args == ["doctor"], r.out
    assert lock.read_bytes() == b"a user's git add, under way"
    lock.unlink()


def test_doctor_fix_never_half_creates_a_remote(site: Site) -> None:
    """Attack repro r14: with `remote: upstream` not yet added, --fix added a notes refspec
    for it, creating a remote section without a URL that `git remote add` then refused."""
    text = (site.path / ".gitpub.yaml").read_text().replace("remote: origin", "remote: upstream")
    (site.path / ".gitpub.yaml").write_text(text)
    code, checks = doctor(site, "--fix")
    assert code == 1 and checks["remote"]["status"] == "fail"
    assert "git remote add upstream" in checks["remote"]["fix"]
    assert checks["notes refspec"]["status"] == "skipped" and not checks["notes refspec"]["fixed"]
    assert site.git("config", "--get-regexp", r"^remote\.upstream\.", check=False) == ""
    site.git("remote", "add", "upstream", str(site.remote))  # the doctor's own fix works
    code, checks = doctor(site, "--fix")
    assert checks["remote"]["status"] == "ok" and checks["notes refspec"]["fixed"], checks


def test_doctor_names_a_remote_configured_without_a_url(site: Site) -> None:
    site.git("config", "--add", "remote.upstream.fetch", "+refs/notes/pub:refs/notes/x")
    text = (site.path / ".gitpub.yaml").read_text().replace("remote: origin", "remote: upstream")
    (site.path / ".gitpub.yaml").write_text(text)
    code, checks = doctor(site)
    assert code == 1 and "without a URL" in checks["remote"]["message"]
    assert "git remote set-url upstream URL" in checks["remote"]["fix"]
    site.git("remote", "set-url", "upstream", str(site.remote))
    assert doctor(site)[1]["remote"]["status"] == "ok"


@pytest.mark.parametrize("first", ["init", "doctor --fix"])
def test_init_and_doctor_agree_on_the_notes_refspec(site: Site, first: str) -> None:
    """Issue 24 point 4: whichever ran first, the other finds the notes fetched and adds no
    second refspec; and a clone set up by an older gitpub (``refs/notes/pub`` without the
    star) gets no duplicate either."""
    def specs() -> list[str]:
        return site.git("config", "--get-all", "remote.origin.fetch").split()

    for command in (first, "doctor --fix" if first == "init" else "init", "doctor --fix"):
        assert site.call(*command.split()).code in (0, 1), command
    notes = [s for s in specs() if "notes" in s]
    assert notes == ["+refs/notes/pub*:refs/notes/remotes/origin/pub*"], specs()
    assert site.git("config", "notes.pub.mergeStrategy").strip() == "cat_sort_uniq"
    site.git("config", "--unset-all", "remote.origin.fetch", "notes")
    site.git("config", "--add", "remote.origin.fetch",
             "+refs/notes/pub:refs/notes/remotes/origin/pub")
    checks = {c["name"]: c for c in site.call("doctor", "--json").json()["checks"]}
    assert checks["notes refspec"]["status"] == "warn", checks["notes refspec"]
    site.call("doctor", "--fix")
    site.call("init")
    assert [s for s in specs() if "notes" in s] == [
        "+refs/notes/pub*:refs/notes/remotes/origin/pub*"]  # replaced, not doubled
    site.git("fetch", "-q", "origin")  # no notes on the remote yet: the fetch works
