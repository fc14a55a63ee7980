"""An archive of N finished jobs (``refs/pub/archive``), built fast but in gitpub's format.

Folding 100,000 jobs through the CLI would take a day. Instead one job is published for real
(its record is the template) and the archive is written with ``git fast-import`` in two passes,
into a cached template repository (the corpus plus the archive's objects):

1. one *final state commit* per job, as a fold leaves them: a root commit whose tree holds
   ``job.json`` (gitpub's ``JobRecord.to_json``, state PUBLISHED, the key's
   ``job_id_for_key``), ``manifest`` and ``artifacts/<path>``; the marks give their ids;
2. the archive itself, as ``delivery.fold`` writes it: a root commit holding ``FORMAT``, then
   one fold commit per ``FOLD_LIMIT`` jobs whose first parent is the previous fold and whose
   other parents are its jobs' state commits, adding ``<id[0:2]>/<id[2:4]>/<id>/job.json`` (the
   very blob of the state) and ``state`` (the state commit's id).

A site's remote and working clone are local clones of that template (hard-linked objects);
the archive is then set as the remote's ``refs/pub/archive`` and as the site's tracking ref
(``refs/pub/remote/origin/archive``), exactly what a fetch leaves. A sample of entries is read
back with gitpub's ``Archive`` and ``JobStore.load_at`` as a check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from bench.common import BenchError, Harness, fresh_dir
from bench.fixtures import (
    SYNTH_TIME,
    _cached,
    article,
    commit_header,
    corpus_template,
    data_cmd,
    fast_import,
    make_site,
)

FOLD_LIMIT = 500  # as delivery.fold
TRACKING = "refs/pub/remote/origin/archive"
STATES = "refs/bench/archived-states"
INFO = "bench-archive.json"


def archive_template(h: Harness, count: int) -> tuple[Path, str, list[str]]:
    """The corpus with an archive of ``count`` jobs: (template, archive commit, job ids)."""
    def build(tmp: Path) -> None:
        h.git(tmp.parent, "clone", "-q", "--bare", str(corpus_template(h)), str(tmp))
        record = _template_record(h)
        marks = tmp / "state-marks"
        ids = _write_states(h, tmp, record, count, marks)
        fast_import(h, tmp, _archive_stream(ids, _read_marks(marks, len(ids))))
        marks.unlink()
        tip = h.git(tmp, "rev-parse", "refs/pub/archive").strip()
        h.git(tmp, "update-ref", "-d", STATES)
        (tmp / INFO).write_text(json.dumps({"tip": tip, "ids": ids}))

    template = _cached(h, f"archive-{count}", f"jobs={count} fold={FOLD_LIMIT}", build)
    data = json.loads((template / INFO).read_text())
    return template, str(data["tip"]), list(data["ids"])


def archive_site(h: Harness, count: int, name: str) -> tuple[Path, Path, list[str]]:
    """A site whose remote's archive holds ``count`` jobs, fetched here: (site, remote, ids)."""
    template, tip, ids = archive_template(h, count)
    site = make_site(h, template, fresh_dir(h.sites / name), "docs/bench")
    h.git(site.remote, "update-ref", "refs/pub/archive", tip)
    h.git(site.path, "update-ref", TRACKING, tip)
    _check(site.path, ids)
    return site.path, site.remote, ids


def _template_record(h: Harness) -> object:
    """A real PUBLISHED job's record, from a throwaway site of the corpus."""
    from bench.scenarios import Publisher
    from gitpub.git.repo import Repository
    from gitpub.store.jobs import JobStore

    site = make_site(h, corpus_template(h), fresh_dir(h.sites / "archive-template"),
                     "docs/bench")
    pub = Publisher(h, site, "archivetemplate")
    pub.gitpub()
    with Repository.discover(site.path) as repo:
        job = JobStore(repo).load(pub.job_ids[0])
    if job is None:
        raise BenchError("the template job vanished")
    return job.record


