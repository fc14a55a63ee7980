"""The hooks' entry point: tiny and stdlib-only, because git runs it on every commit.

The shims ``git pub hooks install`` writes (``hooks/pre-push``, ``hooks/post-commit``) exec
``main`` with the interpreter pinned at install time and two start-up flags:

- ``-S`` (no ``site``): processing site-packages ``.pth`` files costs 10-20 ms on our machines
  (an editable install's import finder alone pulls in pathlib), as much as everything else the
  post-commit fast path does. The shim puts the directory holding the ``gitpub`` package first
  on ``sys.path`` instead, and ``_enable_site`` runs ``site.main()`` — what a normal start-up does
  — before anything needs site-packages (dulwich, PyYAML).
- ``-P``: hooks run in the user's working tree; a ``gitpub/`` directory there must not be
  imported in our place.

Most commits touch no content, so post-commit first asks git one question (which paths did
HEAD change, and what does its message say) and compares the paths with a cache kept in
``<git dir>/pub/hook-cache``: the trailer prefix and the literal beginning of every content glob
(``posts/`` for ``posts/**/*.md``). A path that starts with none of them cannot be content. Only
when a path could be content, or the message could carry job trailers, does it import
``gitpub.hooks.work``, which decides exactly (``Config.is_content``), does the work and rewrites the
cache. The cache holds the exact bytes of the ``.gitpub.yaml`` it was made from, so it is never
trusted for a different file. Why not simply load the configuration: PyYAML and ``gitpub.config``
cost ~20 ms to import, and even ``re`` and ``subprocess`` cost 5-10 ms each when ``site`` has not
already imported their dependencies — so the fast path uses neither (``str.startswith``,
``os.posix_spawnp``).

pre-push has a fast path too: gitpub's own ``git push`` of a commit it has just verified
carries a mark naming exactly that update (``core.pushmark``, which also says why a mark gives
nobody a way around the check); when the mark names every ref update on stdin, the hook returns
without starting the check a second time. Every other push is checked in full.

Both hooks run an earlier hook of the same name first (kept as ``<hook>.legacy`` by the
installer) with the same arguments and, for pre-push, the same stdin: git hands a hook its stdin
once, so it is read here and given to both. A post-commit hook cannot undo a commit, so
gitpub's part of it never fails: an error is one line on stderr.
"""

from __future__ import annotations

import os
import sys

from gitpub.hooks.shared import CONFIG_FILE, HOOKS, LEGACY_SUFFIX, is_shim, read_cache

_LEGACY_ENV = "GITPUB_RUNNING_LEGACY"
_USAGE = "usage: git pub hook-impl {pre-push|post-commit} [--hook-dir DIR] [--] [ARGS...]"
_site_done = False


def main(argv: list[str] | None = None) -> int:
    """Run one hook: ``HOOK [--hook-dir DIR] [--] ARGS…``; returns the hook's exit status."""
    parsed = parse_args(list(sys.argv[1:] if argv is None else argv))
    if parsed is None:
        print(_USAGE, file=sys.stderr)
        return 2
    hook, hook_dir, args = parsed
    stdin = read_stdin() if hook == "pre-push" else b""
    legacy = run_legacy(hook, hook_dir, args, stdin)
    if hook == "post-commit":
        post_commit()
        return legacy
    return pre_push(args, stdin) or legacy


