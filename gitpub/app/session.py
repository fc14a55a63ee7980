"""Opening a repository for a command: the repository, its configuration, the job store.

Every command that works on jobs runs inside ``open_session``: the repository found from the
working directory, its ``.gitpub.yaml`` (cached under ``.git/pub/``), and a job store written on
behalf of this process. ``find_job`` turns what a person typed (an id or a prefix) into a job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gitpub.config.load import load_config
from gitpub.config.model import Config
from gitpub.core.errors import UsageError
from gitpub.core.states import State
from gitpub.git.repo import Repository
from gitpub.pipeline.context import Context
from gitpub.store.jobs import Job, JobStore
from gitpub.store.lease import Worker


@contextmanager
def open_session(where: Path, progress: Callable[[str], None], *,
                 keep_lease_in: frozenset[State] = frozenset()) -> Iterator[Context]:
    """The context of one command in the repository at ``where``; closed when done."""
    with Repository.discover(where) as repo:
        repo.notice = progress
        config = load_repo_config(repo)
        store = JobStore(repo, Worker.current(config.lease_seconds), keep_lease_in=keep_lease_in)
        yield Context(repo, store, config, progress=progress)


def load_repo_config(repo: Repository) -> Config:
    root = repo.work_tree if repo.work_tree is not None else repo.common_dir
    return load_config(root, repo.pub_dir)


def find_job(store: JobStore, ref: str) -> Job:
    """A job by id or unique id prefix."""
    if "/" not in ref and len(ref) == 36:
        exact = store.load(ref)
        if exact is not None:
            return exact
    ids = store.job_ids()
    matches = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref)]
    if not matches:
        raise UsageError(f"no job {ref!r}", hint="`git pub status` lists the jobs")
    if len(matches) > 1:
        raise UsageError(f"job id prefix {ref!r} is ambiguous ({len(matches)} jobs)")
    job = store.load(matches[0])
    if job is None:
        raise UsageError(f"no job {ref!r}")
    return job
