"""The one verifier: is a commit the publication its trailers claim?

A commit is job J's publication only when all of these hold (README, "Proof of publication"):

1. its message claims J the same way under both of git's readings (``git.trailers.claim``):
   exactly one ``<prefix>-Job-Id`` and one ``<prefix>-Manifest-Sha256``;
2. the manifest paragraph of its message hashes to that ``Manifest-Sha256``;
3. its tree holds every manifest entry: path, mode and SHA-256 of the content — and no file at
   a path the manifest lists as deleted (v2: a hand commit delivered by ``sync``);
4. against its first parent it changes the manifest's paths and nothing else (no extra file, no
   deletion the manifest does not list), and none of them is a path that steers git, CI or
   gitpub (``steers``).

Trailers alone prove nothing (anyone can copy a message), and neither does a tree that merely
holds the files (a forged commit may carry them plus something else). The probe of delivery,
RECOVERING's search, ``git pub confirm`` and the pre-push hook all ask this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gitpub.core.manifest import HEADERS, Manifest, ManifestError, content_sha256
from gitpub.core.paths import is_steering
from gitpub.git import trailers
from gitpub.git.repo import MODE_TREE, CommitInfo, Repository

#: The prefix gitpub writes by default: claims under it are always checked by ``confirm``.
DEFAULT_PREFIX = "Blog"


def steers(path: str) -> bool:
    """A path that steers git, CI or gitpub itself (``core.paths.is_steering``: any ``.git…``
    component in any spelling, other CI services' files at the root). A job commit that
    touches one is BAD here even when the configuration lets a job write it: a person looks
    and accepts it (``confirm --accept``)."""
    return is_steering(path)


@dataclass(frozen=True)
class Verdict:
    """What is wrong, if anything, with one commit that claims a job."""

    commit: str
    job_id: str  # the (first) job id the commit claims
    problems: tuple[str, ...]  # empty when the commit is the publication it claims
    manifest_sha256: str | None = None  # the claimed manifest hash, when well-formed
    manifest: Manifest | None = None  # the manifest the message carries, when readable

    @property
    def ok(self) -> bool:
        return not self.problems


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
    """The claims ``message`` makes under each of ``prefixes`` (usually none)."""
    return [c for p in dict.fromkeys(prefixes) if (c := trailers.claim(message, p)) is not None]


def verify_commit(repo: Repository, commit: str, prefixes: Sequence[str],
                  info: CommitInfo | None = None) -> Verdict | None:
    """None for a commit that claims no job under ``prefixes``; else its verdict."""
    info = info or repo.commit(commit)
    claims = claims_of(info.message, prefixes)
    if not claims:
        return None
    first = claims[0]
    job_id = first.job_ids[0]
    if len(claims) > 1:
        names = ", ".join(f"{c.prefix}-Job-Id" for c in claims)
        return Verdict(commit, job_id, (f"claims jobs under more than one prefix ({names})",))
    if first.proof is None:
        return Verdict(commit, job_id, (first.problem or "malformed trailers",))
    proof = first.proof
    text = manifest_paragraph(info.message)
    if text is None:
        return Verdict(commit, job_id, ("no manifest in the commit message",),
                       proof.manifest_sha256)
    try:
        manifest = Manifest.parse(text)
    except ManifestError as e:
        return Verdict(commit, job_id, (f"manifest unreadable: {e}",), proof.manifest_sha256)
    problems = []
    if manifest.sha256() != proof.manifest_sha256:
        problems.append("the manifest does not hash to the Manifest-Sha256 trailer")
    problems += tree_problems(repo, info, manifest)
    return Verdict(commit, job_id, tuple(problems), proof.manifest_sha256, manifest)


def tree_problems(repo: Repository, info: CommitInfo, manifest: Manifest) -> list[str]:
    """Rules 3 and 4: the files are there, and the commit changes nothing else."""
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
    parent_tree: str | None = None
    if info.parents:
        parent = info.parents[0]
        if not repo.has_object(parent):
            return [*problems, f"first parent {parent} is not in this clone: cannot check "
                               "what the commit changes"]
        parent_tree = repo.commit(parent).tree
    listed = set(manifest.paths)
    changed = sorted({path for path, _ in repo.changed_paths(parent_tree, info.tree)})
    for path in changed:
        if path not in listed:
            problems.append(f"{path}: changed, but not in the manifest")
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
