"""``git pub metrics``: the Prometheus text of the job store and the channels."""

from __future__ import annotations

from pathlib import Path

from gitpub.app.results import Progress
from gitpub.channels.metrics import gather, render
from gitpub.runtime.session import open_session
from gitpub.store.mirror import store_prefix


def metrics(where: Path, progress: Progress) -> str:
    """The Prometheus text of ``git pub metrics``."""

    with open_session(where, progress) as ctx:
        return render(gather(ctx.store, store_prefix(ctx.remote())))
