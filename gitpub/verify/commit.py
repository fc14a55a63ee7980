"""The one verifier: is a commit the publication its trailers claim?

A commit is job J's publication only when all of these hold (docs/data-model.md, "Proof of
publication"):

1. its message claims J the same way under both of git's readings (``git.trailers.claim``):
   exactly one ``<prefix>-Job-Id`` — a gitpub job id, i.e. a UUID — and one
   ``<prefix>-Manifest-Sha256``; the message is read as git shows it, and one stored in another
   encoding than UTF-8 (an ``encoding`` header: git re-encodes it) is a proof only when its raw
   bytes make the same claim with the same manifest paragraph — an encoding that hides the
   claim from a byte-level reader (UTF-16, say) never is, while a person's ISO-8859-1 commit
   delivered by ``sync`` (ASCII trailers) is;
2. the manifest paragraph of its message hashes to that ``Manifest-Sha256``;
3. every tree it adds, and every tree on a manifest path, is one ``git fsck --strict`` accepts
   (``git.treecheck``: no duplicate or unsorted entries, no bad modes, no ``.git`` names), so
   that dulwich and C git read the same files from it;
4. its tree holds every manifest entry: path, mode and SHA-256 of the content — and no file at
   a path the manifest lists as deleted (v2: a hand commit delivered by ``sync``);
5. against its first parent — as C git computes it (``git.diff``), so what is judged is what a
   clone checks out — it changes something, only the manifest's paths (no other file added,
   changed or deleted, no deletion the manifest does not list, no directory that leads to none
   of them), and none of them is a path that steers git, CI or gitpub (``steers``);
6. where a trusted configuration is given (``confirm``: the one its last run checked, never the
   pushed tree's — ``verify.facts``), every manifest path is one a job may write under it (the
   write scope, ``publish``, or content ``git pub sync`` delivers), and a symbolic link points
   inside the repository (``scope_problems``).

Trailers alone prove nothing (anyone can copy a message), and neither does a tree that merely
holds the files (a forged commit may carry them plus something else). The probe of delivery,
RECOVERING's search, the once-per-job history search, ``git pub confirm`` and the pre-push
hook all ask this module. Everything a verdict says is sanitized: job ids and paths come from
commits anyone may push.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

from gitpub.config.model import Config
from gitpub.core.manifest import HEADERS, Manifest, ManifestError, content_sha256
from gitpub.core.paths import is_dotgit, is_steering
from gitpub.core.sanitize import sanitize
from gitpub.git.diff import Change, changes_of
from gitpub.git.repo import MODE_LINK, MODE_TREE, CommitInfo, Repository
from gitpub.proof import trailers
from gitpub.verify.facts import Bad

#: The prefix gitpub writes by default: claims under it are always checked by ``confirm``.
DEFAULT_PREFIX = "Blog"
#: A gitpub job id: ``uuid5`` of the key, as ``store.jobs.job_id_for_key`` writes it.
JOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_UTF8 = frozenset({"utf-8", "utf8"})
#: At most this many symbolic links on the way to a published link's target (Linux's limit).
MAX_LINKS = 40
#: The longest target a symbolic link may have (bytes, as POSIX systems' ``PATH_MAX - 1``).
MAX_LINK_TARGET = 4095


def steers(path: str) -> bool:
    """A path that steers git, CI or gitpub itself (``core.paths.is_steering``: any ``.git…``
    component in any spelling, other CI services' and tools' files). A job commit that
    touches one is BAD here even when the configuration lets a job write it: a person looks
    and accepts it (``confirm --accept``)."""
    return is_steering(path)


def is_job_id(text: str) -> bool:
    return JOB_ID.fullmatch(text) is not None


class Verdict(NamedTuple):
    """What is wrong, if anything, with one commit that claims a job. Built with ``verdict``:
    ``job_id`` and ``problems`` are sanitized (they quote a commit anyone may push)."""

    commit: str
    job_id: str  # the (first) job id the commit claims
    problems: tuple[str, ...]  # empty when the commit is the publication it claims
    manifest_sha256: str | None = None  # the claimed manifest hash, when well-formed
    manifest: Manifest | None = None  # the manifest the message carries, when readable
    job_ids: tuple[str, ...] = ()  # every job id its claims name, under every prefix checked

    @property
    def ok(self) -> bool:
        return not self.problems


def verdict(commit: str, job_id: str, problems: Sequence[str],
            manifest_sha256: str | None = None, manifest: Manifest | None = None) -> Verdict:
    """A ``Verdict`` whose texts are sanitized."""
    return Verdict(commit, sanitize(job_id), tuple(sanitize(p) for p in problems),
                   manifest_sha256, manifest)


def manifest_paragraph(message: bytes) -> bytes | None:
    """The manifest text embedded in a commit message, if any (the last paragraph that opens
    with a manifest header: a hand commit's own text comes before gitpub's)."""
    start = max(message.rfind(b"\n" + header) for header in HEADERS)
    if start < 0:
        return None
    start += 1
    end = message.find(b"\n\n", start)
    return message[start:] if end < 0 else message[start:end + 1]


def claims_of(message: bytes, prefixes: Sequence[str]) -> list[trailers.Claim]:
    """The claims ``message`` makes under each of ``prefixes`` (usually none). Prefixes are
    matched as git matches keys, case-insensitively: ``Blog`` and ``blog`` are one."""
    unique = {p.lower(): p for p in reversed(prefixes)}
    return [c for p in reversed(unique.values()) if (c := trailers.claim(message, p)) is not None]


def shown_message(repo: Repository, info: CommitInfo) -> tuple[bytes, str | None]:
    """The message as git shows it, and the problem of a message stored in another encoding
    than UTF-8 (None for gitpub's own commits, which have no ``encoding`` header)."""
    if info.encoding is None or info.encoding.strip().lower() in _UTF8:
        return info.message, None
    return repo.message_as_git_shows(info.sha), (
        f"its message is stored in the {info.encoding!r} encoding, whose raw bytes do not make "
        "the claim git shows")


def verify_commit(repo: Repository, commit: str, prefixes: Sequence[str],
                  info: CommitInfo | None = None,
                  changes: Sequence[Change] | None = None,
                  trusted: Config | Bad | None = None) -> Verdict | None:
    """None for a commit that claims no job under ``prefixes``; else its verdict. ``changes``
    (``git.diff.first_parent_changes``) may be given when many commits are verified at once;
    ``trusted``: the configuration whose write scope applies (rule 6)."""
    info = info or repo.commit(commit)
    message, encoding_problem = shown_message(repo, info)
    claims = claims_of(message, prefixes)
    if not claims:
        return None
    found = _judge(repo, info, message, encoding_problem, claims, prefixes, changes)
    if trusted is not None and found.manifest is not None:
        found = found._replace(problems=found.problems + tuple(
            sanitize(p) for p in scope_problems(repo, info, found.manifest, trusted)))
    return found._replace(job_ids=tuple(dict.fromkeys(i for c in claims for i in c.job_ids)))


def scope_problems(repo: Repository, info: CommitInfo, manifest: Manifest,
                   trusted: Config | Bad) -> list[str]:
    """Rule 6: what a job may not have written under the trusted configuration — a path
    outside its write scope (``Config.scope_problem``; content ``sync`` delivers is in it), a
    symbolic link that points out of the repository or into ``.git``."""
    if isinstance(trusted, Bad):
        return [f"no trusted configuration to check its write scope against: "
                f"{getattr(trusted.error, 'message', trusted.error)}"]
    problems = []
    for entry in manifest.entries:
        problem = trusted.scope_problem(entry.path)
        if problem is not None and not trusted.is_content(entry.path):
            problems.append(f"{entry.path}: {problem}")
        if entry.mode == MODE_LINK:
            found = repo.lookup(info.tree, entry.path)
            if found is not None and found.mode == MODE_LINK:
                escape = link_problem(entry.path, repo.blob(found.sha),
                                      lambda path: _link_at(repo, info.tree, path))
                if escape is not None:
                    problems.append(f"{entry.path}: a symbolic link {escape}")
    return problems


def link_problem(path: str, target: bytes,
                 link_at: Callable[[str], bytes | None] = lambda _: None) -> str | None:
    """Why a symbolic link at ``path`` to ``target`` may not be published (it points out of the
    repository, or into ``.git``), or None. ``link_at`` gives the target of a symbolic link at
    a path of the same tree (None: no link there): the links on the way are followed as a
    checkout's file system follows them, so a link that stays inside only on paper (through
    ``a -> ..``, then up) is refused, and so is a chain of more than ``MAX_LINKS``."""
    parts: list[str] = path.split("/")[:-1]
    todo: deque[str] = deque()  # the components left to resolve, the next first
    text, links = target.decode("utf-8", "surrogateescape"), 0
    while True:
        if text.startswith("/"):
            return "to an absolute path"
        if "\\" in text or "\0" in text or \
                len(text.encode("utf-8", "surrogateescape")) > MAX_LINK_TARGET:
            return "whose target is no portable path"
        todo.extendleft(reversed(text.split("/")))
        text = ""
        while todo and not text:
            part = todo.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    return "out of the repository"
                parts.pop()
                continue
            parts.append(part)
            inner = link_at("/".join(parts))
            if inner is not None:
                links += 1
                if links > MAX_LINKS:
                    return f"through more than {MAX_LINKS} symbolic links (a loop?)"
                parts.pop()
                text = inner.decode("utf-8", "surrogateescape") or "."
        if not text:
            break
    if any(is_dotgit(p) for p in parts):
        return "into .git"
    return None


def _link_at(repo: Repository, tree: str, path: str) -> bytes | None:
    """The target of the symbolic link at ``path`` in ``tree``, None when there is none."""
    found = repo.lookup(tree, path)
    return repo.blob(found.sha) if found is not None and found.mode == MODE_LINK else None


def _judge(repo: Repository, info: CommitInfo, message: bytes, encoding_problem: str | None,
           claims: Sequence[trailers.Claim], prefixes: Sequence[str],
           changes: Sequence[Change] | None) -> Verdict:
    commit = info.sha
    if encoding_problem is not None and claims_of(info.message, prefixes) == claims and \
            manifest_paragraph(info.message) == manifest_paragraph(message):
        encoding_problem = None  # both readings claim the same: nothing is hidden
    first = claims[0]
    job_id = first.job_ids[0]
    problems = [] if encoding_problem is None else [encoding_problem]
    if not is_job_id(job_id):
        problems.append(f"{first.prefix}-Job-Id {job_id!r} is not a gitpub job id (a UUID)")
    if len(claims) > 1:
        names = ", ".join(f"{c.prefix}-Job-Id" for c in claims)
        return verdict(commit, job_id, [*problems,
                                        f"claims jobs under more than one prefix ({names})"])
    if first.proof is None:
        return verdict(commit, job_id, [*problems, first.problem or "malformed trailers"])
    proof = first.proof
    text = manifest_paragraph(message)
    if text is None:
        return verdict(commit, job_id, [*problems, "no manifest in the commit message"],
                       proof.manifest_sha256)
    try:
        manifest = Manifest.parse(text)
    except ManifestError as e:
        return verdict(commit, job_id, [*problems, f"manifest unreadable: {e}"],
                       proof.manifest_sha256)
    if manifest.sha256() != proof.manifest_sha256:
        problems.append("the manifest does not hash to the Manifest-Sha256 trailer")
    problems += tree_problems(repo, info, manifest, changes)
    return verdict(commit, job_id, problems, proof.manifest_sha256, manifest)


def tree_problems(repo: Repository, info: CommitInfo, manifest: Manifest,
                  changes: Sequence[Change] | None = None) -> list[str]:
    """Rules 3 to 5: the trees are sound, the files are there, the commit changes only them."""
    if info.parents and not repo.has_object(info.parents[0]):
        return [f"first parent {info.parents[0]} is not in this clone: cannot check what the "
                "commit changes"]
    if changes is None:
        changes = changes_of(repo, info)
    if changes is None:
        return ["git cannot compare it with its first parent (unreadable trees)"]
    problems = _unsound_trees(repo, info, manifest, changes)
    if problems:
        return problems  # then dulwich and git may read different files: judge nothing else
    problems += _content_problems(repo, info, manifest)
    problems += _change_problems(manifest, changes)
    return problems


def _unsound_trees(repo: Repository, info: CommitInfo, manifest: Manifest,
                   changes: Sequence[Change]) -> list[str]:
    """What ``git fsck`` refuses in the trees the commit adds and those on manifest paths."""
    trees: dict[str, str] = {info.tree: ""}  # tree id -> its path, for messages
    for change in changes:
        if change.new_tree is not None:
            trees.setdefault(change.new_tree, change.path + "/")
    for path in manifest.paths:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            entry = repo.lookup(info.tree, directory)
            if entry is None or entry.mode != MODE_TREE:
                break
            trees.setdefault(entry.sha, directory + "/")
    problems = []
    for sha, where in trees.items():
        problems += [f"tree {where or '(root)'}: {p} (git fsck refuses it)"
                     for p in repo.fsck_problems(sha)]
    return problems


def _content_problems(repo: Repository, info: CommitInfo, manifest: Manifest) -> list[str]:
    problems = []
    for entry in manifest.entries:
        found = repo.lookup(info.tree, entry.path)
        if entry.deleted:
            if found is not None and found.mode != MODE_TREE:
                problems.append(f"{entry.path}: present, manifest says deleted")
        elif found is None:
            problems.append(f"{entry.path}: missing")
        elif found.mode != entry.mode:
            problems.append(f"{entry.path}: mode {found.mode:o}, manifest says {entry.mode:o}")
        elif content_sha256(repo.blob(found.sha)) != entry.sha256:
            problems.append(f"{entry.path}: content differs from the manifest")
    return problems


def _change_problems(manifest: Manifest, changes: Sequence[Change]) -> list[str]:
    """Against the first parent: something changed, only manifest paths, no stray directory,
    no steering path."""
    listed = set(manifest.paths)
    directories = {"/".join(p.split("/")[:d]) for p in listed for d in range(1, p.count("/") + 1)}
    if not changes:
        return ["it changes nothing against its first parent"]
    problems = []
    changed = sorted({c.path for c in changes if not c.is_tree})
    for path in changed:
        if path not in listed:
            problems.append(f"{path}: changed, but not in the manifest")
    for change in changes:
        if change.is_tree and change.new_tree is not None and change.path not in directories:
            problems.append(f"{change.path}/: a directory that holds no file of the manifest")
    for path in sorted(listed | set(changed)):
        if steers(path):
            problems.append(f"{path}: a path that steers git, CI or gitpub")
    return problems


def same_request(ours: Manifest | None, theirs: Manifest | None,
                 derived: frozenset[str]) -> bool:
    """Two manifests of one job id publish the same request: equal, or equal but for derived
    files (font subsets computed from different article sets)."""
    if ours is None or theirs is None:
        return False
    keep = [e for e in ours.entries if e.path not in derived]
    return keep == [e for e in theirs.entries if e.path not in derived]
