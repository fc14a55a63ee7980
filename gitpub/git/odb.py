"""Reading git objects without dulwich: loose objects and packs, each answer proven by its id.

``git pub status`` reads a few dozen small objects (a job's state commit, its tree, its
``job.json``); importing dulwich to do it cost more than everything else the command does. This
reader answers from the files git writes — a loose object (``objects/xx/…``, zlib), or an entry
of a pack found through its version-2 ``.idx`` (deltas applied) — and returns an object only
after hashing it: the SHA-1 of ``<type> <size>\\0<content>`` must be the id asked for. So an
answer is the object or nothing; it cannot be a wrong object. Nothing (``None``) means "ask
dulwich": a missing object (maybe in an alternate, or gone), a damaged one, an index version it
does not know, a pack that does not match its index, anything unusual. It looks where dulwich
looks, in its order (the packs, then the loose object), so that it answers only where dulwich
would answer the same: a damaged pack entry is dulwich's error even when a loose copy is good.
Then ``Repository`` asks dulwich, which answers — or fails — exactly as it always did; the error
a person sees for a damaged object stays dulwich's.

The parsers (``parse_commit``, ``parse_tree``) are as strict in the same way: they accept the
plain shape gitpub's own objects have (no signature or other extra headers, octal modes, no
empty names) and read it as dulwich reads it; anything else is ``None`` and goes to dulwich.
A repository whose configuration is not plain (``gitconfig.is_plain``: extensions such as
``objectFormat``, includes) does not use this reader at all.
"""

from __future__ import annotations

import mmap
import os
import zlib

from gitpub.core.digest import sha1_hex

TYPE_CHECKING = False  # typing costs ~1.5 ms to import; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Iterator

_HEX = frozenset(b"0123456789abcdef")
_OCTAL = frozenset(b"01234567")
_DIGITS = frozenset(b"0123456789")
_TYPES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}
_OFS_DELTA, _REF_DELTA = 6, 7
_IDX_MAGIC = b"\377tOc"
#: Delta bases kept in memory while reading (bytes): a chain's bases are read once.
_CACHE_BYTES = 8 << 20
#: Deepest delta chain followed (git's default ``pack.depth`` is 50).
_MAX_DEPTH = 100


class Unreadable(Exception):
    """This reader cannot answer for an object (dulwich is asked instead)."""


def _varint_size(data: bytes | mmap.mmap, pos: int) -> tuple[int, int]:
    """A delta header's size (7 bits a byte, little-endian) and the position after it."""
    return _continued(data, pos, 0, 0, 0x80, "delta header")


def _continued(data: bytes | mmap.mmap, pos: int, size: int, shift: int, c: int,
               what: str) -> tuple[int, int]:
    """A size git writes 7 bits a byte, little-endian, while the high bit of the byte before
    (``c``) is set: ``size`` so far (its low ``shift`` bits), and the position after it."""
    while c & 0x80:
        if pos >= len(data):
            raise Unreadable(f"truncated {what}")
        c = data[pos]
        pos += 1
        size |= (c & 0x7F) << shift
        shift += 7
    return size, pos


def apply_delta(base: bytes, delta: bytes) -> bytes:
    """The object a git delta makes of ``base`` (``Documentation/gitformat-pack``)."""
    src_size, pos = _varint_size(delta, 0)
    dst_size, pos = _varint_size(delta, pos)
    if src_size != len(base):
        raise Unreadable("delta base has the wrong size")
    out = []
    n = len(delta)
    while pos < n:
        cmd = delta[pos]
        pos += 1
        if cmd & 0x80:  # copy from the base: offset and size in the bytes the bits name
            offset = size = 0
            for i in range(4):
                if cmd & (1 << i):
                    if pos >= n:
                        raise Unreadable("truncated delta")
                    offset |= delta[pos] << (8 * i)
                    pos += 1
            for i in range(3):
                if cmd & (1 << (4 + i)):
                    if pos >= n:
                        raise Unreadable("truncated delta")
                    size |= delta[pos] << (8 * i)
                    pos += 1
            size = size or 0x10000
            if offset + size > len(base):
                raise Unreadable("delta copies past its base")
            out.append(base[offset:offset + size])
        elif cmd:  # insert the next cmd bytes
            if pos + cmd > n:
                raise Unreadable("truncated delta")
            out.append(delta[pos:pos + cmd])
            pos += cmd
        else:
            raise Unreadable("delta opcode 0")
    result = b"".join(out)
    if len(result) != dst_size:
        raise Unreadable("delta result has the wrong size")
    return result


