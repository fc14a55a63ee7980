"""Checking a commit's own proof: do its files match the manifest its trailers promise?

A job commit carries the manifest as a body paragraph and its hash in the
``<prefix>-Manifest-Sha256`` trailer. It is sound when the paragraph hashes to the trailer and
every file the manifest lists is in the commit's tree with that mode and content hash, and every
path it lists as deleted holds no file there. Used by
``git pub confirm`` (CI) and the pre-push hook.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitpub.core.manifest import HEADERS, Manifest, ManifestError, content_sha256
from gitpub.git import trailers
from gitpub.git.repo import MODE_TREE, Repository


@dataclass(frozen=True)
class Verdict:
    commit: str
    job_id: str
    problems: tuple[str, ...]  # empty when the commit is sound

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


def verify_commit(repo: Repository, commit: str, prefix: str) -> Verdict | None:
    """None for a commit without job trailers; else what, if anything, is wrong with it."""
    info = repo.commit(commit)
    proof = trailers.read_pub_trailers(info.message, prefix)
    if proof is None:
        return None
    text = manifest_paragraph(info.message)
    if text is None:
        return Verdict(commit, proof.job_id, ("no manifest in the commit message",))
    try:
        manifest = Manifest.parse(text)
    except ManifestError as e:
        return Verdict(commit, proof.job_id, (f"manifest unreadable: {e}",))
    problems = []
    if manifest.sha256() != proof.manifest_sha256:
        problems.append("the manifest does not hash to the Manifest-Sha256 trailer")
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
    return Verdict(commit, proof.job_id, tuple(problems))
