"""What ``git fsck --strict`` refuses in one tree object, read from the object's raw bytes.

Why: dulwich parses a tree into a dictionary, so of two entries with the same name it keeps the
last, while C git's checkout writes *both* into the index (a duplicated ``posts`` directory
brings files nobody verified into every clone). A verifier that reads trees through dulwich
must first make sure the tree means one thing to everyone: exactly the trees ``git fsck``
accepts. The rules, from C git's ``fsck.c`` (``fsck_tree``, ``verify_ordered``):

- every entry is ``<mode> SP <name> NUL <20-byte id>``; nothing truncated (``badTree``);
- the mode is one of ``100644``, ``100755``, ``120000``, ``40000``, ``160000`` — not zero-padded
  (``zeroPaddedFilemode``) and not ``100664`` (which ``--strict`` refuses: ``badFilemode``);
- the name is not empty, holds no ``/``, is not ``.`` or ``..``, and is not ``.git`` in any
  spelling NTFS or HFS+ resolve to it (``hasDotgit``, ``core.paths.is_dotgit``);
- no entry points at the null id (``nullSha1``);
- a symbolic link is never ``.gitmodules``, ``.gitattributes``, ``.gitignore`` or ``.mailmap``
  (``gitmodulesSymlink`` and friends);
- entries are sorted in git's order (a tree's name compares as if it ended in ``/``), strictly,
  and no name appears twice — also not as a file and a directory further apart
  (``treeNotSorted``, ``duplicateEntries``).

Standard library and ``core.paths`` only: a pure function of bytes, proven against C git's
``fsck`` in ``tests/test_treecheck.py``.
"""

from __future__ import annotations

from functools import lru_cache

from gitpub.core.paths import is_dotgit, symlink_problem

MODES = frozenset({b"100644", b"100755", b"120000", b"40000", b"160000"})
#: How many entry names' answers are remembered (``_name_problem``, ``_link_problem``).
_NAMES = 1 << 14


def parse_entries(raw: bytes, id_bytes: int = 20) -> list[tuple[bytes, bytes, bytes]] | None:
    """(mode, name, id) of every entry, or None when the bytes are no tree (``id_bytes``: 20
    in a SHA-1 repository, 32 in a SHA-256 one)."""
    out, pos = [], 0
    while pos < len(raw):
        space = raw.find(b" ", pos)
        nul = raw.find(b"\0", space + 1) if space >= 0 else -1
        if space <= pos or nul < 0 or nul + 1 + id_bytes > len(raw):
            return None
        out.append((raw[pos:space], raw[space + 1:nul], raw[nul + 1:nul + 1 + id_bytes]))
        pos = nul + 1 + id_bytes
    return out


def _is_tree(mode: bytes) -> bool:
    try:
        return int(mode, 8) & 0o170000 == 0o040000
    except ValueError:
        return False


def _entry_problem(mode: bytes, name: bytes, oid: bytes, padded_ok: bool) -> str | None:
    if mode.startswith(b"0") and not (padded_ok and mode.lstrip(b"0") in MODES):
        return f"entry {_shown(name)!r}: zero-padded mode {mode.decode('ascii', 'replace')}"
    if mode.lstrip(b"0") not in MODES:
        return f"entry {_shown(name)!r}: mode {mode.decode('ascii', 'replace')} " \
            "is not a git file mode"
    problem = _name_problem(name)
    if problem is not None:
        return problem
    if not oid.strip(b"\0"):
        return f"entry {_shown(name)!r}: the null object id"
    if mode == b"120000":
        return _link_problem(name)
    return None


def _shown(name: bytes) -> str:
    return name.decode("utf-8", "backslashreplace")


@lru_cache(maxsize=_NAMES)
def _name_problem(name: bytes) -> str | None:
    """What is wrong with an entry's name whatever its mode and id (a pure function of the
    name: remembered, as the same names come again in every version of a tree)."""
    if not name:
        return "an entry with an empty name"
    if b"/" in name:
        return f"entry {_shown(name)!r}: a name holding '/'"
    if name in (b".", b".."):
        return f"an entry named {_shown(name)!r}"
    if is_dotgit(name.decode("utf-8", "surrogateescape")):
        return f"entry {_shown(name)!r}: .git in a spelling NTFS or HFS+ resolve to it"
    return None


@lru_cache(maxsize=_NAMES)
def _link_problem(name: bytes) -> str | None:
    """What is wrong with a symbolic link of this name (a pure function of the name)."""
    problem = symlink_problem(name.decode("utf-8", "surrogateescape"))
    return None if problem is None else f"entry {_shown(name)!r}: {problem}"


def tree_problems(raw: bytes, id_bytes: int = 20, *, padded_ok: bool = False) -> list[str]:
    """What ``git fsck --strict`` refuses in the tree whose raw object content is ``raw``
    (empty when nothing). ``padded_ok``: but a zero-padded mode (``040000``), which any
    rewrite of the tree writes unpadded without changing what it means (old git wrote them)."""
    entries = parse_entries(raw, id_bytes)
    if entries is None:
        return ["not a well-formed tree object"]
    problems = [p for e in entries if (p := _entry_problem(*e, padded_ok)) is not None]
    seen: set[bytes] = set()
    previous: tuple[bytes, bytes] | None = None  # (sort key, name) of the entry before
    for mode, name, _ in entries:
        if name in seen:
            problems.append(f"entry {name.decode('utf-8', 'backslashreplace')!r} appears twice")
        seen.add(name)
        key = name + b"/" if _is_tree(mode) else name
        if previous is not None and key <= previous[0] and name != previous[1]:
            problems.append("entries are not in git's order")
        previous = (key, name)
    return list(dict.fromkeys(problems))
