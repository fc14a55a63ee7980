"""The per-repository lock of the network segment (fetch, push, probe of one delivery)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gitpub.core.files import ensure_pub_dir, pub_dir
from gitpub.git.locks import LockedError
from gitpub.git.repo import Repository

#: How long a delivery waits for another process's network segment (fetch and push timeouts).
DELIVERY_LOCK_WAIT = 600.0


@contextlib.contextmanager
def delivery_lock(repo: Repository, wait: float = DELIVERY_LOCK_WAIT,
                  progress: Callable[[str], None] | None = None) -> Iterator[None]:
    """The per-repository lock of the network segment.

    An ``flock``: the kernel releases it when its holder dies, however it dies, and its file
    descriptor is not inherited by the commands it runs (a ``git push`` left running by a
    killed gitpub does not keep it), so it never outlives its holder. A live holder is waited
    for at most ``wait`` seconds (its fetch and push have timeouts of their own); then
    ``LockedError``: the job is left for the next run. The holder's pid is written in the file,
    for the message.
    """
    path = ensure_pub_dir(pub_dir(repo.common_dir)) / "delivery.lock"
    with open(path, "a+b") as f:
        deadline = time.monotonic() + wait
        delay = 0.01
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockedError(
                        f"the delivery lock is held by another gitpub process "
                        f"({_holder(path)}) for more than {wait:.0f}s",
                        hint="it is still delivering; run the command again later") from None
                if progress is not None and delay == 0.01:
                    progress(f"waiting for the delivery lock ({_holder(path)})")
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        try:
            f.truncate(0)
            f.write(f"{os.getpid()}\n".encode())
            f.flush()
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _holder(path: Path) -> str:
    try:
        pid = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "pid unknown"