def _write_states(h: Harness, git_dir: Path, template: object, count: int,
                  marks: Path) -> list[str]:
    """Pass 1: the final state commits (mark ``2k+1``) and their ``job.json`` blobs (mark
    ``2k+2``), each commit a root commit (``reset`` before it)."""
    from gitpub.core.manifest import Manifest
    from gitpub.core.record import JobRecord, Target
    from gitpub.git.repo import MODE_FILE
    from gitpub.store.jobs import job_id_for_key

    assert isinstance(template, JobRecord)
    ids: list[str] = []
    who = b"gitpub <gitpub@localhost>"

    def stream() -> Iterator[bytes]:
        for k in range(count):
            key = f"bench-archive-{k:06d}"
            job_id = job_id_for_key(key)
            ids.append(job_id)
            path = f"docs/bench/archived-{k:06d}.md"
            content = article("archived", k)
            manifest = Manifest.build([(path, MODE_FILE, content)])
            created = SYNTH_TIME + 10**7 + k * 60
            record = template.evolve(
                job_id=job_id, idempotency_key=key,
                request_hash=f"{k:064x}", targets=(Target(path, "new"),),
                manifest_sha256=manifest.sha256(), created_at=float(created),
                updated_at=created + 1.5, commit_time=created, lease=None)
            event = {"v": 1, "from": "PUSHING", "to": "PUBLISHED", "phase": "push",
                     "reason": "pushed", "time": created + 1.5}
            message = f"PUBLISHED: push: pushed\n\n{json.dumps(event)}\n".encode()
            stamp = b"%s %d +0000\n" % (who, created + 1)
            yield b"blob\nmark :%d\n" % (2 * k + 2) + data_cmd(record.to_json())
            yield f"reset {STATES}\ncommit {STATES}\nmark :{2 * k + 1}\n".encode()
            yield b"author " + stamp + b"committer " + stamp + data_cmd(message)
            yield b"M 100644 :%d job.json\n" % (2 * k + 2)
            yield b"M 100644 inline manifest\n" + data_cmd(manifest.serialize())
            yield f"M 100644 inline artifacts/{path}\n".encode() + data_cmd(content)

    fast_import(h, git_dir, stream(), extra=[f"--export-marks={marks}"])
    return ids


def _read_marks(marks: Path, count: int) -> list[tuple[str, str]]:
    """(state commit, job.json blob) of each job, from the exported marks."""
    found = dict(line.split() for line in marks.read_text().splitlines())
    try:
        return [(found[f":{2 * k + 1}"], found[f":{2 * k + 2}"]) for k in range(count)]
    except KeyError as e:
        raise BenchError(f"fast-import lost an object: mark {e}") from None


def _archive_stream(ids: list[str], objects: list[tuple[str, str]]) -> Iterator[bytes]:
    """Pass 2: the archive's root commit, then one fold commit per ``FOLD_LIMIT`` jobs."""
    ref = "refs/pub/archive"
    who = b"gitpub <gitpub@localhost>"
    when = SYNTH_TIME + 10**7 + len(ids) * 60 + 3600
    yield commit_header(ref, when, "gitpub archive: finished jobs\n", who).replace(
        b"\nauthor ", b"\nmark :1\nauthor ", 1)
    yield b"M 100644 inline FORMAT\n" + data_cmd(b"gitpub-archive v1\n")
    for fold, start in enumerate(range(0, len(ids), FOLD_LIMIT)):
        chunk = list(zip(ids[start:start + FOLD_LIMIT], objects[start:start + FOLD_LIMIT],
                         strict=True))
        yield commit_header(ref, when + fold + 1,
                            f"gitpub archive: {len(chunk)} finished job(s)\n", who).replace(
            b"\nauthor ", f"\nmark :{fold + 2}\nauthor ".encode(), 1)
        yield f"from :{fold + 1}\n".encode()
        for _job_id, (state, _blob) in chunk:
            yield f"merge {state}\n".encode()
        for job_id, (state, blob) in chunk:
            base = f"{job_id[0:2]}/{job_id[2:4]}/{job_id}"
            yield f"M 100644 {blob} {base}/job.json\n".encode()
            yield f"M 100644 inline {base}/state\n".encode() + data_cmd(f"{state}\n".encode())


def _check(site: Path, ids: list[str]) -> None:
    from gitpub.core.states import State
    from gitpub.git.repo import Repository
    from gitpub.store.archive import Archive
    from gitpub.store.jobs import JobStore

    with Repository.discover(site) as repo:
        archive = Archive(repo, repo.read_ref(TRACKING))
        store = JobStore(repo)
        for job_id in ids[:: max(1, len(ids) // 20)]:
            entry = archive.lookup(job_id)
            if entry is None:
                raise BenchError(f"archived job {job_id} is not in the archive")
            if store.load_at(job_id, entry.state_commit).state != State.PUBLISHED or \
                    archive.record(entry).state != State.PUBLISHED:
                raise BenchError(f"archived job {job_id} does not load as PUBLISHED")
