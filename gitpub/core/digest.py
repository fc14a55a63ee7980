"""SHA-1 and SHA-256 at a command's start: the interpreter's own, not OpenSSL's.

``hashlib`` loads OpenSSL before it hands out a digest (~3 ms, every process); CPython's own
implementations — the modules hashlib itself falls back to — give the same digests and load at
once. ``status`` proves the few objects it reads by their SHA-1 (``git.odb``) and keys the
configuration's cache by the file's SHA-256 (``config.source``): these are for that. Without
the interpreter's modules (a build that left them out), hashlib's are used.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def _constructor(modules: tuple[str, ...], name: str) -> Callable[[bytes], Any]:
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]
        except (ImportError, AttributeError):
            continue
    import hashlib

    return getattr(hashlib, name)  # type: ignore[no-any-return]


_SHA1 = _constructor(("_sha1",), "sha1")
_SHA256 = _constructor(("_sha256", "_sha2"), "sha256")


def sha1_hex(data: bytes) -> str:
    return str(_SHA1(data).hexdigest())


def sha256_hex(data: bytes) -> str:
    return str(_SHA256(data).hexdigest())
