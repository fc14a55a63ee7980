"""gitpub's git hooks, run by real git: installing beside other hooks, post-commit and pre-push."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, Result, Site
from test_delivery import article, prepare

from gitpub.config.load import parse_config
from gitpub.config.model import Config, FontSpec
from gitpub.git.repo import Repository
from gitpub.hooks import fast as hookfast
from gitpub.hooks import install as hooks
from gitpub.hooks import shared, work
from gitpub.store import outbox as outbox_mod

LEGACY_PRE_PUSH = """#!/bin/sh
# somebody's own pre-push hook
echo "args: $*" > "$(git rev-parse --git-dir)/legacy-pre-push.log"
cat >> "$(git rev-parse --git-dir)/legacy-pre-push.log"
"""
LEGACY_POST_COMMIT = """#!/bin/sh
echo ran >> "$(git rev-parse --git-dir)/legacy-post-commit.log"
"""


# -- helpers ----------------------------------------------------------------------------------

def pub(site: Site, *args: str, monkeypatch: pytest.MonkeyPatch) -> Result:
    """``git pub ARGS`` in this process."""
    return site.call(*args)


def run_git(site: Site, *args: str, input: bytes | None = None) -> Result:
    proc = subprocess.run(["git", *args], cwd=site.path, input=input, capture_output=True)
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def hooks_dir(site: Site) -> Path:
    return site.path / ".git" / "hooks"


def write_hook(path: Path, text: str) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path.read_bytes()


def hand_commit(site: Site, path: str, text: str, message: str = "hand edit") -> str:
    (site.path / path).parent.mkdir(parents=True, exist_ok=True)
    (site.path / path).write_text(text)
    site.git("add", path)
    r = run_git(site, "commit", "-q", "-m", message)
    assert r.code == 0, r.err
    return site.git("rev-parse", "HEAD").strip()


def outbox(site: Site) -> dict[str, str]:
    out = site.git("for-each-ref", "--format=%(refname) %(objectname)", outbox_mod.OUTBOX_PREFIX)
    return dict(line.split() for line in out.splitlines())


def note(site: Site, commit: str) -> str | None:
    r = run_git(site, "notes", "--ref=pub", "show", commit)
    return r.out if r.code == 0 else None


def installed(site: Site, monkeypatch: pytest.MonkeyPatch) -> Site:
    r = pub(site, "hooks", "install", monkeypatch=monkeypatch)
    assert r.code == 0, r.err
    return site


def job_branch(site: Site, name: str = "pub") -> tuple[str, str]:
    """A branch at a job's content commit (made by ``git pub prepare``), checked out."""
    data = prepare(site, "hooks-key", "posts/hello.md", article("hello"))
    commit = str(data["local_commit"])
    site.git("checkout", "-q", "-b", name, commit)
    return commit, str(data["job_id"])


def tamper(site: Site) -> str:
    """Amend the checked-out job commit so that its article no longer matches the manifest."""
    (site.path / "posts/hello.md").write_text(article("hello") + "\nA hand edit.\n")
    r = run_git(site, "commit", "-q", "--amend", "-a", "--no-edit")
    assert r.code == 0, r.err
    return site.git("rev-parse", "HEAD").strip()


# -- installing -------------------------------------------------------------------------------

def test_install_writes_executable_shims_that_pin_the_interpreter(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    r = pub(site, "hooks", "install", "--json", monkeypatch=monkeypatch)
    assert r.code == 0, r.err
    states = json.loads(r.out)["hooks"]
    assert [s["hook"] for s in states] == ["pre-push", "post-commit"]
    for name in ("pre-push", "post-commit"):
        path = hooks_dir(site) / name
        text = path.read_text()
        assert text.splitlines()[1] == "# gitpub-hook-shim v1"
        assert f"GITPUB_PYTHON={os.path.abspath(sys.executable)}" in text
        assert 'exec "$GITPUB_PYTHON" -S -P -c' in text
        assert f"HOOK={name}\n" in text
        assert path.stat().st_mode & stat.S_IXUSR
    assert not list(hooks_dir(site).glob("*.legacy"))
    assert not list(hooks_dir(site).glob(".*.tmp"))


def test_reinstall_is_idempotent(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    write_hook(hooks_dir(site) / "pre-push", LEGACY_PRE_PUSH)
    installed(site, monkeypatch)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in hooks_dir(site).iterdir()}
    r = pub(site, "hooks", "install", "--json", monkeypatch=monkeypatch)
    assert r.code == 0, r.err
    assert not any(s["changed"] for s in json.loads(r.out)["hooks"])
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in hooks_dir(site).iterdir()}
    assert after == before
    assert (hooks_dir(site) / "pre-push.legacy").read_text() == LEGACY_PRE_PUSH


