"""What a user asks for (a ``Request``), and finding or creating the one job it names.

The job id is derived from the idempotency key, so "a key names one job" is the atomicity of
creating one ref (``store.jobs``). The request's hash covers everything that changes the meaning
of the operation; the same key with another hash is refused (exit 3) and changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from gitpub.config.model import Config
from gitpub.core.allowlist import NO_RULES, Allowlist, Hit, keep, scan
from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import KeyReusedError, LostRace, UsageError
from gitpub.core.globs import shown
from gitpub.core.manifest import content_sha256
from gitpub.core.record import JobRecord, Target
from gitpub.core.sanitize import find_secrets, sanitize, sanitize_bytes
from gitpub.core.secretdiff import NOTHING, Inherited
from gitpub.core.states import Kind, Phase, State
from gitpub.git import paths as git_paths
from gitpub.git.repo import BLOB_MODES
from gitpub.pipeline.gates import Base
from gitpub.runtime.context import Context
from gitpub.store.archive import ARCHIVE
from gitpub.store.jobs import Job, job_id_for_key
from gitpub.store.mirror import store_prefix
from gitpub.store.shared import SharedView

REQUEST_VERSION = 1


@dataclass(frozen=True)
class Source:
    label: str  # where it came from, for messages ("-" for stdin)
    data: bytes


@dataclass(frozen=True)
class Request:
    """What the user asked for. Its hash covers everything that changes the meaning of the
    operation — contents, targets, whether a draft step turns sources into articles — and
    nothing else (no timestamps, no file names of the sources)."""

    targets: tuple[str, ...]
    sources: tuple[Source, ...]
    drafted: bool
    key: str | None = None
    kind: Kind = Kind.PUBLISH  # SYNC for content changes made outside gitpub
    #: Snapshot this commit instead of the remote-tracking branch (sync: the hand commit's
    #: parent). Recorded in the job, so a rerun after a crash snapshots the same base.
    base: str | None = None
    #: Sync only: the person's commit the job delivers (its changes are the job's targets, its
    #: blobs the artifacts: no sources), and the job that must be published before it.
    commit: str | None = None
    after: str | None = None

    def canonical(self) -> bytes:
        if self.kind == Kind.SYNC:
            # The commit names the request (its changes, author, message); ``after`` is how it
            # is ordered, not what it is, so it is left out.
            body: dict[str, object] = {"commit": self.commit, "paths": sorted(self.targets)}
        elif self.drafted:
            body = {
                "targets": sorted(self.targets),
                "inputs": [content_sha256(s.data) for s in self.sources],
            }
        else:
            body = {"files": sorted(
                [t, content_sha256(s.data)] for t, s in zip(self.targets, self.sources,
                                                            strict=True))}
        doc = {"v": REQUEST_VERSION, "operation": self.kind.value,
               "mode": "draft" if self.drafted else "direct", **body}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def request_hash(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    def effective_key(self) -> str:
        return self.key if self.key is not None else "auto-" + self.request_hash()[:32]


def validate_request(request: Request, config: Config) -> None:
    """Refuse (``UsageError``, exit 2) a request that must not become a job: before anything
    is stored. Each target must be a path git accepts on every platform, hold no secret and
    lie in the configuration's write scope; the key must hold no secret."""
    if not request.targets:
        raise UsageError("nothing to publish: give at least one --to PATH")
    for t in request.targets:
        check_target(request, config, t)
    if len(set(request.targets)) != len(request.targets):
        raise UsageError("the same --to path is given twice")
    if request.kind == Kind.SYNC:
        if request.commit is None or request.sources:
            raise UsageError("a sync job delivers one commit and has no sources")
        return
    if not request.drafted and len(request.sources) != len(request.targets):
        raise UsageError(
            f"{len(request.targets)} --to paths but {len(request.sources)} sources",
            hint="give one SOURCE per --to PATH (or a directory with a --to ending in '/')")
    if request.drafted and len(request.sources) != 1:
        raise UsageError("with a draft command, give exactly one SOURCE")
    if request.key is not None:
        if not request.key.strip():
            raise UsageError("--key must not be empty")
        secrets = find_secrets(request.key)
        if secrets:
            raise UsageError(
                f"--key {shown(sanitize(request.key))} holds what looks like a secret "
                f"({secrets[0].kind}); nothing was stored",
                hint="keys are stored and shown: use a plain name such as weekly-2024-05")


