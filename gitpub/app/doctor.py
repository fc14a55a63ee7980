"""``git pub doctor [--fix]``: everything gitpub relies on, checked, one line each with its fix.

Each check reads only; it returns a ``Check`` saying what it found and how to fix it. A fix is
*safe* — applied by ``--fix`` — only when it cannot lose anything and needs nobody's judgement:

- **hooks** (install or refresh the shims): planned first, written atomically, an existing hook
  kept as ``.legacy`` and run first, undone byte for byte by ``git pub hooks uninstall``;
- **notes refspec** (add ``+refs/notes/pub:refs/notes/remotes/<remote>/pub``): one more fetch
  refspec into a namespace of its own; no ref moves now, no local note can be overwritten. Only
  for a remote that has a URL: a refspec alone would half-create the remote (``git remote add``
  then refuses it); a remote configured without a URL is a failed remote check;
- **stale locks** (remove ``*.lock`` files of refs and loose objects that no live process may
  hold: ``runtime.pubdir``): the leftovers of killed processes, each blocking every later write
  of its file; a lock a live git or gitpub may hold is reported, never removed;
- **active index** (add the missing entries of unfinished jobs, remove those of finished ones):
  derived data, never the truth about a job, rebuilt from the job refs themselves.

Everything else needs a person — a configuration to edit, credentials (the forge's token for
delivery through review included), a shallow clone to
deepen (a download of unknown size), unreadable job state to inspect, font sources to commit,
hand edits to sync (a push) — and is only reported, with the command to run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from gitpub.config.model import Config
from gitpub.core.errors import EXIT_ERROR, EXIT_OK, CorruptStateError, GitpubError
from gitpub.core.files import pub_dir
from gitpub.core.sanitize import sanitize
from gitpub.core.states import TERMINAL
from gitpub.delivery.fold import ARCHIVE_REF
from gitpub.delivery.sync import discover
from gitpub.git.push import Update
from gitpub.git.remote import PushResult, Remote, RemoteConfigError, RemoteError
from gitpub.git.repo import Repository
from gitpub.hooks.install import (
    fetches_notes,
    hooks_directory,
    install,
    missing_entry,
    notes_refspec,
    older_notes_refspecs,
    plan_install,
    render_shim,
)
from gitpub.hooks.shared import HOOKS
from gitpub.runtime.context import Context
from gitpub.runtime.pubdir import Healer
from gitpub.runtime.repoconfig import load_repo_config
from gitpub.runtime.session import open_repository
from gitpub.store.archive import ARCHIVE
from gitpub.store.fetch import fetch_with_store
from gitpub.store.jobs import ACTIVE_PREFIX, JOBS_PREFIX, JobStore
from gitpub.store.mirror import store_prefix

#: A lock file older than this is a dead process's leftover (see the module docstring).

Status = Literal["ok", "warn", "fail", "skipped"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    message: str
    fix: str | None = None  # what to do about it (a command when there is one)
    safe_fix: bool = False  # whether --fix applies it
    fixed: bool = False


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" or c.fixed for c in self.checks)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.ok else EXIT_ERROR


@dataclass
class _Env:
    repo: Repository
    config: Config | None
    fix: bool


def doctor(where: Path, fix: bool = False) -> Report:
    with open_repository(where, lambda message: None) as repo:
        config_check, config = _config(repo)
        env = _Env(repo, config, fix)
        checks = [config_check] + [_guarded(name, check, env) for name, check in _CHECKS]
        return Report(tuple(checks))


def _guarded(name: str, check: Callable[[_Env], Check], env: _Env) -> Check:
    """A check that needs the configuration is skipped without one; one that fails
    unexpectedly is reported as failed, and the others still run."""
    if env.config is None and name in _NEEDS_CONFIG:
        return Check(name, "skipped", "needs a valid configuration")
    try:
        return check(env)
    except GitpubError as e:
        return Check(name, "fail", e.message, e.hint)


# -- the checks --------------------------------------------------------------------------------

def _config(repo: Repository) -> tuple[Check, Config | None]:
    try:
        config = load_repo_config(repo)
    except GitpubError as e:
        return Check("configuration", "fail", e.message, e.hint or "edit .gitpub.yaml"), None
    return Check("configuration", "ok", ".gitpub.yaml is valid (or absent: defaults)"), config


def _remote(env: _Env) -> Check:
    assert env.config is not None
    remote = Remote(env.repo, env.config.remote, env.config.branch, fetch_timeout=60,
                    push_timeout=60)
    name = f"{env.config.remote}/{env.config.branch}"
    half = _half_configured(env.repo, env.config.remote)
    if half:
        return Check("remote", "fail", f"remote {sanitize(env.config.remote)!r} is configured "
                     f"without a URL (only {', '.join(half)})",
                     f"`git remote set-url {sanitize(env.config.remote)} URL` (`git remote add` "
                     "refuses: the remote's section exists)")
    try:
        tip = remote.ls_remote()
        if tip is None:
            return Check("remote", "fail", f"{env.config.remote} has no branch "
                         f"{env.config.branch}", f"push the branch first (`git push "
                         f"{env.config.remote} {env.config.branch}`), or set `branch:`")
        source = tip if env.repo.has_object(tip) else remote.tracking_ref
        if env.repo.read_ref(source) is None and not env.repo.has_object(source):
            return Check("remote", "warn", f"{name} is reachable (at {tip[:12]}); writability "
                         "not checked: nothing fetched yet", "`git fetch`, then run doctor again")
        outcome = remote.dry_run_push(source)
    except RemoteConfigError as e:
        return Check("remote", "fail", e.message,
                     (e.hint or "").replace("; no delivery attempt was used", "") or None)
    except RemoteError as e:
        return Check("remote", "fail", e.message, "check the network and the remote's URL "
                                                  "(`git remote -v`)")
    if outcome.result in (PushResult.SENT, PushResult.RACE):
        return Check("remote", "ok", f"{name} is reachable and accepts a push (git push "
                                     "--dry-run)")
    return Check("remote", "fail" if outcome.result == PushResult.UNKNOWN else "warn",
                 f"{name}: git push --dry-run: {outcome.detail}",
                 "check write access to the remote")


def _remote_archive(env: _Env) -> Check:
    """The remote's ``refs/pub/archive`` is an archive (a fetch finds out: ``store.fetch``);
    when it is not and this clone keeps the last good one, ``--fix`` puts that back by
    compare-and-swap on the damaged value (issue 23 point 6)."""
    assert env.config is not None
    remote = Remote(env.repo, env.config.remote, env.config.branch, fetch_timeout=60,
                    push_timeout=60)
    try:
        fetched = fetch_with_store(remote)
    except (RemoteError, RemoteConfigError) as e:
        return Check("remote archive", "skipped", f"the remote could not be fetched: {e.message}")
    if fetched.damaged_archive is None:
        return Check("remote archive", "ok", "refs/pub/archive is an archive (or there is none)")
    good = env.repo.read_ref(store_prefix(remote) + ARCHIVE)
    what = "is gone" if not fetched.damaged_archive else \
        f"is no archive ({fetched.damaged_archive[:12]})"
    if good is None:
        return Check("remote archive", "fail", f"refs/pub/archive on {env.config.remote} {what}, "
                     "and this clone has no good archive to put back",
                     "restore it from a clone that has one (`git pub doctor --fix` there)")
    check = Check("remote archive", "fail", f"refs/pub/archive on {env.config.remote} {what}: "
                  "its archived job records are unreachable there, and nothing folds",
                  f"put back the last good archive, {good[:12]} (`git pub doctor --fix`)",
                  safe_fix=True)
    if env.fix:
        outcome = remote.push_updates(
            [Update(ARCHIVE_REF, good, fetched.damaged_archive)], verify=False).of(ARCHIVE_REF)
        return replace(check, fixed=outcome.result == PushResult.SENT)
    return check


def _hooks(env: _Env) -> Check:
    if env.repo.work_tree is None:
        return Check("hooks", "skipped", "a bare repository runs no commit hooks")
    directory = hooks_directory(env.repo.work_tree)  # raises (with a hint) on core.hooksPath
    steps = plan_install(directory, {hook: render_shim(hook) for hook in HOOKS})
    if not steps:
        return Check("hooks", "ok", f"pre-push and post-commit installed and current in "
                                    f"{directory}")
    what = ", ".join(sorted({s.path.name for s in steps}))
    broken = {s.path.name: module for s in steps if (module := missing_entry(s.path))}
    if broken:  # a shim of an older gitpub: each run of the hook fails (pre-push: no push)
        names = ", ".join(f"{name} runs {module}" for name, module in sorted(broken.items()))
        check = Check("hooks", "fail", f"shims of an older gitpub that fail every time: {names}, "
                      "which this gitpub does not have", "`git pub hooks install` rewrites them",
                      safe_fix=True)
    else:
        check = Check("hooks", "warn", f"not installed or not current: {what}",
                      "`git pub hooks install`", safe_fix=True)
    if env.fix:
        install(env.repo.work_tree)
        return replace(check, fixed=True)
    return check


def _refspecs(repo: Repository, remote: str) -> list[str]:
    proc = repo.git("config", "--get-all", f"remote.{remote}.fetch", timeout=30)
    return proc.stdout.decode("utf-8", "replace").split()


def _config_keys(repo: Repository, remote: str) -> list[str]:
    """The names of the ``remote.<remote>.*`` settings there are."""
    proc = repo.git("config", "--name-only", "--get-regexp",
                    "^remote\\." + re.escape(remote) + "\\.", timeout=30)
    return proc.stdout.decode("utf-8", "replace").split()


def _has_url(repo: Repository, remote: str) -> bool:
    return any(key.endswith((".url", ".pushurl")) for key in _config_keys(repo, remote))


def _half_configured(repo: Repository, remote: str) -> list[str]:
    """The settings of a remote that has some but no URL (say a fetch refspec added before the
    remote was): git then takes the name itself as the URL, and `git remote add` refuses."""
    keys = _config_keys(repo, remote)
    return [] if not keys or _has_url(repo, remote) else keys


def _notes_refspec(env: _Env) -> Check:
    assert env.config is not None
    remote = env.config.remote
    if not _has_url(env.repo, remote):
        # a refspec for a remote that is not there would half-create it (a section without
        # a URL, which `git remote add` then refuses): the remote check says what to do first
        return Check("notes refspec", "skipped", f"no remote {sanitize(remote)!r} configured "
                     "to add it to", "add the remote (see above), then `git pub doctor --fix`")
    specs = _refspecs(env.repo, remote)
    clobbering = [s for s in specs if s.startswith("+") and s.split(":")[-1] in
                  ("refs/notes/pub", "refs/notes/*")]
    if clobbering:
        return Check("notes refspec", "fail",
                     f"`git fetch` overwrites the local refs/notes/pub ({clobbering[0]}): notes "
                     "written here would be lost",
                     f"`git config --unset-all remote.{remote}.fetch '{clobbering[0]}'`, then "
                     "`git pub doctor --fix`")
    mirror = notes_refspec(remote)  # the one `git pub init` and `hooks install` add
    older = older_notes_refspecs(specs, remote)
    if fetches_notes(specs) and not older:
        return Check("notes refspec", "ok", "`git fetch` brings the CI's verdicts "
                                            "(refs/notes/pub)")
    check = Check("notes refspec", "warn", "`git fetch` does not bring the CI's verdicts "
                  "(refs/notes/pub)", f"`git config --add remote.{remote}.fetch '{mirror}'`; "
                  f"read them with `git log --notes=remotes/{remote}/pub`", safe_fix=True)
    if older:
        check = replace(check, message=f"`git fetch` fails while the remote has no notes: "
                        f"{older[0]} (an older gitpub's)", fix=f"replace it with {mirror} "
                        "(`git pub doctor --fix`)")
    if env.fix:
        for old in older:
            env.repo.git("config", "--unset-all", f"remote.{remote}.fetch",
                         "^" + re.escape(old) + "$", timeout=30)
        if not fetches_notes([s for s in specs if s not in older]):
            env.repo.git("config", "--add", f"remote.{remote}.fetch", mirror, timeout=30)
        if env.repo.config_value("notes.pub", "mergeStrategy") != "cat_sort_uniq":
            env.repo.git("config", "notes.pub.mergeStrategy", "cat_sort_uniq", timeout=30)
        return replace(check, fixed=True)
    return check


def _shallow(env: _Env) -> Check:
    if (env.repo.common_dir / "shallow").exists():
        return Check("shallow clone", "warn", "shallow clone: publications are found only in "
                     "the history fetched so far", "`git fetch --unshallow` (downloads the "
                     "whole history)")
    return Check("shallow clone", "ok", "complete history")


def _locks(env: _Env) -> Check:
    policy = env.repo.lock_policy
    found = _lock_files(env.repo.common_dir)
    if not found:
        return Check("stale locks", "ok", "no lock file of a ref or a loose object")
    names = ", ".join(str(p.relative_to(env.repo.common_dir)) for p in found[:5])
    held = not isinstance(policy, Healer) or policy.holders() != []
    if held:
        return Check("stale locks", "warn", f"{len(found)} lock file(s): {names}; a live "
                     "process may hold them (git or gitpub at work here), so they are left",
                     "run doctor again when no git runs in this repository")
    check = Check("stale locks", "fail", f"{len(found)} lock file(s) no live process may hold "
                  f"(left by killed processes): {names}",
                  "remove them (`git pub doctor --fix`)", safe_fix=True)
    if env.fix:
        env.repo.sweep_stale_locks()
        return replace(check, fixed=not _lock_files(env.repo.common_dir))
    return check


def _lock_files(common_dir: Path) -> list[Path]:
    """The lock files of refs and loose objects (``packed-refs.lock``, ``HEAD.lock`` too)."""
    found = [p for p in (common_dir / "packed-refs.lock", common_dir / "HEAD.lock")
             if p.exists()]
    for top in ("refs", "objects"):
        for root, _dirs, files in os.walk(common_dir / top):
            found += [Path(root) / f for f in files if f.endswith(".lock")]
    return sorted(found)


def _quarantine(env: _Env) -> Check:
    """What a fetch set aside as corrupt (``store.fetchdir.fetch_refspecs``): kept for a
    person, said once when it was moved; named here until that person removes it."""
    try:
        kept = sorted(p.name for p in (pub_dir(env.repo.common_dir) / "quarantine").iterdir())
    except OSError:
        kept = []
    if not kept:
        return Check("quarantine", "ok", "no object set aside as corrupt")
    names = ", ".join(sanitize(n.split(".")[0]) for n in kept[:5]) + \
        (", ..." if len(kept) > 5 else "")
    return Check("quarantine", "warn", f"{len(kept)} loose object(s) git read as corrupt were "
                 f"set aside into .git/pub/quarantine: {names}",
                 "`git fsck` shows whether anything still needs them; once it is clean, delete "
                 ".git/pub/quarantine (or put a sound copy back from another clone)")


def _job_refs(env: _Env) -> Check:
    bad = [item.message for item in JobStore(env.repo).iter_jobs()
           if isinstance(item, CorruptStateError)]
    if not bad:
        return Check("job refs", "ok", "every job's state is readable")
    return Check("job refs", "fail", f"{len(bad)} unreadable job(s): {bad[0]}",
                 "inspect with `git log -p refs/pub/jobs/ID`; repair, or delete the ref once "
                 "you know the job is not wanted")


def _active(env: _Env) -> Check:
    repo, store = env.repo, JobStore(env.repo)
    active = repo.list_refs(ACTIVE_PREFIX)
    jobs = repo.list_refs(JOBS_PREFIX)
    missing, stale = [], []
    for job_id in jobs:
        try:
            job = store.load(job_id)
        except CorruptStateError:
            continue  # the job refs check reports it
        if job is None:
            continue
        if job.state not in TERMINAL and job_id not in active:
            missing.append((job_id, job.commit))
        elif job.state in TERMINAL and job_id in active:
            stale.append((job_id, active[job_id]))
    orphans = sorted(set(active) - set(jobs))
    if not missing and not stale and not orphans:
        return Check("active index", "ok", f"consistent ({len(active)} unfinished job(s))")
    parts = [f"{len(missing)} unfinished job(s) missing (invisible to push and status)"] * bool(
        missing) + [f"{len(stale)} finished job(s) still listed"] * bool(stale)
    if orphans:
        parts.append(f"{len(orphans)} entr(ies) without a job ({orphans[0]}: a creator died, or "
                     "one is running now)")
    fixable = bool(missing or stale)
    check = Check("active index", "fail" if missing else "warn", "; ".join(parts),
                  "`git pub doctor --fix` rebuilds the entries from the job refs"
                  + (f"; `git update-ref -d {ACTIVE_PREFIX}{orphans[0]}` once no prepare runs"
                     if orphans else ""), safe_fix=fixable)
    if env.fix and fixable:
        for job_id, commit in missing:
            repo.cas_ref(ACTIVE_PREFIX + job_id, None, commit, "gitpub doctor: active")
        for job_id, value in stale:
            repo.delete_ref(ACTIVE_PREFIX + job_id, value)
        return replace(check, fixed=not orphans)
    return check


def _fonts(env: _Env) -> Check:
    config, repo = env.config, env.repo
    assert config is not None
    if not config.fonts:
        return Check("font sources", "ok", "no fonts configured")
    ref = Context(repo, JobStore(repo), config).base_ref()
    tree = None if ref is None else repo.commit(str(repo.read_ref(ref))).tree
    absent = [f.source for f in config.fonts if tree is None or repo.lookup(tree, f.source) is None]
    if not absent:
        return Check("font sources", "ok", f"every font source is in {ref}")
    return Check("font sources", "fail", f"not in {ref or 'any commit'}: {', '.join(absent)}",
                 f"commit and push them (`git add {absent[0]} && git commit && git push`)")


def _hand_edits(env: _Env) -> Check:
    config, repo = env.config, env.repo
    assert config is not None
    ctx = Context(repo, JobStore(repo), config)
    pending = discover(ctx, repo.read_ref(f"refs/remotes/{config.remote}/{config.branch}"))
    if pending.empty:
        return Check("hand edits", "ok", "no pending hand edits")
    return Check("hand edits", "warn", f"{len(pending.uncommitted)} uncommitted content "
                 f"path(s), {len(pending.unpushed)} unpushed commit(s)",
                 "`git pub sync --dry-run` shows what `git pub sync` would deliver")


def _review(env: _Env) -> Check:
    """Delivery through review: the forge's token is where the configuration says (its
    presence only: doctor sends nothing to the forge)."""
    assert env.config is not None
    spec = env.config.delivery
    if not spec.reviewed:
        return Check("review", "ok", "delivery.mode push: jobs are pushed to the branch")
    if spec.forge == "branch":
        shown = spec.compare_url or "no compare_url: the review branch is named"
        return Check("review", "ok", f"pull requests are opened by a person ({shown})")
    name = spec.token_variable or ""
    if not os.environ.get(name):
        return Check("review", "fail", f"delivery through {spec.forge}: the environment "
                     f"variable {name} holds no token", f"export {name}=<a token that may open "
                     f"pull requests on {spec.repository}>")
    return Check("review", "ok", f"pull requests on {spec.forge} ({spec.repository}), token "
                 f"in {name}")


_CHECKS: tuple[tuple[str, Callable[[_Env], Check]], ...] = (
    ("remote", _remote),
    ("review", _review),
    ("remote archive", _remote_archive),
    ("hooks", _hooks),
    ("notes refspec", _notes_refspec),
    ("shallow clone", _shallow),
    ("stale locks", _locks),
    ("quarantine", _quarantine),
    ("job refs", _job_refs),
    ("active index", _active),
    ("font sources", _fonts),
    ("hand edits", _hand_edits),
)
_NEEDS_CONFIG = frozenset({"remote", "review", "remote archive", "notes refspec",
                           "font sources", "hand edits"})
