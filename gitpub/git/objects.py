"""git's object formats as values: ids, trees and commits to and from their bytes.

C git reads every object for gitpub (``git.catfile``) and dulwich writes them (``git.writing``);
what is left here is the part both sides of that need from us: which hash the repository uses
(SHA-1 or SHA-256: ``extensions.objectFormat``), a tree's entries and a commit's headers read
from the bytes git hands over, and the bytes of the trees and commits gitpub makes. Trees are
parsed leniently (a damaged one is ``CorruptStateError``), never "fixed": whether a tree is one
``git fsck --strict`` accepts is ``git.treecheck``'s question, asked of the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from gitpub.core.errors import CorruptStateError
from gitpub.git.values import MODE_TREE, Identity

_KIND = 0o170000


class ObjectFormat(NamedTuple):
    """The repository's hash: ``sha1`` (40 hex digits) or ``sha256`` (64)."""

    name: str
    raw_length: int

    @property
    def hex_length(self) -> int:
        return 2 * self.raw_length

    @property
    def zero(self) -> str:
        """The id git uses for "no object" (a ref that must not exist yet)."""
        return "0" * self.hex_length

    def object_id(self, kind: bytes, body: bytes) -> str:
        return hashlib.new(self.name, b"%s %d\0%s" % (kind, len(body), body)).hexdigest()

    @property
    def empty_tree(self) -> str:
        return self.object_id(b"tree", b"")

    def is_id(self, text: str) -> bool:
        return len(text) == self.hex_length and all(c in "0123456789abcdef" for c in text)


SHA1 = ObjectFormat("sha1", 20)
SHA256 = ObjectFormat("sha256", 32)
FORMATS = {f.name: f for f in (SHA1, SHA256)}


def is_object_id(text: str) -> bool:
    """An object id of either hash, in git's lower-case hex."""
    return SHA1.is_id(text) or SHA256.is_id(text)


# -- trees -----------------------------------------------------------------------------------


class TreeEntry(NamedTuple):
    name: bytes
    mode: int
    sha: str


def parse_tree(data: bytes, fmt: ObjectFormat, oid: str = "") -> list[TreeEntry]:
    """A tree's entries in the order stored; ``CorruptStateError`` for bytes that are no tree
    (a torn entry, a mode that is not octal)."""
    out: list[TreeEntry] = []
    pos, n, width = 0, len(data), fmt.raw_length
    while pos < n:
        space = data.find(b" ", pos)
        nul = data.find(b"\0", space + 1) if space > pos else -1
        if nul < 0 or nul + 1 + width > n:
            raise CorruptStateError(f"tree {oid} is damaged (a torn entry)",
                                    hint="`git fsck` lists the damaged objects")
        digits = data[pos:space]  # the digits 0-7 only, as git's parser (int() takes more)
        if digits.strip(b"01234567"):
            raise CorruptStateError(f"tree {oid} is damaged (a mode that is not octal)",
                                    hint="`git fsck` lists the damaged objects")
        mode = int(digits, 8)
        out.append(TreeEntry(data[space + 1:nul], mode, data[nul + 1:nul + 1 + width].hex()))
        pos = nul + 1 + width
    return out


def git_order(name: bytes, mode: int) -> bytes:
    """A tree entry's sort key in git's order: a directory compares as ``name/``."""
    return name + b"/" if mode & _KIND == MODE_TREE else name


def tree_body(entries: Iterable[TreeEntry]) -> bytes:
    """A tree's content: ``<octal mode> <name>\\0<raw id>`` per entry, in git's order."""
    ordered = sorted(entries, key=lambda e: git_order(e.name, e.mode))
    return b"".join(b"%o %s\0%s" % (e.mode, e.name, bytes.fromhex(e.sha)) for e in ordered)


# -- commits ---------------------------------------------------------------------------------


class ParsedCommit(NamedTuple):
    """A commit's headers (in order; a continued header's lines joined by ``\\n``) and
    message."""

    headers: tuple[tuple[bytes, bytes], ...]
    message: bytes

    def first(self, key: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k == key), None)

    def all(self, key: bytes) -> list[bytes]:
        return [v for k, v in self.headers if k == key]

    @property
    def commit_time(self) -> int:
        """The committer's time (0 when git could not read it either)."""
        return _stamp(self.first(b"committer") or b"")


def parse_commit(data: bytes, oid: str = "") -> ParsedCommit:
    """Headers and message, as git separates them (the first empty line); a header line that
    starts with a space continues the one before (a signature)."""
    head, _, message = data.partition(b"\n\n")
    headers: list[tuple[bytes, bytes]] = []
    for line in head.split(b"\n"):
        if line.startswith(b" ") and headers:
            key, value = headers[-1]
            headers[-1] = (key, value + b"\n" + line[1:])
            continue
        key, _, value = line.partition(b" ")
        headers.append((key, value))
    parsed = ParsedCommit(tuple(headers), message)
    if parsed.first(b"tree") is None or parsed.headers[0][0] != b"tree":
        raise CorruptStateError(f"commit {oid} is damaged (no tree header)",
                                hint="`git fsck` lists the damaged objects")
    return parsed


def _stamp(ident: bytes) -> int:
    """The time of ``Name <email> 1700000000 +0000``."""
    when = ident[ident.rfind(b">") + 1:].split()
    try:
        return int(when[0]) if when else 0
    except ValueError:
        return 0


def signature_line(who: Identity, when: int, offset: int = 0) -> bytes:
    """``Name <email> <time> <+hhmm>`` (``offset``: seconds east of UTC)."""
    sign = "-" if offset < 0 else "+"
    minutes = abs(offset) // 60
    return who.as_bytes() + f" {when} {sign}{minutes // 60:02d}{minutes % 60:02d}".encode()


def commit_body(tree: str, parents: Sequence[str], author: bytes, committer: bytes,
                message: bytes, encoding: bytes | None = None) -> bytes:
    """A commit's content: tree, parents, author and committer lines (whole, with their
    dates), the encoding header when there is one, a blank line, the message."""
    lines = [b"tree " + tree.encode("ascii"), *(b"parent " + p.encode("ascii") for p in parents),
             b"author " + author, b"committer " + committer]
    if encoding is not None:
        lines.append(b"encoding " + encoding)
    return b"\n".join(lines) + b"\n\n" + message
