"""The network segment: fetch and push with C git.

Why C git and not dulwich's clients (docs/dulwich.md has the measurements): dulwich computes
"what to send" by walking the whole history in Python (seconds on a 100,000-commit remote), its
local client is not atomic, and its porcelain reports rejected pushes as successes. C git
negotiates with bitmaps and commit-graphs, brings the user's credential helpers and ssh
configuration, and ``git push --porcelain`` states per ref whether the update was applied.

Every push ends in exactly one of four outcomes:

- ``sent``: the remote accepted the update (it still gets confirmed by trailers afterwards);
- ``race``: the remote refused it because its ref moved under us (not a fast-forward, stale
  info, a lock held by a concurrent update): nothing changed, another writer won the race;
- ``rejected``: the remote refused it for another reason (a hook said no): nothing changed;
- ``unknown``: the connection failed or timed out, or the reply was lost — the update may or may
  not have been applied, so the next attempt must probe the remote before pushing again.

A remote that cannot work as configured is not a transient failure: a remote name with no URL,
a local path that is not a repository (both found before any network traffic, by ``check``),
a repository the server says does not exist, credentials it refuses. Those raise
``RemoteConfigError`` (a usage error, exit 2): retrying would fail the same way, so no delivery
attempt is used and no job changes; the hint says what to fix.

Pushes are never forced: a push is a fast-forward of the remote branch or it is rejected, which is
the compare-and-swap that makes concurrent writers safe. Nothing this module reads from git's
output is persisted unsanitized (remote URLs may carry credentials).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from gitpub.core import pushmark
from gitpub.core.errors import CorruptStateError, GitpubError, UsageError
from gitpub.core.sanitize import sanitize
from gitpub.git.push import (
    Pushed,
    PushOutcome,
    PushResult,
    Update,
    classify_push,
    parse_push,
    push_args,
)
from gitpub.git.refs import corrupt_packed_refs
from gitpub.git.repo import Repository
from gitpub.git.run import CompletedProcess, GitTimeout, run_git

__all__ = ["PushOutcome", "PushResult", "Pushed", "Remote", "RemoteConfigError", "RemoteError",
           "Update", "classify_push", "default_branch", "remote_names"]

FETCH_TIMEOUT = 300.0
PUSH_TIMEOUT = 300.0


class RemoteError(GitpubError):
    """The remote could not be reached or did not answer: a transient failure."""


class RemoteConfigError(UsageError):
    """The remote cannot work as configured: retrying would not help (exit 2, no attempt)."""


#: What git (and the servers behind it) say when credentials are missing or refused.
AUTH_REFUSED = ("authentication failed", "could not read username", "could not read password",
                "terminal prompts disabled", "permission denied (publickey",
                "http basic: access denied", "returned error: 401", "returned error: 403",
                "invalid username or password", "access denied or repository not exported")
#: What they say when the repository at the URL does not exist.
NO_REPOSITORY = ("does not appear to be a git repository", "repository not found",
                 "not found: did you run git update-server-info")


#: What git says when it cannot read an object of this repository that a push must send
#: (missing or corrupt: its pack-objects dies; the remote then reports an "unpacker error"):
#: lines of its own,
#: never a ``remote:`` line of the server's.
_LOCAL_OBJECT_MISSING = re.compile(
    r"^(?:(?:error: Could not read|fatal: bad object|fatal: unable to read) [0-9a-f]+\b"
    r"|fatal: loose object [0-9a-f]+ \(stored in .*\) is corrupt"
    r"|error: corrupt loose object '[0-9a-f]+').*$", re.MULTILINE)


def _object_said(line: str) -> str:
    """What git's line says of the object (its id, and missing or corrupt), without the path
    it may name."""
    found = re.search(r"[0-9a-f]{40}(?:[0-9a-f]{24})?", line)
    what = "corrupt" if "corrupt" in line else "missing"
    return f"object {found.group(0)} {what}" if found else f"an object {what}"


#: git over HTTP(S) when the server answers 404: ``fatal: repository 'URL/' not found``.
_HTTP_NOT_FOUND_RE = re.compile(r"repository '[^'\n]*' not found")


def misconfiguration(remote: str, stderr: str) -> RemoteConfigError | None:
    """The configuration error git's message reports, if it is one (else a transient)."""
    text = stderr.lower()
    if any(p in text for p in AUTH_REFUSED):
        return RemoteConfigError(
            f"remote {sanitize(remote)!r} refused the credentials (or has no such repository "
            f"for them): {_last_line(stderr)}",
            hint=f"check the credentials for `git remote get-url {sanitize(remote)}` (a "
                 "credential helper, an ssh key, a token with write access); no delivery "
                 "attempt was used")
    said = [ln.strip() for ln in stderr.splitlines()
            if "mismatched algorithms" in ln or "unexpected capabilities^{}" in ln]
    if said:
        return RemoteConfigError(
            f"remote {sanitize(remote)!r} stores its objects in another hash (sha1, sha256) "
            f"than this repository: {sanitize(said[0])[-300:]}",
            hint="a repository and its remote must share an object format (`git rev-parse "
                 "--show-object-format` in each); no delivery attempt was used")
    if any(p in text for p in NO_REPOSITORY) or _HTTP_NOT_FOUND_RE.search(text):
        return RemoteConfigError(
            f"remote {sanitize(remote)!r} has no repository at its URL: {_last_line(stderr)}",
            hint=f"`git remote set-url {sanitize(remote)} URL` to the right repository; no "
                 "delivery attempt was used")
    return None