def _inflate(data: mmap.mmap, pos: int, size: int) -> bytes:
    """The ``size`` bytes of the zlib stream starting at ``pos``."""
    d = zlib.decompressobj()
    out = []
    chunk = size + 64
    while not d.eof:
        if pos >= len(data):
            raise Unreadable("truncated pack entry")
        piece = data[pos:pos + chunk]
        pos += len(piece)
        out.append(d.decompress(piece))
        chunk = max(chunk, 1 << 16)
    result = b"".join(out)
    if len(result) != size:
        raise Unreadable("pack entry has the wrong size")
    return result


class Pack:
    """One pack and its version-2 index, memory-mapped; closed with the reader."""

    def __init__(self, idx_path: str, pack_path: str) -> None:
        self.idx = _map(idx_path)
        try:
            self.pack = _map(pack_path)
        except BaseException:
            self.idx.close()
            raise
        idx = self.idx
        if idx[:4] != _IDX_MAGIC or int.from_bytes(idx[4:8], "big") != 2:
            self.close()
            raise Unreadable("not a version-2 pack index")
        if self.pack[:4] != b"PACK" or int.from_bytes(self.pack[4:8], "big") not in (2, 3):
            self.close()
            raise Unreadable("not a version-2 or 3 pack")
        self.count = int.from_bytes(idx[8 + 255 * 4:8 + 256 * 4], "big")
        self.names_at = 8 + 256 * 4
        self.offsets_at = self.names_at + self.count * 24  # after the names and the CRCs
        self.large_at = self.offsets_at + self.count * 4
        if len(idx) < self.large_at + 40:
            self.close()
            raise Unreadable("truncated pack index")
        #: The pack is not the one its index describes (another object count, another
        #: trailer): git refuses it ("does not match index"), dulwich raises on its first read
        #: from it. Its index still says which objects are there: those are dulwich's to read.
        self.damaged = len(self.pack) < 32 or self.pack[-20:] != idx[-40:-20] \
            or int.from_bytes(self.pack[8:12], "big") != self.count

    def close(self) -> None:
        self.idx.close()
        self.pack.close()

    def offset_of(self, raw: bytes) -> int | None:
        """Where object ``raw`` (20 bytes) starts in the pack, or None if it is not in it."""
        idx, first = self.idx, raw[0]
        lo = 0 if first == 0 else int.from_bytes(idx[4 + first * 4:8 + first * 4], "big")
        hi = int.from_bytes(idx[8 + first * 4:12 + first * 4], "big")
        while lo < hi:
            mid = (lo + hi) // 2
            at = self.names_at + mid * 20
            name = idx[at:at + 20]
            if name < raw:
                lo = mid + 1
            elif name > raw:
                hi = mid
            else:
                return self.offset_at(mid)
        return None

    def name_at(self, k: int) -> bytes:
        """The id (20 bytes) of the index's ``k``-th object (by id)."""
        at = self.names_at + k * 20
        return self.idx[at:at + 20]

    def offset_at(self, k: int) -> int:
        """Where the index's ``k``-th object starts in the pack."""
        idx = self.idx
        at = self.offsets_at + k * 4
        offset = int.from_bytes(idx[at:at + 4], "big")
        if offset & 0x80000000:
            at = self.large_at + (offset & 0x7FFFFFFF) * 8
            if at + 8 > len(idx) - 40:
                raise Unreadable("large offset outside the index")
            offset = int.from_bytes(idx[at:at + 8], "big")
        return offset

    def header(self, pos: int) -> tuple[int, int, int]:
        """(type number, size, position after the header) of the entry at ``pos``."""
        data = self.pack
        if pos < 12 or pos >= len(data) - 20:
            raise Unreadable("pack offset out of range")
        c = data[pos]
        size, pos = _continued(data, pos + 1, c & 15, 4, c, "pack entry header")
        return (c >> 4) & 7, size, pos

    def base_offset(self, entry: int, pos: int) -> tuple[int, int]:
        """An ``OFS_DELTA``'s base: its offset, and the position after the encoding."""
        data = self.pack
        c = data[pos]
        pos += 1
        back = c & 0x7F
        while c & 0x80:
            c = data[pos]
            pos += 1
            back = ((back + 1) << 7) | (c & 0x7F)
        if back <= 0 or back > entry:
            raise Unreadable("delta base outside the pack")
        return entry - back, pos