def _label(request: Request, path: str) -> str:
    shown_path = shown(sanitize(path))
    return f"--to {shown_path}" if request.kind == Kind.PUBLISH else f"path {shown_path}"


def check_target(request: Request, config: Config, path: str) -> None:
    """Raise ``UsageError`` if a job may not write ``path``."""
    secrets = find_secrets(path)
    if secrets:
        raise UsageError(
            f"{_label(request, path)}: the path holds what looks like a secret "
            f"({secrets[0].kind}); nothing was stored",
            hint="paths end up in commits, job records and the remote: rename the file")
    problem = git_paths.path_problem(path)
    if problem is not None:
        raise UsageError(f"{_label(request, path)}: {problem}",
                         hint="publish under a plain portable path, such as posts/<name>.md")
    problem = config.scope_problem(path)
    if problem is not None:
        raise UsageError(
            f"{_label(request, path)}: {problem}",
            hint="list it under `publish` in .gitpub.yaml (a steering path by its exact name)")


def check_base(ctx: Context, request: Request) -> None:
    """Refuse a target inside a submodule of the base snapshot (a gitlink in its tree)."""
    base = request.base
    if base is None:
        ref = ctx.base_ref()
        base = None if ref is None else ctx.repo.read_ref(ref)
    if base is None:
        return
    tree = ctx.repo.commit(base).tree
    for t in request.targets:
        submodule = git_paths.submodule_at(ctx.repo, tree, t)
        if submodule is not None:
            raise UsageError(
                f"{_label(request, t)}: {shown(sanitize(submodule))} is a submodule in the base "
                f"({base[:12]}); nothing was stored",
                hint="a submodule's files belong to its own repository: publish there")


def source_files(request: Request, base: Base | None = None) -> dict[str, bytes]:
    """The sources as stored in the job: sanitized, at ``source/<target>`` (or ``source/input``);
    known non-secrets (``core.allowlist``) are kept, since they are content to publish, and so
    are the findings a target's version in ``base`` already had in place (``core.secretdiff``:
    the branch's, not the job's). A sync job has none: the commit it delivers is kept alive by
    the job instead (unless it brings a secret: then the job keeps nothing of it)."""
    if request.kind == Kind.SYNC:
        return {}
    rules = NO_RULES if base is None else base.allowlist()
    if request.drafted:
        return {"source/input": sanitize_bytes(request.sources[0].data,
                                               keep(request.targets, rules))}
    return {f"source/{t}": sanitize_bytes(s.data, keep((t,), rules, _inherited(base, t)))
            for t, s in zip(request.targets, request.sources, strict=True)}


def _inherited(base: Base | None, target: str) -> Inherited:
    return NOTHING if base is None else base.inherited(target)


def source_hits(ctx: Context, request: Request) -> tuple[list[Hit], Base | None]:
    """The secrets in what the job is given, allowed or not, and the base that decided: the one
    the job will snapshot, its allowlist and its version of each target (read only when
    something was found). A draft's input is no file of the base: it is judged whole. A sync
    job is given a commit: what it adds or changes against its parent, and the commit's own
    message and author (published with it), are judged here, before the job keeps the commit
    alive, so that a secret in it never enters the job's history."""
    texts = _given(ctx, request)

    def hits(rules: Allowlist, base: Base | None) -> list[Hit]:
        return [hit for text, paths, label, target in texts
                for hit in scan(text, paths, rules, label,
                                NOTHING if target is None else _inherited(base, target))]

    if not hits(NO_RULES, None):
        return [], None
    ref = None if request.base is not None else ctx.base_ref()
    commit = request.base if request.base is not None else (
        None if ref is None else ctx.repo.read_ref(ref))
    base = Base(ctx.repo, commit)
    return hits(base.allowlist(), base), base  # AllowlistError: exit 2, nothing written