def _last_line(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    return sanitize(lines[0] if lines else "(no message)")[-300:]


def local_path(url: str) -> str | None:
    """The directory a remote URL names on this machine, or None for a network URL. A
    ``file://`` URL as git reads it: percent-decoded, its host (``localhost``, any) ignored —
    the path starts at the first ``/`` after ``file://``."""
    if url.startswith("file://"):
        from urllib.parse import unquote

        rest = unquote(url[len("file://"):])
        slash = rest.find("/")
        return rest if slash < 0 else rest[slash:]
    if "://" in url:
        return None
    head = url.split("/", 1)[0]
    if ":" in head:
        return None  # scp-like ``host:path``
    return url


_UNREAD = object()
#: The variable that carries ``remote.<name>.mirror=false`` to a push (``Remote.push_git``).
_NO_MIRROR = "GITPUB_NO_MIRROR"
#: A URL as ``git remote -v`` says it: ``URL (fetch)`` or ``URL (push)``; a promisor remote's
#: fetch URL is followed by its filter (``URL (fetch) [blob:none]``).
_URL_LINE = re.compile(r"(.*) \((fetch|push)\)(?: \[[^\]\n]*\])?")


def tracking_ref(remote: str, branch: str) -> str:
    """Where the fetched state of the remote branch is kept (the remote-tracking branch)."""
    return f"refs/remotes/{remote}/{branch}"


class Remote:
    """One remote branch, reached from ``repo`` with C git (``git.run``'s environment)."""

    def __init__(self, repo: Repository, remote: str, branch: str,
                 fetch_timeout: float = FETCH_TIMEOUT, push_timeout: float = PUSH_TIMEOUT):
        self.repo = repo
        self.remote = remote
        self.branch = branch
        self.fetch_timeout = fetch_timeout
        self.push_timeout = push_timeout
        self._checked = False
        self._urls: object = _UNREAD

    @property
    def tracking_ref(self) -> str:
        return tracking_ref(self.remote, self.branch)

    def urls(self) -> tuple[str, ...] | None:
        """The fetch and push URLs of the remote (as git resolves them: ``insteadOf``
        applied), a URL or path given as the remote itself, or None: no such remote."""
        if self._urls is _UNREAD:
            self._urls = self._read_urls()
        return self._urls  # type: ignore[return-value]

    def _read_urls(self) -> tuple[str, ...] | None:
        """One ``git remote -v``: for each remote its first fetch URL and its first push URL,
        as ``git remote get-url [--push]`` says them (``insteadOf``/``pushInsteadOf``
        applied, ``pushurl`` first) — or the same read from the configuration this command
        has read already, where nothing could make git's answer differ (``_configured``)."""
        configured = self._configured()
        if configured is not None:
            return configured
        proc = self.repo.git("remote", "-v", timeout=30)
        if proc.returncode != 0:
            self._unreadable(proc.stderr)
        found: dict[str, str] = {}
        for line in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
            name, tab, rest = line.partition("\t")
            said = _URL_LINE.fullmatch(rest)
            if tab and name == self.remote and said is not None:
                found.setdefault(f"({said.group(2)})", said.group(1).strip())
        if found:
            return tuple(dict.fromkeys(found[k] for k in ("(fetch)", "(push)") if k in found))
        if "/" in self.remote or ":" in self.remote or self.remote in (".", ".."):
            return (self.remote,)
        return None

    def _configured(self) -> tuple[str, ...] | None:
        """What ``git remote -v`` says of this remote, from ``remote.<name>.url`` and
        ``pushurl`` in the configuration (read once per command) — when nothing could make
        git's answer another: no URL rewriting (``url.*``), no partial-clone filter (which
        ``git remote -v`` prints after the fetch URL), no remote file of old (``remotes/``,
        ``branches/``), no empty or multi-line value, none that is not UTF-8. None: ask git."""
        repo = self.repo
        config = repo.config()
        if any(name.startswith("url.") for name in config) or \
                f"remote.{self.remote}.partialclonefilter" in config:
            return None
        for directory in {repo.git_dir, repo.common_dir}:
            if any((directory / old / self.remote).exists() for old in ("remotes", "branches")):
                return None
        fetch = repo.config_values(f"remote.{self.remote}.url")
        push = repo.config_values(f"remote.{self.remote}.pushurl") or fetch
        # a byte that is not UTF-8 is U+FFFD in the configuration as read, kept in git's
        # answer (surrogateescape): such a URL is git's to say
        if not fetch or any(not v or "\n" in v or "\ufffd" in v for v in (*fetch, *push)):
            return None
        return tuple(dict.fromkeys(u.strip() for u in (fetch[0], push[0])))

    def _unreadable(self, stderr: bytes) -> None:
        """Raise when git failed for another reason than "no such remote": git refuses the
        repository itself (a corrupt ``packed-refs``, say), which is not a missing remote."""
        text = stderr.decode("utf-8", "replace")
        if "packed-refs" in text:
            line = next((x for x in text.splitlines() if x.startswith("fatal: ")), text.strip())
            raise corrupt_packed_refs(self.repo.common_dir,
                                      sanitize(line.removeprefix("fatal: ")[:200]))

    def fingerprint(self) -> str:
        """Names the remote's URLs (credentials redacted, then hashed): a delivery that failed
        against one fingerprint is due again as soon as the URL changes."""
        text = "\n".join(sanitize(u) for u in (self.urls() or ()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def check(self) -> None:
        """Raise ``RemoteConfigError`` when the remote cannot work as configured, found without
        the network: no such remote, or a local path that is not a repository."""
        if self._checked:
            return
        urls = self.urls()
        if urls is None:
            raise RemoteConfigError(
                f"no remote named {sanitize(self.remote)!r} in this repository",
                hint=f"`git remote add {sanitize(self.remote)} URL`, or name an existing remote "
                     "as `remote:` in .gitpub.yaml (`git remote -v` lists them); no delivery "
                     "attempt was used")
        for url in urls:
            path = local_path(url)
            if path is not None and not _is_repository(self._resolve(path)):
                raise RemoteConfigError(
                    f"remote {sanitize(self.remote)!r} is {sanitize(url)!r}, which is not a git "
                    "repository",
                    hint=f"`git remote set-url {sanitize(self.remote)} PATH` to the repository "
                         "(for a new one: `git init --bare PATH`); no delivery attempt was used")
        self._checked = True

    def _resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.repo.work_tree or self.repo.git_dir) / p

    def _git(self, args: list[str], timeout: float, env: Mapping[str, str] | None = None
             ) -> CompletedProcess[bytes]:
        return self.repo.git(*args, timeout=timeout, env=env)

    def push_git(self, args: list[str], timeout: float, env: Mapping[str, str] | None = None
                 ) -> CompletedProcess[bytes]:
        """``git ARGS`` (``args``: ``push``, its options, the remote, refspecs) as every gitpub
        push runs: never as a mirror. ``remote.<name>.mirror`` (a clone that mirrors
        itself to a backup) makes git refuse any push that names refspecs ("--mirror can't
        be combined with refspecs"), and gitpub's name exactly the refs they move; it is set
        to false for the push (``--config-env``: a remote's name may hold a ``=``)."""
        if self.repo.config_value(f"remote.{self.remote}", "mirror") is None:
            return self._git(args, timeout, env)
        return self._git([f"--config-env=remote.{self.remote}.mirror={_NO_MIRROR}", *args],
                         timeout, {**(env or {}), _NO_MIRROR: "false"})

    def fetch_refspecs(self, extra: list[str], refspecs: list[str], git_dir: Path,
                       env: dict[str, str], *, negotiate: Sequence[str] = ()
                       ) -> CompletedProcess[bytes] | None:
        """One ``git fetch`` of ``refspecs`` into ``git_dir``; None when a ref one of them
        names exactly is not on the remote. Raises ``RemoteError`` / ``RemoteConfigError``.
        ``negotiate``: more ref prefixes whose refs the fetch may negotiate with (the caller's
        mirror of what the remote holds)."""
        # Negotiate only with branches and the mirrors of what the remote has: not with local
        # refs whose histories the remote may never have (the job refs). No opportunistic
        # updates of other refs.
        self.check()
        args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--refmap=",
                "--no-recurse-submodules", "--negotiation-tip=refs/heads/*",
                f"--negotiation-tip=refs/remotes/{self.remote}/*",
                *(f"--negotiation-tip={p}*" for p in negotiate), *extra]
        try:
            proc = run_git([*args, self.remote, *refspecs],
                           cwd=self.repo.work_tree or self.repo.git_dir, git_dir=git_dir,
                           work_tree=self.repo.work_tree if git_dir == self.repo.git_dir
                           else None, timeout=self.fetch_timeout, env=env)
        except GitTimeout:
            raise RemoteError(f"fetch from {sanitize(self.remote)} timed out") from None
        finally:
            if git_dir in (self.repo.git_dir, self.repo.common_dir):
                self.repo.forget_mirrors()  # it may have moved them (a fetch into this one)
        err = proc.stderr.decode("utf-8", "replace")
        if proc.returncode != 0:
            if "couldn't find remote ref" in err:
                return None
            wrong = misconfiguration(self.remote, err)
            if wrong is not None:
                raise wrong
            said = "\n".join(ln for ln in err.strip().splitlines()
                             if not ln.startswith("warning: ignoring --negotiation-tip"))
            raise RemoteError(f"fetch from {sanitize(self.remote)} failed: "
                              f"{sanitize(said)[-500:]}")
        return proc

    def push(self, commit: str, *, verified_onto: str | None = None) -> PushOutcome:
        """Push ``commit`` as the new tip of the remote branch, never forcing.

        ``verified_onto``: the remote tip over which the caller has verified that this push
        sends only ``commit`` and that it is the publication it claims; gitpub's pre-push hook
        then skips its re-check of exactly this update (``core.pushmark``)."""
        return self.push_ref(commit, f"refs/heads/{self.branch}", verified_onto=verified_onto)

    def push_ref(self, commit: str, dst: str, *, verified_onto: str | None = None
                 ) -> PushOutcome:
        """Push ``commit`` to remote ref ``dst`` as a fast-forward (never forced). Raises
        ``RemoteConfigError`` when the remote refused the credentials (nothing was sent)."""
        verified = {dst: verified_onto} if verified_onto is not None else None
        return self.push_updates([Update(dst, commit)], verified=verified).of(dst)

    def push_updates(self, updates: list[Update], *, atomic: bool = False,
                     verify: bool = True, verified: Mapping[str, str] | None = None) -> Pushed:
        """One ``git push`` of ``updates`` (branches as fast-forwards, the others each with its
        lease; ``atomic``: all or nothing). ``verify=False`` skips the pre-push hooks: for
        pushes of gitpub's own state refs only, which carry no branch commit to check.
        ``verified`` (remote ref → the old value it was verified over): the updates gitpub has
        verified itself, named in the push's mark for its pre-push hook (``core.pushmark``). Raises
        ``RemoteConfigError`` when the remote refused the credentials (nothing was sent)."""
        self.check()
        env = None
        if verified:
            git_dir = str(self.repo.git_dir)
            env = {pushmark.ENV: pushmark.mark([
                pushmark.entry(git_dir, u.src or "", u.dst, verified[u.dst])
                for u in updates if u.dst in verified])}
        args = push_args(updates, atomic=atomic) + ([] if verify else ["--no-verify"])
        try:
            proc = self.push_git([*args, self.remote, *(u.refspec() for u in updates)],
                                 self.push_timeout, env)
        except GitTimeout:
            return Pushed({u.dst: PushOutcome(PushResult.UNKNOWN, "push timed out")
                           for u in updates})
        out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
        pushed = parse_push(proc.returncode, out, err, updates)
        missing = _LOCAL_OBJECT_MISSING.search(err)
        if missing is not None and pushed.result != PushResult.SENT:
            raise CorruptStateError(
                sanitize(f"this repository lacks, or cannot read, an object the push to "
                         f"{self.remote} must send ({_object_said(missing.group(0))}): the "
                         "remote refused nothing; `git fsck` names it (a `git gc --prune=now` "
                         "under a running gitpub? a damaged disk?)"),
                hint="a `git gc --prune=now` (or `git prune`) run while gitpub had written "
                     "objects and not yet recorded them removes them, a damaged file makes "
                     "one unreadable; `git fsck` names what is missing or corrupt and what "
                     "refers to it")
        if pushed.result == PushResult.UNKNOWN and not pushed.atomic_unsupported:
            wrong = misconfiguration(self.remote, err)
            if wrong is not None:
                return self._refused_or_landed(wrong, pushed, updates)
        return pushed

    def _refused_or_landed(self, wrong: RemoteConfigError, pushed: Pushed,
                           updates: list[Update]) -> Pushed:
        """A push without a porcelain report whose messages read like a refusal of the
        credentials. Words on stderr are not proof — a server hook or a proxy may print
        "Authentication failed" *after* the remote applied the push, and a connection may drop
        before the report. The remote refs say what happened: each at its new value was sent;
        none readable and moved, the refusal stands (exit 2, no attempt), and so it does when
        they are unreadable for the same reason; unreadable otherwise, the outcome is unknown
        (probed later)."""
        try:
            proc = self._git(["ls-remote", self.remote, *(u.dst for u in updates)],
                             self.fetch_timeout)
        except GitTimeout:
            return pushed
        if proc.returncode != 0:
            if misconfiguration(self.remote, proc.stderr.decode("utf-8", "replace")):
                raise wrong
            return pushed
        now = {}
        for line in proc.stdout.decode("utf-8", "replace").splitlines():
            sha, _, ref = line.partition("\t")
            now[ref] = sha
        landed = {u.dst for u in updates if u.src is not None and now.get(u.dst) == u.src}
        if not landed:
            raise wrong
        sent = PushOutcome(PushResult.SENT, "the remote ref is at the commit (the push's own "
                           "report was lost)")
        return pushed._replace(refs={**pushed.refs, **{dst: sent for dst in landed}})

    def dry_run_push(self, source: str) -> PushOutcome:
        """``git push --dry-run`` of ``source`` to the remote branch: reaches the remote and
        authenticates as a push would, and changes nothing (doctor's "writable" check)."""
        self.check()
        dst = f"refs/heads/{self.branch}"
        try:
            proc = self.push_git(["push", "--dry-run", "--porcelain", "--no-verify",
                                  "--no-recurse-submodules", "--no-follow-tags", self.remote,
                                  f"{source}:{dst}"],
                                 self.push_timeout)
        except GitTimeout:
            return PushOutcome(PushResult.UNKNOWN, "push --dry-run timed out")
        out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
        outcome = classify_push(proc.returncode, out, err, dst)
        if outcome.result == PushResult.UNKNOWN:
            wrong = misconfiguration(self.remote, err)
            if wrong is not None:
                raise wrong
        return outcome

    def ls_remote(self) -> str | None:
        """The remote branch's tip as the remote says now, without fetching anything (no
        object and no ref written: what ``--dry-run`` may use). None: no such branch."""
        ref = f"refs/heads/{self.branch}"
        return self.list_refs([ref]).get(ref)

    def list_refs(self, patterns: list[str]) -> dict[str, str]:
        """The remote's refs named by ``patterns`` (a full ref name, or a prefix ending in
        ``*``), as the remote says now: name -> id. Nothing is fetched or written."""
        self.check()
        try:
            proc = self._git(["ls-remote", self.remote, *patterns], self.fetch_timeout)
        except GitTimeout:
            raise RemoteError(f"ls-remote of {sanitize(self.remote)} timed out") from None
        err = proc.stderr.decode("utf-8", "replace")
        if proc.returncode != 0:
            wrong = misconfiguration(self.remote, err)
            if wrong is not None:
                raise wrong
            raise RemoteError(f"ls-remote of {sanitize(self.remote)} failed: "
                              f"{_last_line(err)}")
        out: dict[str, str] = {}
        for line in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
            sha, _, name = line.partition("\t")
            if any(_named(p, name) for p in patterns):
                out[name] = sha
        return out


def _named(pattern: str, name: str) -> bool:
    """``ls-remote`` matches patterns against the ends of names; this is the exact match."""
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


def _is_repository(path: Path) -> bool:
    """A git repository (bare or not), or a bundle file (git fetches from those too)."""
    if path.is_file():
        return True
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


# -- what a repository's remotes are (for ``init`` and for hints) ------------------------------

LS_REMOTE_TIMEOUT = 30.0


def remote_names(repo: Repository) -> list[str]:
    """The names of the repository's configured remotes, as ``git remote`` lists them."""
    proc = repo.git("remote", timeout=LS_REMOTE_TIMEOUT)
    return proc.stdout.decode("utf-8", "replace").split() if proc.returncode == 0 else []


def default_branch(repo: Repository, remote: str) -> str | None:
    """The remote's default branch (what its HEAD points at), or None when it cannot be told.

    Asks the remote (``git ls-remote --symref REMOTE HEAD``); when it cannot be reached, falls
    back to what the last clone or ``git remote set-head`` recorded (``refs/remotes/R/HEAD``).
    An empty remote has no default branch yet.
    """
    try:
        proc = repo.git("ls-remote", "--symref", remote, "HEAD", timeout=LS_REMOTE_TIMEOUT)
    except GitTimeout:
        proc = None
    if proc is not None and proc.returncode == 0:
        for line in proc.stdout.decode("utf-8", "replace").splitlines():
            target, _, name = line.removeprefix("ref: ").partition("\t")
            if line.startswith("ref: ") and name == "HEAD" and target.startswith("refs/heads/"):
                return target.removeprefix("refs/heads/")
    local = repo.git("symbolic-ref", "--quiet", f"refs/remotes/{remote}/HEAD",
                     timeout=LS_REMOTE_TIMEOUT)
    target = local.stdout.decode("utf-8", "replace").strip()
    prefix = f"refs/remotes/{remote}/"
    if local.returncode == 0 and target.startswith(prefix):
        return target.removeprefix(prefix)
    return None
