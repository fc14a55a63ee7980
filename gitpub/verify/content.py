"""The proof of a publication through review: the branch holds the job's change, by content.

A job delivered through a pull/merge request (``delivery.review``) lands as whatever commit
the forge makes of its review branch: the job's own commit (a fast-forward, or a merge commit
on top of it), a rebased copy (new parent, new committer, same message), or a squash — one new
commit whose message the forge writes and which may carry none of the job's trailers. The
trailers are then no help, and the proof is the content. A commit C is the publication of such
a job when:

1. C is on the branch (reachable from its fetched tip) and newer than the job's base;
2. C's tree holds every file of the job's manifest, with its mode and SHA-256 (and no file at
   a path the manifest deletes);
3. against its first parent, as C git computes it — for a merge commit that is the merged
   change — C changes exactly the manifest's paths: no other file, no directory that holds
   none of them, no path that steers git, CI or gitpub; and its trees are ones
   ``git fsck --strict`` accepts (``verify.commit.tree_problems``: the same rules 3 to 5 as a
   commit with trailers);
4. C claims no job under the prefixes checked (a commit that claims one is judged by its
   trailers, ``verify.probe``: a commit with another job's trailers is that job's business).

A squash that also changed another file, or a reviewer's edit of the article, is therefore *not*
the job's publication: what was merged is not what the job's manifest says. The oldest such
commit is the publication (a revert and a re-application later are not a second one).

It is weaker than a trailer proof in one way only: it names no job id, so it is used only for
a job that went to review (its record says so), only after its base, and ``confirm`` checks a
record that names such a commit by these same rules (``content_problems``).
"""

from __future__ import annotations

from collections.abc import Sequence

from gitpub.core.manifest import Manifest, ManifestError, content_sha256
from gitpub.core.record import JobRecord
from gitpub.git.repo import MODE_TREE, Repository
from gitpub.git.walk import walk_since
from gitpub.proof import trailers
from gitpub.verify.commit import claims_of, tree_problems


def content_problems(repo: Repository, commit: str, manifest: Manifest) -> list[str]:
    """Why ``commit`` is not a publication of ``manifest`` by content (rules 2 and 3); empty
    when it is."""
    return tree_problems(repo, repo.commit(commit), manifest)


def record_content_problems(repo: Repository, commit: str, record: JobRecord,
                            manifest_raw: bytes | None) -> list[str]:
    """Why ``commit`` is not, by content, the publication a record of a job that went to
    review says it is (``manifest_raw``: the manifest its state holds); empty when it is. A
    record that did not go to review is never proven so."""
    if record.review is None:
        return ["the job did not go to review: only its trailers can prove a publication"]
    if manifest_raw is None:
        return ["the job's state holds no manifest"]
    try:
        manifest = Manifest.parse(manifest_raw)
    except ManifestError as e:
        return [f"the job's manifest is unreadable: {e}"]
    if manifest.sha256() != record.manifest_sha256:
        return ["the job's manifest is not the one its record names"]
    return content_problems(repo, commit, manifest)


def content_publication(repo: Repository, tips: Sequence[str], base: str | None,
                        manifest: Manifest, prefixes: Sequence[str]) -> str | None:
    """The oldest commit reachable from ``tips`` and not from ``base`` that is a publication of
    ``manifest`` by content (see the module docstring), or None."""
    digests: dict[str, str] = {}  # blob id -> SHA-256 of its content

    def holds(tree: str) -> bool:  # rule 2, cheaply, before any diff
        for entry in manifest.entries:
            found = repo.lookup(tree, entry.path)
            if entry.deleted:
                if found is not None and found.mode != MODE_TREE:
                    return False
                continue
            if found is None or found.mode != entry.mode:
                return False
            if found.sha not in digests:
                digests[found.sha] = content_sha256(repo.blob(found.sha))
            if digests[found.sha] != entry.sha256:
                return False
        return True

    proof = None
    for sha, message in walk_since(repo, tips, base):
        if trailers.mentions_job_id(message, prefixes) and claims_of(message, prefixes):
            continue  # judged by its trailers
        info = repo.commit(sha)
        if holds(info.tree) and not tree_problems(repo, info, manifest):
            proof = sha  # newest first: the last one found is the oldest
    return proof