def parse_args(argv: list[str]) -> tuple[str, str | None, list[str]] | None:
    """(hook, hook directory or None, the hook's own arguments), or None if malformed."""
    if not argv or argv[0] not in HOOKS:
        return None
    hook, rest, hook_dir = argv[0], argv[1:], None
    if rest[:1] == ["--hook-dir"]:
        if len(rest) < 2:
            return None
        hook_dir, rest = rest[1], rest[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    return hook, hook_dir, rest


def read_stdin() -> bytes:
    """pre-push's ref lines. Not read from a terminal (a person running the hook by hand), and
    not under the pre-commit framework, which consumed them and passes the range in the
    environment instead."""
    if "PRE_COMMIT_REMOTE_NAME" in os.environ or sys.stdin is None or sys.stdin.isatty():
        return b""
    return sys.stdin.buffer.read()


def run_legacy(hook: str, hook_dir: str | None, args: list[str], stdin: bytes) -> int:
    """Run ``<hook>.legacy`` if there is one (git's rules: only if executable); its status.

    Not when it is one of our own shims (another hook manager that parked *our* shim as its
    legacy hook would otherwise have us run ourselves), and not from inside a legacy hook we
    started (one that calls back into the hooks directory would otherwise loop).
    """
    if hook_dir is None or os.environ.get(_LEGACY_ENV):
        return 0
    legacy = os.path.join(hook_dir, hook + LEGACY_SUFFIX)
    if not os.access(legacy, os.X_OK) or os.path.isdir(legacy) or is_shim(legacy):
        return 0
    import subprocess

    from gitpub.core.pushmark import ENV as MARK

    # Not the mark of gitpub's own push: it vouches for that push only (``core.pushmark``).
    env = {**{k: v for k, v in os.environ.items() if k != MARK}, _LEGACY_ENV: "1"}
    try:
        if hook == "pre-push":
            return subprocess.run([legacy, *args], input=stdin, env=env).returncode
        return subprocess.run([legacy, *args], env=env).returncode
    except OSError as e:
        print(f"gitpub: {hook}: cannot run {legacy}: {e.strerror or e}", file=sys.stderr)
        return 1


# -- post-commit ------------------------------------------------------------------------------

def post_commit() -> None:
    """Link a hand-made job commit to its job, or record a content change for ``git pub sync``.

    Never raises: the commit is made whatever happens here.
    """
    try:
        _post_commit()
    except Exception as e:
        complain("post-commit", e)


def _post_commit() -> None:
    commit, message, paths = head_change()
    if not paths and b"-job-id" not in message.lower():
        return  # no content can have changed, and no prefix makes this a job commit
    git_dir, top = locate()
    config = read_config(top)
    cached = read_cache(git_dir, config)
    if cached is not None:
        prefix, starts = cached
        may_be_job = (prefix.lower() + "-job-id").encode() in message.lower()
        if not may_be_job and not any(p.startswith(starts) for p in paths):
            return
    _enable_site()
    from gitpub.hooks.work import post_commit_slow

    post_commit_slow(commit, message, paths, git_dir=git_dir, top=top)


def head_change() -> tuple[str, bytes, list[str]]:
    """HEAD's id, message, and the paths it changed (against its parent; for a merge, only the
    paths that differ from every parent — changes made in the merge itself)."""
    out = git_output(["diff-tree", "-r", "-c", "--root", "--always", "--no-renames",
                      "--name-only", "-z", "--format=%H%n%B", "HEAD"])
    header, _, rest = out.partition(b"\0")
    commit, _, message = header.partition(b"\n")
    if rest.startswith(b"\n"):
        rest = rest[1:]
    paths = [p.decode("utf-8", "surrogateescape") for p in rest.split(b"\0") if p]
    return commit.decode("ascii"), message, paths


def locate() -> tuple[str, str]:
    """(git directory, top of the working tree). Hooks run at the top with ``GIT_DIR`` set or a
    ``.git`` directory there; anything else (a hand run in a subdirectory) asks git."""
    git_dir = os.environ.get("GIT_DIR")
    if git_dir:
        return git_dir, os.environ.get("GIT_WORK_TREE") or os.getcwd()
    if os.path.isdir(".git"):
        return ".git", os.getcwd()
    out = git_output(["rev-parse", "--git-dir", "--show-toplevel"]).decode()
    git_dir, top = [*out.splitlines(), "", ""][:2]
    return git_dir, top or os.getcwd()


def read_config(top: str) -> bytes | None:
    try:
        with open(os.path.join(top, CONFIG_FILE), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


# -- pre-push ---------------------------------------------------------------------------------

def pre_push(args: list[str], stdin: bytes) -> int:
    """Refuse the push (1) when a job commit in it does not match its manifest.

    gitpub's own push of a commit it has just verified returns here at once, stdlib-only: the
    mark it sets names every update in this push (``core.pushmark``)."""
    if own_verified_push(stdin):
        return 0
    _enable_site()
    from gitpub.hooks.work import pre_push_check

    return pre_push_check(args, stdin)


def own_verified_push(stdin: bytes) -> bool:
    """Whether this push is gitpub's own, of exactly the updates it verified before pushing."""
    from gitpub.core import pushmark  # not on post-commit's path: it costs a commit nothing

    value = os.environ.get(pushmark.ENV)
    if not value or not stdin.strip():
        return False
    updates = []
    for line in stdin.decode("utf-8", "surrogateescape").splitlines():
        parts = line.rsplit(None, 3)
        if len(parts) != 4:
            return False
        updates.append((parts[1], parts[2], parts[3]))
    try:
        git_dir = locate()[0]
    except Exception:  # cannot tell which repository: the full check decides
        return False
    return pushmark.covers(value, git_dir, updates)


# -- plumbing ---------------------------------------------------------------------------------

def git_output(args: list[str]) -> bytes:
    """git's stdout (its stderr is dropped: a failure is reported as one line by the caller).

    ``os.posix_spawnp`` and a pipe rather than ``subprocess``: see the module docstring.
    """
    argv = ["git", *args]
    if not hasattr(os, "posix_spawnp"):  # pragma: no cover - Windows
        import subprocess

        proc = subprocess.run(argv, capture_output=True)
        code, out = proc.returncode, proc.stdout
    else:
        read_end, write_end = os.pipe()
        try:
            pid = os.posix_spawnp("git", argv, os.environ, file_actions=[
                (os.POSIX_SPAWN_DUP2, write_end, 1),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ])
        finally:
            os.close(write_end)
        with open(read_end, "rb") as pipe:
            out = pipe.read()
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code != 0:
        raise RuntimeError(f"`git {args[0]}` exited with status {code}")
    return out


def _enable_site() -> None:
    """Finish the start-up the shim skipped (``-S``): site-packages and their ``.pth`` files."""
    global _site_done
    if sys.flags.no_site and not _site_done:
        import site

        site.main()
    _site_done = True


def complain(hook: str, error: BaseException) -> None:
    """One line on stderr (sanitized, like every text gitpub shows); a traceback only with
    ``GITPUB_DEBUG=1``."""
    message = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
    hint = getattr(error, "hint", None)
    line = f"gitpub: {hook} hook: {message}" + (f" (hint: {hint})" if hint else "")
    try:
        from gitpub.core.sanitize import sanitize

        line = sanitize(line)
    except Exception:  # the report must get out even if the sanitizer cannot load
        line = f"gitpub: {hook} hook failed ({type(error).__name__})"
    print(line.replace("\n", " "), file=sys.stderr)
    if os.environ.get("GITPUB_DEBUG") == "1":
        import traceback

        traceback.print_exception(error)
