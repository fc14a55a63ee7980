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

Pushes are never forced: a push is a fast-forward of the remote branch or it is rejected, which is
the compare-and-swap that makes concurrent writers safe. Nothing this module reads from git's
output is persisted unsanitized (remote URLs may carry credentials).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from enum import StrEnum

from gitpub.core.errors import GitpubError
from gitpub.core.sanitize import sanitize
from gitpub.git.repo import Repository

FETCH_TIMEOUT = 300.0
PUSH_TIMEOUT = 300.0


class RemoteError(GitpubError):
    """The remote could not be reached or did not answer: a transient failure."""


class PushResult(StrEnum):
    SENT = "sent"
    RACE = "race"
    REJECTED = "rejected"
    UNKNOWN = "unknown"


#: Reasons in a porcelain ``[rejected]``/``[remote rejected]`` summary that mean the remote ref
#: moved under us: another writer won the race (the push was the compare-and-swap that lost).
RACE_REASONS = ("non-fast-forward", "fetch first", "stale info", "cannot lock ref",
                "failed to update ref", "failed to lock")


@dataclass(frozen=True)
class PushOutcome:
    result: PushResult
    detail: str  # sanitized


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

    @property
    def tracking_ref(self) -> str:
        return tracking_ref(self.remote, self.branch)

    def _git(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
        return self.repo.git(*args, timeout=timeout)

    def fetch(self) -> str | None:
        """Fetch the branch into its tracking ref; its tip, or None if the branch does not
        exist on the remote. Raises ``RemoteError`` when the remote cannot be reached."""
        return self.fetch_ref(f"refs/heads/{self.branch}", self.tracking_ref)

    def fetch_ref(self, src: str, dst: str, *, deepen: int | None = None) -> str | None:
        """Fetch remote ref ``src`` into local ref ``dst`` (forced: ``dst`` mirrors the
        remote); the fetched tip, or None if the remote has no such ref."""
        # Negotiate only with branches: not with the thousands of refs/pub/ state refs, whose
        # histories the remote never has.
        args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                "--no-recurse-submodules", "--negotiation-tip=refs/heads/*",
                f"--negotiation-tip=refs/remotes/{self.remote}/*"]
        if deepen is not None:
            args.append(f"--deepen={deepen}")
        try:
            proc = self._git([*args, self.remote, f"+{src}:{dst}"], self.fetch_timeout)
        except subprocess.TimeoutExpired:
            raise RemoteError(f"fetch from {sanitize(self.remote)} timed out") from None
        err = proc.stderr.decode("utf-8", "replace")
        if proc.returncode != 0:
            if "couldn't find remote ref" in err:
                return None
            raise RemoteError(f"fetch from {sanitize(self.remote)} failed: "
                              f"{sanitize(err.strip())[-500:]}")
        return self.repo.read_ref(dst)

    def push(self, commit: str) -> PushOutcome:
        """Push ``commit`` as the new tip of the remote branch, never forcing."""
        return self.push_ref(commit, f"refs/heads/{self.branch}")

    def push_ref(self, commit: str, dst: str) -> PushOutcome:
        """Push ``commit`` to remote ref ``dst`` as a fast-forward (never forced)."""
        try:
            proc = self._git(["push", "--porcelain", "--no-recurse-submodules", self.remote,
                              f"{commit}:{dst}"], self.push_timeout)
        except subprocess.TimeoutExpired:
            return PushOutcome(PushResult.UNKNOWN, "push timed out")
        return classify_push(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                             proc.stderr.decode("utf-8", "replace"), dst)


def classify_push(code: int, out: str, err: str, dst: str) -> PushOutcome:
    """sent / race / rejected / unknown, from ``git push --porcelain``'s status line for ``dst``.

    Porcelain lines are ``<flag>\\t<src>:<dst>\\t<summary>``; flag ``' '``, ``'*'``, ``'+'``
    or ``'='`` means the ref is (now) at our commit, ``'!'`` that it was refused, the summary
    saying why (``[rejected] (fetch first)``). Without a line for our ref, we do not know what
    happened.
    """
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[1].endswith(":" + dst):
            flag, summary = parts[0], sanitize(parts[2])
            if flag in (" ", "*", "+", "="):
                return PushOutcome(PushResult.SENT, summary)
            if flag == "!":
                race = any(reason in parts[2] for reason in RACE_REASONS)
                return PushOutcome(PushResult.RACE if race else PushResult.REJECTED, summary)
    detail = sanitize(err.strip())[-500:] or f"git push exited {code}"
    return PushOutcome(PushResult.UNKNOWN, detail)


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
    except subprocess.TimeoutExpired:
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
