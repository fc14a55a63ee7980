"""Where this clone keeps its copies of a remote's refs: the remote's branches under
``refs/remotes/<remote>/`` (git's convention) and its job store (the remote's ``refs/pub/*``)
under ``refs/pub/remote/<remote>/``. Every fetch of the job store (``store.fetch``,
``store.fetchdir``) writes there, and every reader of the shared store (``store.shared``) reads
there."""

from __future__ import annotations

import hashlib

from gitpub.git.remote import Remote

#: The refs that mirror a remote's: its branches (``refs/remotes/<remote>/``) and its job store
#: (``store_prefix``). A command reads each once (``git.refs``, ``mirror_prefixes``).
MIRROR_PREFIXES = ("refs/remotes/", "refs/pub/remote/")


def store_prefix(remote: Remote) -> str:
    """Where the remote's job store (its ``refs/pub/*``) is kept here once fetched:
    ``refs/pub/remote/<remote>/`` (a URL given as the remote is named by its hash)."""
    name = remote.remote
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum() \
            or name.startswith("."):
        name = "url-" + hashlib.sha256(name.encode()).hexdigest()[:12]
    return f"refs/pub/remote/{name}/"