def _given(ctx: Context, request: Request) -> list[tuple[str, tuple[str, ...], str, str | None]]:
    """Each text the job is given: (text, the paths it is published as, how messages name it,
    the target whose base version it changes — None for a draft's input)."""
    def text(data: bytes) -> str:
        return data.decode("utf-8", "surrogateescape")

    if request.kind == Kind.SYNC:
        if request.commit is None or request.base is None:
            return []
        repo = ctx.repo
        changes = repo.diff_entries(repo.commit(request.base).tree,
                                    repo.commit(request.commit).tree)
        # the commit itself too: its message and author are published with it
        header = (text(repo.raw_commit(request.commit)), (),
                  f"commit {request.commit[:12]} (message or author)", None)
        return [header, *((text(repo.blob(c.new.sha)), (c.path,), c.path, c.path)
                          for c in changes if c.new is not None and c.new.mode in BLOB_MODES)]
    if request.drafted:
        return [(text(request.sources[0].data), request.targets, request.sources[0].label,
                 None)]
    return [(text(s.data), (t,), t, t)
            for t, s in zip(request.targets, request.sources, strict=True)]


def ensure_job(ctx: Context, request: Request) -> tuple[Job, bool]:
    """The job for the request's key: created now (True) or found (False). Exit 3 on a key
    that names a different request; nothing is written then."""
    validate_request(request, ctx.config)
    key = request.effective_key()
    job_id = job_id_for_key(key)
    wanted = request.request_hash()
    remote = ctx.remote()
    # The job's ref, the base's tracking ref and the archive in one git (none where the
    # command listed them already, ``app.common.read_first``): kept for the command where
    # it keeps them (``git.refs``); the job's ref is created by compare-and-swap.
    ctx.repo.read_together([ctx.store.ref_name(job_id), remote.tracking_ref,
                            store_prefix(remote) + ARCHIVE])
    for _ in range(3):
        job = ctx.store.load(job_id) or _archived(ctx, job_id)
        if job is not None:
            if job.record.request_hash != wanted:
                raise KeyReusedError(
                    f"idempotency key {sanitize(key)!r} already names job {job_id} "
                    "with different content or targets",
                    hint="use a new --key for a new request; nothing was changed")
            return job, False
        check_base(ctx, request)
        try:
            return _create(ctx, request, key, job_id, wanted), True
        except LostRace:
            continue  # another process created it first: read theirs
    raise LostRace(job_id)


def _archived(ctx: Context, job_id: str) -> Job | None:
    """The job as the archive last fetched holds it: a finished job folded there (its ref gone
    from this clone too) is still the job its key names. Offline: the tracking archive only."""
    remote = ctx.remote()
    return SharedView(ctx.store, store_prefix(remote)).archived_job(job_id)


def _create(ctx: Context, request: Request, key: str, job_id: str, request_hash: str) -> Job:
    hits, base = source_hits(ctx, request)
    files = source_files(request, base)
    findings = [sanitize(h.problem()) for h in hits if h.allowed_by is None]
    allowed = [sanitize(h.use()) for h in hits if h.allowed_by is not None]
    now = ctx.clock()
    record = JobRecord(
        job_id=job_id,
        idempotency_key=sanitize(key),
        request_hash=request_hash,
        state=State.RECEIVED,
        node=ctx.config.node,
        created_at=now,
        updated_at=now,
        source_sha256=hashlib.sha256(b"".join(
            content_sha256(d).encode() for d in files.values())).hexdigest(),
        drafted=request.drafted,
        kind=request.kind,
        requested_base=request.base,
        sync_commit=request.commit,
        sync_after=request.after,
        targets=tuple(Target(t, "new") for t in request.targets),
        max_attempts=ctx.config.retry.max_attempts,
        phases={Phase.SOURCE_SCAN: "secret: " + "; ".join(findings)} if findings else {},
    )
    reason = ("accepted " + ", ".join(request.targets) if request.commit is None
              else f"accepted commit {request.commit}: {', '.join(request.targets)}") + (
        f"; allowed as known non-secrets: {'; '.join(allowed)}" if allowed else "")
    job = ctx.store.create(record, files, reason=reason,
                           keep_alive=() if request.commit is None or findings
                           else (request.commit,))
    crash_point("prepare.job-created")
    return job