CURRENT_ENTRY = "from gitpub.hooks.fast import main"
OLD_ENTRY = "from gitpub.hookfast import main"  # gitpub 0.1's shims; that module is gone


def older_shims(site: Site) -> None:
    """The shims an older gitpub installed: the same, but running ``gitpub.hookfast``."""
    for hook in shared.HOOKS:
        path = hooks_dir(site) / hook
        text = path.read_text()
        assert CURRENT_ENTRY in text
        path.write_text(text.replace(CURRENT_ENTRY, OLD_ENTRY))


def test_a_shim_of_an_older_gitpub_is_rewritten_not_chained(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its entry point is gone, so it fails every time (a push is refused); install
    recognises it as ours and rewrites it in place, and the push goes through."""
    installed(site, monkeypatch)
    job_branch(site)
    older_shims(site)
    assert hooks.missing_entry(hooks_dir(site) / "pre-push") == "gitpub.hookfast"
    assert run_git(site, "push", "-q", "origin", "pub").code != 0
    r = pub(site, "hooks", "install", "--json", monkeypatch=monkeypatch)
    assert r.code == 0, r.err
    assert all(s["changed"] and s["legacy"] is None for s in json.loads(r.out)["hooks"])
    for hook in shared.HOOKS:
        assert CURRENT_ENTRY in (hooks_dir(site) / hook).read_text()
        assert hooks.missing_entry(hooks_dir(site) / hook) is None
        assert not (hooks_dir(site) / f"{hook}.legacy").exists()
    r = run_git(site, "push", "-q", "origin", "pub")
    assert r.code == 0, r.err


def test_our_shim_parked_as_legacy_is_dropped_not_chained(site: Site) -> None:
    hooks.install(site.path)
    shim = hooks_dir(site) / "post-commit"
    (hooks_dir(site) / "post-commit.legacy").write_bytes(shim.read_bytes())
    hooks.install(site.path)
    assert not (hooks_dir(site) / "post-commit.legacy").exists()


def test_existing_hooks_run_first_and_uninstall_restores_them(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    pre_push = write_hook(hooks_dir(site) / "pre-push", LEGACY_PRE_PUSH)
    post_commit = write_hook(hooks_dir(site) / "post-commit", LEGACY_POST_COMMIT)
    (hooks_dir(site) / "post-commit").chmod(0o750)
    installed(site, monkeypatch)
    assert (hooks_dir(site) / "pre-push.legacy").read_bytes() == pre_push

    job_branch(site)
    bad = tamper(site)  # post-commit: the legacy hook runs, and so does ours (it links the job)
    assert (site.path / ".git/legacy-post-commit.log").read_text() == "ran\n"
    assert note(site, bad) is not None

    r = run_git(site, "push", "origin", "pub")
    assert r.code != 0 and "posts/hello.md" in r.err  # ours refused it ...
    log = (site.path / ".git/legacy-pre-push.log").read_text()
    assert log.splitlines()[0] == f"args: origin {site.remote}"  # ... the legacy hook ran too,
    assert f"refs/heads/pub {bad} refs/heads/pub {'0' * 40}" in log  # with the same stdin

    r = pub(site, "hooks", "uninstall", monkeypatch=monkeypatch)
    assert r.code == 0, r.err
    assert (hooks_dir(site) / "pre-push").read_bytes() == pre_push
    assert (hooks_dir(site) / "post-commit").read_bytes() == post_commit
    assert stat.S_IMODE((hooks_dir(site) / "post-commit").stat().st_mode) == 0o750
    assert sorted(p.name for p in hooks_dir(site).iterdir() if not p.name.endswith(".sample")) \
        == ["post-commit", "pre-push"]


def test_uninstall_leaves_a_hook_that_is_not_ours(site: Site,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    installed(site, monkeypatch)
    foreign = write_hook(hooks_dir(site) / "pre-push", LEGACY_PRE_PUSH)
    assert pub(site, "hooks", "uninstall", monkeypatch=monkeypatch).code == 0
    assert (hooks_dir(site) / "pre-push").read_bytes() == foreign
    assert not (hooks_dir(site) / "post-commit").exists()


@pytest.mark.parametrize("conflict", ["legacy-exists", "pre-commit"])
def test_install_refuses_to_lose_a_hook(site: Site, monkeypatch: pytest.MonkeyPatch,
                                        conflict: str) -> None:
    if conflict == "legacy-exists":
        write_hook(hooks_dir(site) / "pre-push", LEGACY_PRE_PUSH)
        write_hook(hooks_dir(site) / "pre-push.legacy", LEGACY_PRE_PUSH + "# older\n")
    else:
        write_hook(hooks_dir(site) / "pre-push",
                   "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n")
    before = sorted(p.name for p in hooks_dir(site).iterdir())
    r = pub(site, "hooks", "install", monkeypatch=monkeypatch)
    assert r.code == 2 and "hint:" in r.err
    assert sorted(p.name for p in hooks_dir(site).iterdir()) == before  # nothing half-done


def test_core_hooks_path_is_refused_unless_allowed(site: Site,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    site.git("config", "core.hooksPath", ".githooks")
    r = pub(site, "hooks", "install", monkeypatch=monkeypatch)
    assert r.code == 2
    assert "core.hooksPath" in r.err and "\nhint: " in r.err and "--hooks-path-ok" in r.err
    assert not (site.path / ".githooks").exists() and not (hooks_dir(site) / "pre-push").exists()

    r = pub(site, "hooks", "install", "--hooks-path-ok", monkeypatch=monkeypatch)
    assert r.code == 0, r.err
    assert shared.is_shim(str(site.path / ".githooks/post-commit"))
    commit = hand_commit(site, "posts/x.md", article("x"))  # git runs the hook from there
    assert outbox(site) == {outbox_mod.OUTBOX_PREFIX + outbox_mod.outbox_id(commit): commit}


def test_core_hooks_path_naming_the_usual_directory_is_fine(site: Site) -> None:
    site.git("config", "core.hooksPath", ".git/hooks")
    installed = [s.path for s in hooks.install(site.path)]
    assert installed == [str(hooks_dir(site) / h) for h in shared.HOOKS]


# -- post-commit ------------------------------------------------------------------------------

def test_hand_commit_to_an_article_is_recorded_once(site: Site,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    installed(site, monkeypatch)
    commit = hand_commit(site, "posts/x.md", article("x"))
    ref = outbox_mod.OUTBOX_PREFIX + outbox_mod.outbox_id(commit)
    assert outbox(site) == {ref: commit}
    assert outbox_mod.outbox_id(commit) == outbox_mod.outbox_id(commit)  # derived, not random
    r = pub(site, "hook-impl", "post-commit", monkeypatch=monkeypatch)  # the same event again
    assert r.code == 0, r.err
    assert outbox(site) == {ref: commit}
    with Repository.discover(site.path) as repo:  # what `git pub sync` sees, and clears
        assert outbox_mod.outbox_entries(repo) == {outbox_mod.outbox_id(commit): commit}
        assert not outbox_mod.clear_outbox_entry(repo, outbox_mod.outbox_id(commit), "1" * 40)
        assert outbox_mod.clear_outbox_entry(repo, outbox_mod.outbox_id(commit), commit)
    assert outbox(site) == {}


def test_commit_touching_no_content_records_nothing(site: Site,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    installed(site, monkeypatch)
    hand_commit(site, "README.md", "# A site\n")
    hand_commit(site, "posts/image.png", "not an article\n")  # passes the fast path's filter
    assert outbox(site) == {}
    assert run_git(site, "rev-parse", "-q", "--verify", "refs/notes/pub").code != 0
    assert (site.path / ".git/pub/hook-cache").is_file()  # the fast path's cache is in place


def test_commit_with_job_trailers_is_linked_to_its_job(site: Site,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    installed(site, monkeypatch)
    message = ("Publish by hand\n\nBlog-Job-Id: 3f6c1d2e-job\nBlog-Manifest-Sha256: "
               + "ab" * 32 + "\n")
    commit = hand_commit(site, "posts/x.md", article("x"), message)
    assert note(site, commit) == "linked-job: 3f6c1d2e-job\n"
    assert outbox(site) == {}  # a job commit is its job's business, not an external sync
    assert pub(site, "hook-impl", "post-commit", monkeypatch=monkeypatch).code == 0
    assert note(site, commit) == "linked-job: 3f6c1d2e-job\n"  # no second line


def test_post_commit_never_fails_the_commit(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    installed(site, monkeypatch)
    (site.path / ".gitpub.yaml").write_text("articles: [\n")
    site.git("add", ".gitpub.yaml")
    r = run_git(site, "commit", "-q", "-m", "break the configuration")
    assert r.code == 0
    assert r.err.startswith("gitpub: post-commit hook: .gitpub.yaml") and r.err.count("\n") == 1


def test_shim_whose_interpreter_is_gone_still_runs_the_legacy_hook(site: Site) -> None:
    write_hook(hooks_dir(site) / "post-commit", LEGACY_POST_COMMIT)
    hooks.install(site.path, python="/nonexistent/python3")
    site.git("add", ".")
    proc = subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "x"], cwd=site.path,
                          env={**site.env, "PATH": "/usr/bin:/bin"}, capture_output=True)
    assert proc.returncode == 0
    assert b"hooks install" in proc.stderr
    assert (site.path / ".git/legacy-post-commit.log").read_text() == "ran\n"


def test_content_starts_admit_every_content_path() -> None:
    config = Config(articles=("posts/**/*.md", "**/index.md"), content=("docs/a?c/[xy].txt",),
                    fonts=(FontSpec("fonts/full.ttf", "static/sub.woff2", ("posts/**/*.md",)),))
    starts = tuple(work.content_starts(config))
    assert starts == ("", "docs/a", "posts/", "static/sub.woff2")
    narrow = tuple(work.content_starts(parse_config('articles: ["posts/**/*.md"]\n')))
    for path in ("posts/a.md", "posts/x/y/z.md", "README.md", "postsx.md", "src/posts/a.md"):
        assert config.is_content(path) <= path.startswith(starts)
        assert path.startswith(narrow) == path.startswith("posts/")


def test_cache_is_trusted_only_for_the_exact_configuration(tmp_path: Path) -> None:
    (tmp_path / "pub").mkdir()
    data = shared.cache_bytes(b"articles: []\n", "Blog", ["posts/", ""])
    (tmp_path / "pub" / shared.CACHE_NAME).write_bytes(data)
    assert shared.read_cache(str(tmp_path), b"articles: []\n") == ("Blog", ("posts/", ""))
    assert shared.read_cache(str(tmp_path), b"articles: [] \n") is None
    assert shared.read_cache(str(tmp_path), None) is None


@pytest.mark.slow
def test_concurrent_note_writers_keep_every_note(site: Site) -> None:
    tree = site.git("rev-parse", "HEAD^{tree}").strip()
    commits = [site.git("commit-tree", tree, "-m", f"c{i}").strip() for i in range(100)]
    code = ("import sys\nfrom pathlib import Path\nfrom gitpub.hooks.work import link_commit\n"
            "from gitpub.git.repo import Repository\n"
            "with Repository.discover(Path(sys.argv[1])) as repo:\n"
            "    for c in sys.argv[2:]:\n"
            "        link_commit(repo, c, 'job-' + c[:8])\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(site.path), *commits[i::4]],
                              env=site.env, stderr=subprocess.PIPE) for i in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    listed = site.git("notes", "--ref=pub", "list").split()
    assert sorted(listed[1::2]) == sorted(commits)
    with Repository.discover(site.path) as repo:
        for c in commits[::9]:
            assert not work.link_commit(repo, c, "job-" + c[:8])  # each note already there
    assert note(site, commits[7]) == f"linked-job: job-{commits[7][:8]}\n"


# -- pre-push ---------------------------------------------------------------------------------

def test_job_commit_from_prepare_passes_pre_push(site: Site,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    installed(site, monkeypatch)
    commit, _ = job_branch(site)
    r = run_git(site, "push", "-q", "origin", "pub")
    assert r.code == 0, r.err
    assert site.git("ls-remote", "origin", "refs/heads/pub").split()[0] == commit


def test_tampered_job_commit_is_refused_and_no_verify_pushes_it(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    installed(site, monkeypatch)
    _, job_id = job_branch(site)
    bad = tamper(site)
    r = run_git(site, "push", "origin", "pub")
    assert r.code != 0
    assert "refusing to push" in r.err and bad[:12] in r.err and job_id in r.err
    assert "posts/hello.md: content differs from the manifest" in r.err
    assert "\nhint: " in r.err and "--no-verify" in r.err
    assert run_git(site, "ls-remote", "origin", "refs/heads/pub").out == ""
    r = run_git(site, "push", "-q", "--no-verify", "origin", "pub")
    assert r.code == 0, r.err
    assert site.git("ls-remote", "origin", "refs/heads/pub").split()[0] == bad


def test_pre_push_checks_only_what_the_remote_lacks(site: Site) -> None:
    job_branch(site)
    bad = tamper(site)
    site.git("push", "-q", "--no-verify", "origin", "pub")
    site.git("fetch", "-q", "origin")
    hooks.install(site.path)
    good = hand_commit(site, "README.md", "on top\n")  # the bad commit is already out there
    r = run_git(site, "push", "-q", "origin", "pub")
    assert r.code == 0, r.err
    stdin = f"refs/heads/pub {good} refs/heads/pub {'0' * 40}\n".encode()
    with Repository.discover(site.path) as repo:
        assert work.check_push(repo, "Blog", "", work.parse_push_lines(stdin))[0].commit == bad
    deleted = f"(delete) {'0' * 40} refs/heads/pub {bad}\n".encode()
    assert work.parse_push_lines(deleted)[0].local_sha == "0" * 40
    r = run_git(site, "push", "-q", "origin", ":pub")  # a deletion has nothing to check
    assert r.code == 0, r.err


def test_pre_push_under_the_pre_commit_framework(site: Site,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = site.git("rev-parse", "main").strip()
    job_branch(site)
    bad = tamper(site)
    monkeypatch.chdir(site.path)
    monkeypatch.setenv("PRE_COMMIT_REMOTE_NAME", "origin")
    monkeypatch.setenv("PRE_COMMIT_FROM_REF", base)
    monkeypatch.setenv("PRE_COMMIT_TO_REF", bad)
    assert hookfast.main(["pre-push"]) == 1
    assert "posts/hello.md" in capsys.readouterr().err
    monkeypatch.setenv("PRE_COMMIT_FROM_REF", bad)
    assert hookfast.main(["pre-push"]) == 0


# -- shipped files ----------------------------------------------------------------------------

def test_templates_and_pre_commit_hooks_file() -> None:
    for name in shared.HOOKS:
        text = (ROOT / "hooks" / name).read_text()
        assert hooks.is_shim_text(text) and f"HOOK={name}\n" in text
        assert subprocess.run(["sh", "-n", str(ROOT / "hooks" / name)]).returncode == 0
    entries = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    by_id = {e["id"]: e for e in entries}
    assert by_id["gitpub-pre-push"]["stages"] == ["pre-push"]
    assert by_id["gitpub-post-commit"]["stages"] == ["post-commit"]
    for e in entries:
        assert e["language"] == "python" and e["entry"].startswith("git-pub hook-impl ")
        assert e["pass_filenames"] is False and e["always_run"] is True


def test_pre_push_refuses_extra_paths_steering_paths_and_a_second_claim(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    installed(site, monkeypatch)
    commit, job_id = job_branch(site)
    # the job's whole message kept, its file kept, and an extra file added by --amend
    (site.path / "evil.js").write_text("alert(1)\n")
    (site.path / ".gitattributes").write_text("* filter=evil\n")
    site.git("add", "evil.js", ".gitattributes")
    assert run_git(site, "commit", "-q", "--amend", "--no-edit").code == 0
    padded = site.git("rev-parse", "HEAD").strip()
    r = run_git(site, "push", "origin", "pub")
    assert r.code != 0 and padded[:12] in r.err
    assert "evil.js: changed, but not in the manifest" in r.err
    assert ".gitattributes: a path that steers git, CI or gitpub" in r.err
    # the job commit itself, then a second commit claiming the same job id
    site.git("reset", "-q", "--hard", commit)
    message = site.git("log", "-1", "--format=%B", commit).encode()
    site.git("rm", "-q", "posts/hello.md")
    site.git("commit", "-q", "-m", "remove")
    (site.path / "posts/hello.md").write_text(article("hello"))
    site.git("add", "posts/hello.md")
    site.git("commit", "-q", "--cleanup=verbatim", "-F", "-", input=message)
    second = site.git("rev-parse", "HEAD").strip()
    r = run_git(site, "push", "origin", "pub")
    assert r.code != 0 and second[:12] in r.err
    assert f"job {job_id} is already claimed by {commit}" in r.err
    assert run_git(site, "ls-remote", "origin", "refs/heads/pub").out == ""