def _map(path: str) -> mmap.mmap:
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


#: ``ObjectReader._in_packs``: no pack has the object (then it may be loose).
_NOT_PACKED = (b"", b"")


class ObjectReader:
    """Objects of one object directory (``objects/``), read without dulwich.

    ``read`` answers ``(type, content)`` — proven by the id — or ``None`` ("ask dulwich").
    It looks where dulwich looks, in dulwich's order: the packs, then the loose object. So an
    object in a pack is answered only when every pack that has it gives it whole (dulwich may
    read any of them, and a damaged one is its error, even when a loose copy is good); and a
    pack whose index this reader cannot read (another version, truncated) could hold any
    object: then nothing is answered here at all.
    """

    def __init__(self, objects: str) -> None:
        self.objects = objects
        self._packs: dict[str, Pack | None] | None = None  # by .idx name; None: gone
        self._unindexed = False  # a pack is there whose index this reader cannot read
        self._cache: dict[tuple[int, int], tuple[int, bytes]] = {}
        self._cached = 0

    def close(self) -> None:
        for pack in (self._packs or {}).values():
            if pack is not None:
                pack.close()
        self._packs = None
        self._cache.clear()

    def read(self, sha: str) -> tuple[bytes, bytes] | None:
        """The type (``b"blob"``, …) and content of object ``sha``, or None."""
        if not _is_hex_id(sha):
            return None
        found = self._in_packs(sha, rescan=False)
        if found is _NOT_PACKED:
            found = self._loose(sha)
            if found is None:  # a pack written since the last look (git gc, fetch)
                found = self._in_packs(sha, rescan=True)
            elif not _proven(sha, found):
                found = None  # not the object asked for: dulwich says what is wrong with it
        return None if found is _NOT_PACKED else found

    def contains(self, sha: str) -> bool:
        """Whether the object is here, loose or packed (False: not known here)."""
        if not _is_hex_id(sha):
            return False
        if os.path.exists(os.path.join(self.objects, sha[:2], sha[2:])):
            return True
        raw = bytes.fromhex(sha)
        return any(p is not None and _safe_offset(p, raw) is not None
                   for p in self._all_packs(rescan=False))

    def sampled_commits(self, n: int, at_least: int) -> list[tuple[int, str]]:
        """(commit time, id) of the commits among about ``n`` objects spread evenly over the
        packs' indexes (sorted by id, so spread at random over the history); none when the
        packs hold fewer than ``at_least`` objects. For a guess (where to split a long walk):
        an entry this reader cannot read, or a commit of another shape, is passed over."""
        packs = [p for p in self._all_packs(rescan=False) if p is not None and not p.damaged]
        total = sum(p.count for p in packs)
        if total == 0 or total < at_least:
            return []
        found = []
        for pack in packs:
            share = min(pack.count, max(1, n * pack.count // total))
            for k in range(share):
                try:
                    commit = self._sampled(pack, k * pack.count // share)
                except (Unreadable, zlib.error, IndexError, ValueError, OverflowError,
                        RecursionError):
                    continue
                if commit is not None:
                    found.append(commit)
        return found

    def _sampled(self, pack: Pack, k: int) -> tuple[int, str] | None:
        offset = entry = pack.offset_at(k)
        kind, _, pos = pack.header(offset)
        for _ in range(_MAX_DEPTH):  # a delta's type is its base's: headers only
            if kind != _OFS_DELTA:
                break
            entry, _ = pack.base_offset(entry, pos)
            kind, _, pos = pack.header(entry)
        if kind != 1:  # not a commit (or a REF_DELTA: passed over)
            return None
        sha = pack.name_at(k).hex()
        found = _TYPES[1], self._resolve(pack, offset, 0)[1]
        parsed = parse_commit(found[1]) if _proven(sha, found) else None
        return None if parsed is None else (parsed[3], sha)

    def _loose(self, sha: str) -> tuple[bytes, bytes] | None:
        try:
            with open(os.path.join(self.objects, sha[:2], sha[2:]), "rb") as f:
                raw = f.read()
        except OSError:
            return None
        try:
            data = zlib.decompress(raw)
        except zlib.error:
            return None
        head, sep, body = data.partition(b"\0")
        kind, _, size = head.partition(b" ")
        if not sep or kind not in _TYPES.values() or not size or not set(size) <= _DIGITS \
                or int(size) != len(body):
            return None
        return kind, body

    def _all_packs(self, rescan: bool) -> Iterator[Pack | None]:
        if self._packs is None or rescan:
            self._scan()
        assert self._packs is not None
        return iter(list(self._packs.values()))

    def _scan(self) -> None:
        """Open the packs not opened yet (a pack that went away stays mapped: still valid).
        An index without its pack is no pack (git and dulwich skip it too); an index this
        reader cannot read makes it answer nothing (``_unindexed``)."""
        packs = self._packs if self._packs is not None else {}
        directory = os.path.join(self.objects, "pack")
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            names = []
        if "multi-pack-index" in names and not _midx_as_git_wrote_it(directory):
            self._unindexed = True
        for name in names:
            if not name.endswith(".idx") or name in packs:
                continue
            base = os.path.join(directory, name[:-4])
            try:
                packs[name] = Pack(base + ".idx", base + ".pack")
            except FileNotFoundError:
                packs[name] = None  # removed (git repack -d), or an index without its pack
            except (OSError, ValueError, Unreadable):
                packs[name] = None
                self._unindexed = True
        self._packs = packs

    def _in_packs(self, sha: str, rescan: bool) -> tuple[bytes, bytes] | None:
        """The object from the packs, proven, if every pack that has it gives it whole;
        ``_NOT_PACKED`` when none has it; None when dulwich must answer."""
        raw = bytes.fromhex(sha)
        packs = list(self._all_packs(rescan))
        if self._unindexed:
            return None
        answer: tuple[bytes, bytes] | None = _NOT_PACKED
        for pack in packs:
            if pack is None:
                continue
            try:
                offset = pack.offset_of(raw)
            except (Unreadable, IndexError, ValueError):
                return None
            if offset is None:
                continue
            found = None if pack.damaged else self._entry(pack, offset)
            if found is None or not _proven(sha, found):
                return None
            answer = found
        return answer

    def _entry(self, pack: Pack, offset: int) -> tuple[bytes, bytes] | None:
        try:
            kind, data = self._resolve(pack, offset, 0)
        except (Unreadable, zlib.error, IndexError, ValueError, OverflowError, RecursionError):
            return None
        return _TYPES[kind], data

    def _resolve(self, pack: Pack, offset: int, depth: int) -> tuple[int, bytes]:
        key = (id(pack), offset)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if depth > _MAX_DEPTH:
            raise Unreadable("delta chain too deep")
        kind, size, pos = pack.header(offset)
        if kind in _TYPES:
            found = kind, _inflate(pack.pack, pos, size)
        elif kind == _OFS_DELTA:
            base_at, pos = pack.base_offset(offset, pos)
            base_kind, base = self._resolve(pack, base_at, depth + 1)
            found = base_kind, apply_delta(base, _inflate(pack.pack, pos, size))
        elif kind == _REF_DELTA:
            base_id = pack.pack[pos:pos + 20].hex()
            base_found = self.read(base_id)
            if base_found is None:
                raise Unreadable("delta base not readable here")
            kinds = {v: k for k, v in _TYPES.items()}
            found = kinds[base_found[0]], apply_delta(base_found[1],
                                                      _inflate(pack.pack, pos + 20, size))
        else:
            raise Unreadable(f"pack entry type {kind}")
        if depth and self._cached + len(found[1]) <= _CACHE_BYTES:  # a base: may be reused
            self._cache[key] = found
            self._cached += len(found[1])
        return found


def _midx_as_git_wrote_it(directory: str) -> bool:
    """Whether ``multi-pack-index`` is one git wrote (its trailer the SHA-1 of the rest) of
    the shape dulwich reads (version 1, SHA-1, no base files). dulwich looks an object up in
    it before any pack: such a file names, for each object, a pack that has it — one of those
    ``_in_packs`` reads — but a damaged one sends dulwich anywhere, or makes it refuse every
    read; then nothing is answered here."""
    try:
        with open(os.path.join(directory, "multi-pack-index"), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return len(data) >= 32 and data[:4] == b"MIDX" and data[4:6] == b"\1\1" \
        and data[7] == 0 and sha1_hex(data[:-20]) == data[-20:].hex()


def _proven(sha: str, found: tuple[bytes, bytes]) -> bool:
    """Whether ``found`` (type, content) is object ``sha``: the SHA-1 of its header and
    content is that id."""
    kind, data = found
    return sha1_hex(b"%s %d\0%s" % (kind, len(data), data)) == sha


def _is_hex_id(sha: str) -> bool:
    return len(sha) == 40 and set(sha.encode("ascii", "replace")) <= _HEX


def _safe_offset(pack: Pack, raw: bytes) -> int | None:
    try:
        return pack.offset_of(raw)
    except (Unreadable, IndexError, ValueError):
        return None


# -- parsing: the plain shapes, read as dulwich reads them ------------------------------------

def is_object_id(value: bytes) -> bool:
    return len(value) == 40 and set(value) <= _HEX


def parse_commit(data: bytes) -> tuple[str, tuple[str, ...], bytes, int, bytes | None] | None:
    """(tree, parents, message, commit time, encoding) of a plain commit: ``tree``, ``parent``
    lines, ``author``, ``committer`` and an optional ``encoding``, in git's order, then a blank
    line and the message. None for any other shape (a signature, extra headers, no message
    separator, an unusual date): dulwich parses those."""
    end = data.find(b"\n\n")
    if end <= 0:
        return None
    tree: bytes | None = None
    parents: list[str] = []
    author = committer = encoding = None
    for line in data[:end].split(b"\n"):
        key, sep, value = line.partition(b" ")
        if not sep:
            return None
        if key == b"tree" and tree is None and is_object_id(value):
            tree = value
        elif key == b"parent" and tree is not None and author is None and is_object_id(value):
            parents.append(value.decode("ascii"))
        elif key == b"author" and tree is not None and author is None:
            author = value
        elif key == b"committer" and author is not None and committer is None:
            committer = value
        elif key == b"encoding" and committer is not None and encoding is None:
            encoding = value
        else:
            return None
    if tree is None or author is None or committer is None:
        return None
    when = _commit_time(committer)
    if when is None or _commit_time(author) is None:  # dulwich parses both dates
        return None
    return tree.decode("ascii"), tuple(parents), data[end + 2:], when, encoding


def _commit_time(committer: bytes) -> int | None:
    """The time of a ``Name <email> 1700000000 +0000`` line; None unless exactly that shape."""
    sep = committer.rfind(b"> ")
    if sep < 0:
        return None
    stamp, space, zone = committer[sep + 2:].partition(b" ")
    if not space or not stamp or not set(stamp) <= _DIGITS or len(zone) != 5 \
            or zone[:1] not in (b"+", b"-") or not set(zone[1:]) <= _DIGITS:
        return None
    return int(stamp)


def parse_tree(data: bytes) -> dict[bytes, tuple[int, str]] | None:
    """A tree's entries, name -> (mode, id), the last of two equal names winning (as in
    dulwich); None unless every entry is ``<octal mode> <non-empty name>\\0<20 bytes>``."""
    entries: dict[bytes, tuple[int, str]] = {}
    pos, n = 0, len(data)
    while pos < n:
        space = data.find(b" ", pos)
        if space <= pos:
            return None
        nul = data.find(b"\0", space)
        if nul <= space + 1 or nul + 21 > n:
            return None
        mode = data[pos:space]
        if not set(mode) <= _OCTAL:
            return None
        entries[data[space + 1:nul]] = (int(mode, 8), data[nul + 1:nul + 21].hex())
        pos = nul + 21
    return entries
