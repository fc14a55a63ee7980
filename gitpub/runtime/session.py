"""Opening a repository for a command: the repository, its configuration, the job store.

``open_repository`` opens the repository git would use from a directory, with gitpub's lock
policy (``runtime.pubdir``: stale locks healed, a line about it in the command's progress).
Every command that works on jobs runs inside ``open_session``: the repository found from the
working directory as git finds it, its ``.gitpub.yaml`` (in a bare repository, the file
committed on the configured branch), read and validated at once, and a job store written on
behalf of this process. ``find_job`` turns what a person typed (an id or a prefix) into a job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gitpub.core.errors import UsageError
from gitpub.core.files import pub_dir
from gitpub.core.states import State
from gitpub.git.repo import Repository
from gitpub.runtime.context import Context
from gitpub.runtime.pubdir import Healer
from gitpub.runtime.repoconfig import load_repo_config
from gitpub.store.jobs import Job, JobStore
from gitpub.store.lease import Worker
from gitpub.store.mirror import MIRROR_PREFIXES


def open_repository(where: Path, progress: Callable[[str], None]) -> Repository:
    """The repository git would use in ``where``, with gitpub's lock policy (close it)."""
    repo = Repository.discover(where)
    repo.mirror_prefixes = MIRROR_PREFIXES  # read once per command: see git.refs
    repo.lock_policy = Healer(repo.common_dir, repo.common_dir / "pub", progress,
                              work_tree=repo.work_tree, readers=repo.reader_pids)
    return repo


@contextmanager
def open_session(where: Path, progress: Callable[[str], None], *,
                 keep_lease_in: frozenset[State] = frozenset()) -> Iterator[Context]:
    """The context of one command in the repository at ``where``; closed when done."""
    with open_repository(where, progress) as repo:
        pub_dir(repo.common_dir)  # a file there: every command says so, with the fix
        config = load_repo_config(repo)
        store = JobStore(repo, Worker.current(config.lease_seconds),
                         keep_lease_in=keep_lease_in)
        yield Context(repo, store, config, progress=progress)


def find_job(store: JobStore, ref: str) -> Job:
    """A job by id or unique id prefix of at least ``MIN_PREFIX`` characters (as git's shortest
    abbreviation): an empty prefix — an unset variable in a script — matches every job, and
    must never pick one."""
    if len(ref.strip()) < MIN_PREFIX:
        raise UsageError(f"job id {ref!r} is too short: give at least {MIN_PREFIX} characters "
                         "of it", hint="`git pub status` lists the jobs with their ids")
    if "/" not in ref and len(ref) == 36:
        exact = store.load(ref)
        if exact is not None:
            return exact
    ids = store.job_ids()
    matches = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref)]
    if not matches:
        raise UsageError(f"no job {ref!r}", hint="`git pub status` lists the jobs")
    if len(matches) > 1:
        raise UsageError(f"job id prefix {ref!r} is ambiguous ({len(matches)} jobs)",
                         hint="give more of the id; `git pub status` lists the jobs")
    job = store.load(matches[0])
    if job is None:
        raise UsageError(f"no job {ref!r}", hint="`git pub status` lists the jobs")
    return job


#: The fewest characters of a job id that name it (git's ``core.abbrev`` minimum).
MIN_PREFIX = 4
