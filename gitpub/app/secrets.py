"""``git pub secrets baseline``: the findings already on the branch, as allowlist rules.

A documentation site adopting gitpub holds example keys on pages that are already published.
The secret scan lets a finding the base version of a file already had, unchanged and in place,
through (``core.secretdiff``), but a job that edits the line holding it, or moves it, is judged
whole. ``baseline`` turns every finding on the branch into a rule of the allowlist the scan
already reads — ``.gitpub-allowlist`` (``core.allowlist``), in the working tree, for a person
to review, commit and push (the scan reads it from the branch, never from the working tree):

- the branch is the one jobs are prepared on (the remote-tracking branch as last fetched, else
  the local one: ``Context.base_ref``); every file of its tree is scanned, as the gates would;
- a rule is ``<path> <fingerprint>``: the value's SHA-256 prefix, allowed in that file only —
  never the value. A path's glob characters are written as classes (``[*]``), a space as ``?``
  (a rule line ends its glob at the first space); a path that looks like a secret itself, or
  that no rule can name, is not written (reported as skipped);
- what the file already allows (one of its rules, or an inline pragma) is not added again, so
  a second run adds nothing and leaves the file byte for byte as it was; ``--dry-run`` says
  what would be added and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gitpub.app.results import Progress
from gitpub.core.allowlist import ALLOWLIST_FILE, Allowlist, scan
from gitpub.core.errors import UsageError
from gitpub.core.files import write_atomic
from gitpub.core.globs import path_problem
from gitpub.core.sanitize import contains_secret
from gitpub.git.values import BLOB_MODES
from gitpub.runtime.session import open_session

#: What the header of each block of rules says (and the documentation shows).
HEADER = ("# git pub secrets baseline: findings on {ref} at {commit}; each is allowed in its "
          "file only. Keep only values that are public anyway (examples, test keys).")


@dataclass(frozen=True)
class Found:
    """One finding on the branch: where, what kind, its fingerprint (never the value)."""

    path: str
    lines: tuple[int, ...]
    kind: str
    fingerprint: str
    rule: str | None = None  # the rule written for it (None: skipped)
    skipped: str | None = None  # why no rule is written

    def public(self) -> dict[str, object]:
        return {"path": self.path, "lines": list(self.lines), "kind": self.kind,
                "fingerprint": self.fingerprint, "rule": self.rule, "skipped": self.skipped}


@dataclass(frozen=True)
class Baseline:
    file: Path
    ref: str | None  # the branch scanned (None: no branch yet, nothing scanned)
    commit: str | None
    added: tuple[Found, ...]  # rules written (or, with --dry-run, that would be)
    skipped: tuple[Found, ...]  # findings no rule can name
    allowed: int  # findings the file (or a pragma) already allows
    written: bool
    dry_run: bool
    remote: str = "origin"  # where the file goes once reviewed: the configured remote branch
    branch: str = "main"

    def next_steps(self) -> list[str]:
        if not self.written:
            return []
        return [f"review {ALLOWLIST_FILE}: remove the rule of any value that is a real secret, "
                "and take that secret out of the branch",
                f"commit and push it (the scan reads it from the branch): git add "
                f"{ALLOWLIST_FILE} && git commit -m 'Allow the findings already published' "
                f"&& git push {self.remote} {self.branch}"]


def glob_for(path: str) -> str:
    """A glob that matches ``path`` (and, for a space, any one character there): gitpub's
    globs have no escapes, a class names a literal glob character."""
    return "".join(f"[{c}]" if c in "*?[" else "?" if c == " " else c for c in path)


def baseline(where: Path, progress: Progress, dry_run: bool) -> Baseline:
    with open_session(where, progress) as ctx:
        repo = ctx.repo
        if repo.work_tree is None:
            raise UsageError("git pub secrets baseline needs a repository with a working tree")
        file = repo.work_tree / ALLOWLIST_FILE
        remote, branch = ctx.config.remote, ctx.config.branch
        ref = ctx.base_ref()
        commit = None if ref is None else repo.read_ref(ref)
        if ref is None or commit is None:
            return Baseline(file, None, None, (), (), 0, False, dry_run, remote, branch)
        tree = repo.commit(commit).tree
        current = _current(file, on_branch=repo.lookup(tree, ALLOWLIST_FILE) is not None,
                           ref=ref)
        rules = Allowlist.parse(current)  # AllowlistError: exit 2, nothing written
        found: dict[tuple[str, str], Found] = {}
        allowed = 0
        for path, entry in repo.walk_files(tree):
            if entry.mode not in BLOB_MODES:
                continue
            text = repo.blob(entry.sha).decode("utf-8", "surrogateescape")
            for hit in scan(text, (path,), rules, path):
                if hit.allowed_by is not None:
                    allowed += 1
                    continue
                key = (path, hit.fingerprint)
                seen = found.get(key)
                found[key] = (Found(path, (hit.line,), hit.kind, hit.fingerprint)
                              if seen is None else
                              Found(path, (*seen.lines, hit.line), seen.kind, seen.fingerprint))
        added, skipped = [], []
        for item in found.values():
            problem = _unnamed(item.path)
            if problem is not None:
                skipped.append(Found(item.path, item.lines, item.kind, item.fingerprint,
                                     skipped=problem))
            else:
                added.append(Found(item.path, item.lines, item.kind, item.fingerprint,
                                   rule=f"{glob_for(item.path)} {item.fingerprint}"))
        written = bool(added) and not dry_run
        if written:
            write_atomic(file, _with_rules(current, ref, commit, added).encode("utf-8"))
        return Baseline(file, ref, commit, tuple(added), tuple(skipped), allowed, written,
                        dry_run, remote, branch)


def _unnamed(path: str) -> str | None:
    """Why no rule can name ``path`` (None: one can)."""
    if contains_secret(path):
        return "the file's name looks like a secret itself"
    problem = path_problem(glob_for(path))
    return None if problem is None else f"no rule can name this path: it {problem[0]}"


def _current(file: Path, on_branch: bool, ref: str) -> str:
    """The working tree's allowlist: what a person edits and commits."""
    if file.is_symlink() or (file.exists() and not file.is_file()):
        raise UsageError(f"{ALLOWLIST_FILE} in the working tree is not a regular file",
                         hint="make it one (the scan reads it as a file of the branch)")
    if not file.exists():
        if on_branch:
            raise UsageError(f"{ALLOWLIST_FILE} is on {ref} but not in the working tree: "
                             "nothing written", hint="bring the branch up to date first "
                                                     "(`git pull`), then run it again")
        return ""
    return file.read_text(encoding="utf-8")


def _with_rules(current: str, ref: str, commit: str, added: list[Found]) -> str:
    lines = [HEADER.format(ref=ref, commit=commit)]
    for item in added:
        where = ", ".join(str(n) for n in item.lines)
        lines += [f"# {item.path}: line {where}, {item.kind}", str(item.rule)]
    head = current if not current or current.endswith("\n") else current + "\n"
    return head + ("\n" if head else "") + "\n".join(lines) + "\n"
