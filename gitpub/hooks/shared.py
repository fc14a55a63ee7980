"""What the hooks' fast path and the rest of gitpub agree on: hook names, the shim marker, and
the fast path's cache of the configuration.

Stdlib-only and import-free (``os`` is imported by every interpreter at start-up anyway): the
fast path (``hooks.fast``) imports it on every commit. The cache format is written by
``hooks.work`` (which knows the configuration exactly) and read by ``hooks.fast`` (which must
not load it): keeping the format in one module keeps the two in step. Annotations name builtin
types only (as in ``hooks.fast`` and ``core.pushmark``): ``typing`` or ``collections.abc`` would
cost every commit ~1.5 ms to import.
"""

from __future__ import annotations

import os

HOOKS = ("pre-push", "post-commit")
LEGACY_SUFFIX = ".legacy"
SHIM_MARKER = b"# gitpub-hook-shim v"  # second line of every shim; followed by its version
CONFIG_FILE = ".gitpub.yaml"  # gitpub.config.model.CONFIG_FILE, not imported (cost)
CACHE_NAME = "hook-cache"  # in <git dir>/pub/
CACHE_HEADER = b"gitpub-hook-cache v2"  # v1 copied the file even when it held a secret
def is_shim(path: str) -> bool:
    """Whether ``path`` is one of our shims (of any version): its second line is the marker."""
    try:
        with open(path, "rb") as f:
            return is_shim_head(f.read(256))
    except OSError:
        return False


def is_shim_head(head: bytes) -> bool:
    lines = head.split(b"\n", 2)
    return len(lines) > 1 and lines[1].startswith(SHIM_MARKER)


def cache_path(git_dir: str) -> str:
    return os.path.join(git_dir, "pub", CACHE_NAME)


def cache_bytes(config: bytes | None, prefix: str, starts: list[str], *,
                digest_only: bool = False) -> bytes:
    """The cache for ``config`` (the file's bytes, None if absent): header, trailer prefix,
    the strings every content path starts with (each ended by NUL; ``""`` admits every path),
    then how the file is recognised: ``A`` (absent), ``P`` and its bytes, or — with
    ``digest_only``, for a file holding text the sanitizer would redact, which must not be
    copied — ``H`` and the SHA-256 of its bytes."""
    joined = b"".join(s.encode("utf-8", "surrogateescape") + b"\0" for s in starts)
    if config is None:
        tail = [b"A", b""]
    elif digest_only:
        import hashlib

        tail = [b"H", hashlib.sha256(config).hexdigest().encode()]
    else:
        tail = [b"P", config]
    return b"\n".join([CACHE_HEADER, prefix.encode(), joined, *tail])


def _same_file(kind: bytes, recorded: bytes, config: bytes | None) -> bool:
    if config is None:
        return (kind, recorded) == (b"A", b"")
    if kind == b"P":
        return recorded == config
    if kind == b"H":  # hashlib costs ~5 ms to import: only for files the cache cannot hold
        import hashlib

        return recorded == hashlib.sha256(config).hexdigest().encode()
    return False


def read_cache(git_dir: str, config: bytes | None) -> tuple[str, tuple[str, ...]] | None:
    """(trailer prefix, content path starts) if the cache was made from exactly ``config``."""
    try:
        with open(cache_path(git_dir), "rb") as f:
            data = f.read()
    except OSError:
        return None
    parts = data.split(b"\n", 4)
    if len(parts) != 5 or parts[0] != CACHE_HEADER or parts[2][-1:] not in (b"", b"\0"):
        return None
    if not _same_file(parts[3], parts[4], config):
        return None
    try:
        starts = parts[2].decode("utf-8", "surrogateescape").split("\0")[:-1]
        return parts[1].decode(), tuple(starts)
    except UnicodeDecodeError:
        return None
