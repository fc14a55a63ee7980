"""A job store of N finished jobs, built fast but in gitpub's own format.

Creating 10,000 jobs through the CLI takes hours. Instead: one job is prepared and pushed for
real (so the site holds a genuine PUBLISHED job), its record is the template, and the other
N-1 jobs are written with ``git fast-import``. Each synthetic job is exactly what gitpub leaves
behind for a published job, as far as ``git pub status`` can see: a loose ref
``refs/pub/jobs/<uuid5 of its key>`` (gitpub's ``job_id_for_key``) pointing at a state commit
whose tree holds ``job.json`` (serialized by gitpub's ``JobRecord.to_json``, state PUBLISHED),
``manifest`` (gitpub's ``Manifest``), ``source/<path>`` and ``artifacts/<path>``, with gitpub's
event message; and, like a job that reached a terminal state, no entry in gitpub's index of
unfinished jobs (``refs/pub/active/``; checked against the real job). What is simplified: the
first-parent chain of earlier state commits (status reads only the tip). A sample of the jobs is
read back with gitpub's ``JobStore.load`` as a check.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from bench.common import BenchError, Harness
from bench.fixtures import article, commit_header, data_cmd, fast_import


def add_finished_jobs(h: Harness, site: Path, template_job_id: str, count: int,
                      article_dir: str) -> list[str]:
    """Write ``count`` PUBLISHED jobs modelled on the real job ``template_job_id``."""
    from gitpub.core.manifest import Manifest
    from gitpub.core.record import Target
    from gitpub.core.states import State
    from gitpub.git.repo import MODE_FILE, Repository
    from gitpub.store.jobs import JobStore, job_id_for_key

    with Repository.discover(site) as repo:
        tmpl = JobStore(repo).load(template_job_id)
        if tmpl is None or tmpl.state != State.PUBLISHED:
            raise BenchError(f"template job {template_job_id} is not PUBLISHED")
    base = tmpl.record
    # A pushed job also has its remote-tracking ref (refs/pub/remote/<remote>/jobs/<id>) and
    # its ref on the remote: mirrored below, after the import.
    leftovers = [p.name for p in (site / ".git" / "refs" / "pub").iterdir()
                 if p.is_dir() and p.name not in ("jobs", "remote")
                 and any(p.rglob(template_job_id))]
    if leftovers:  # gitpub keeps more per finished job than this fixture writes
        raise BenchError(f"the real finished job also has refs under refs/pub/{leftovers}: "
                         "update bench/jobstore.py to write them too")
    ids: list[str] = []

    def stream() -> Iterator[bytes]:
        start = int(base.created_at) - count * 60
        for k in range(count):
            key = f"bench-store-{k:05d}"
            job_id = job_id_for_key(key)
            ids.append(job_id)
            path = f"{article_dir}/store-{k:05d}.md"
            content = article("store", k)
            manifest = Manifest.build([(path, MODE_FILE, content)])
            created = float(start + k * 60)
            record = base.evolve(
                job_id=job_id, idempotency_key=key,
                request_hash=hashlib.sha256(f"request {key}".encode()).hexdigest(),
                source_sha256=hashlib.sha256(content).hexdigest(),
                targets=(Target(path, "new"),), manifest_sha256=manifest.sha256(),
                created_at=created, updated_at=created + 1.5, commit_time=int(created),
            )
            reason = (f"remote branch has {base.remote_commit} with the job's trailers")
            event = {"v": 1, "from": "PUSHING", "to": "PUBLISHED", "phase": "confirm",
                     "reason": reason, "time": created + 1.5}
            message = (f"PUBLISHED: confirm: {reason[:72]}\n\n{json.dumps(event)}\n")
            yield commit_header(f"refs/pub/jobs/{job_id}", int(created) + 1, message,
                                 b"gitpub <gitpub@localhost>")
            yield b"M 100644 inline job.json\n" + data_cmd(record.to_json())
            yield b"M 100644 inline manifest\n" + data_cmd(manifest.serialize())
            yield f"M 100644 inline source/{path}\n".encode() + data_cmd(content)
            yield f"M 100644 inline artifacts/{path}\n".encode() + data_cmd(content)

    fast_import(h, site / ".git", stream())
    _mirror(h, site, ids)
    _check(site, ids)
    return ids


def _mirror(h: Harness, site: Path, ids: list[str]) -> None:
    """As if each job had been pushed: its ref on the remote and its remote-tracking ref."""
    tracking = "refs/pub/remote/origin/jobs/"
    if not (site / ".git" / tracking).is_dir():
        raise BenchError(f"the real finished job has no {tracking} ref: update bench/jobstore.py")
    shas = dict(line.split(" ", 1)[::-1] for line in
                h.git(site, "for-each-ref", "--format=%(objectname) %(refname)",
                      "refs/pub/jobs/").splitlines())
    todo = "".join(f"create {tracking}{j} {shas[f'refs/pub/jobs/{j}']}\n" for j in ids)
    h.git(site, "update-ref", "--stdin", input=todo.encode())
    h.git(site, "push", "-q", "origin", "refs/pub/jobs/*:refs/pub/jobs/*")


def _check(site: Path, ids: list[str]) -> None:
    from gitpub.core.states import State
    from gitpub.git.repo import Repository
    from gitpub.store.jobs import JobStore

    with Repository.discover(site) as repo:
        store = JobStore(repo)
        for job_id in ids[:: max(1, len(ids) // 20)]:
            job = store.load(job_id)
            if job is None or job.state != State.PUBLISHED:
                raise BenchError(f"synthetic job {job_id} does not load as PUBLISHED")
        found = len(store.job_ids())
    if found < len(ids):
        raise BenchError(f"the store lists {found} jobs, expected at least {len(ids)}")
    packed = site / ".git" / "packed-refs"
    if packed.exists() and "refs/pub/jobs/" in packed.read_text():
        raise BenchError("job refs ended up packed; gitpub writes loose refs")
