"""WOFF2 encoding from cached per-glyph transforms: the costly half of a font-only regeneration.

fontTools' ``WOFF2Writer`` re-encodes every glyph of a subset (decoding each outline and packing
its points as triplets) on every save: the costliest pure-Python step after subsetting. Here the
same steps run in the same order — the tests hold the output to fontTools' byte for byte — but
each glyph's transformed encoding comes from a per-face store (:class:`FaceStore`, persisted by
``fonts.cache``), so a subset that adds one article's characters encodes only that
article's new glyphs and otherwise concatenates. Split from ``fonts.subset``, which decides
*what* to subset and caches; this module only encodes. fontTools and brotli are imported
where they are used, as in ``fonts.subset``: only a job with fonts to subset loads them.
"""

from __future__ import annotations

import hashlib
import marshal
import struct
import threading
import time
from array import array

from gitpub.core.errors import FontError
from gitpub.fonts.profile import Piece, Progress, SubsetProfile

#: Bump when the WOFF2 glyph encoder changes (it keys the glyph encoding files).
ENCODER_VERSION = 1



def woff2_from_sfnt(
    sfnt: bytes,
    store: FaceStore,
    profile: SubsetProfile,
    report: Progress,
    timings: dict[str, float],
) -> bytes:
    """The WOFF2 file fontTools' ``WOFF2Writer`` makes of ``sfnt``, with the profile's brotli.

    The same steps in the same order (the tests hold the output to fontTools' byte for byte):
    drop ``DSIG``; re-pad glyphs to 4 bytes and rebuild ``loca``; set ``head`` flag bit 11; sort
    the tables by tag; checksum them as an SFNT would be laid out, for ``checkSumAdjustment``;
    transform ``glyf`` (``loca`` becomes empty); brotli the concatenation. The difference is where
    the glyf transform comes from: per glyph from ``store``, encoding only glyphs it lacks.
    """
    import brotli  # type: ignore[import-untyped]
    from fontTools.ttLib.woff2 import (  # type: ignore[import-untyped]
        getKnownTagIndex,
        packBase128,
    )

    t = time.perf_counter()
    version, tables = _read_sfnt(sfnt)
    tables.pop("DSIG", None)
    if "head" not in tables or len(tables["head"]) < 54:
        raise FontError("the subset has no usable 'head' table")
    head = bytearray(tables["head"][:54])
    transformed: dict[str, bytes] = {}
    if version != b"OTTO" and "glyf" in tables:
        glyphs, glyf, loca, index_format = _normalise_glyf(tables, head)
        tables["glyf"], tables["loca"] = glyf, loca
        struct.pack_into(">h", head, 50, index_format)
        encoded = _transform_glyf(glyphs, index_format, store, report, timings)
        if encoded is not None:
            transformed["glyf"], transformed["loca"] = encoded, b""
    flags = struct.unpack_from(">H", head, 16)[0]
    struct.pack_into(">H", head, 16, flags | 1 << 11)
    tables["head"] = bytes(head)

    tags = sorted(tables)
    offset = 12 + 16 * len(tags)
    records: list[bytes] = []
    checksum_total = 0
    for tag in tags:
        data = tables[tag]
        checksum = _checksum(data[:8] + b"\0\0\0\0" + data[12:] if tag == "head" else data)
        checksum_total += checksum
        records.append(struct.pack(">4sLLL", tag.encode("latin-1"), checksum, offset, len(data)))
        offset += (len(data) + 3) & ~3
    total_sfnt_size = offset
    exponent = max(len(tags).bit_length() - 1, 0)
    search_range = (1 << exponent) * 16
    directory = struct.pack(
        ">4sHHHH", version, len(tags), search_range, exponent,
        max(0, len(tags) * 16 - search_range),
    ) + b"".join(records)
    adjustment = (0xB1B0AFBA - (checksum_total + _checksum(directory))) & 0xFFFFFFFF

    payload: list[bytes] = []
    entries: list[bytes] = []
    for tag in tags:
        data = tables[tag]
        stream = transformed.get(tag, data)
        if tag == "head":
            stream = data[:8] + struct.pack(">L", adjustment) + data[12:]
        payload.append(stream)
        flags = getKnownTagIndex(tag)
        if tag in ("glyf", "loca") and tag not in transformed:
            flags |= 3 << 6  # the null transform of glyf/loca is version 3
        entry = bytes([flags])
        if flags & 0x3F == 0x3F:
            entry += tag.encode("latin-1")
        entry += packBase128(len(data))
        if tag in transformed:
            entry += packBase128(len(stream))
        entries.append(entry)
    raw = b"".join(payload)
    timings["assemble"] = time.perf_counter() - t - timings.get("encode", 0.0)

    quality = profile.brotli_quality
    report.stage(
        f"font subset: compressing {len(raw) / 1000:.0f} KB (WOFF2, brotli quality {quality})",
        estimate=len(raw) * _BROTLI_SECONDS_PER_BYTE.get(quality, 1e-8),
    )
    t = time.perf_counter()
    compressed: bytes = brotli.compress(
        raw, mode=brotli.MODE_FONT, quality=quality, lgwin=profile.brotli_window
    )
    timings["brotli"] = time.perf_counter() - t

    table_directory = b"".join(entries)
    length = (48 + len(table_directory) + len(compressed) + 3) & ~3
    major, minor = struct.unpack_from(">HH", tables["head"], 4)
    header = struct.pack(
        ">4s4sLHHLLHHLLLLL", b"wOF2", version, length, len(tags), 0, total_sfnt_size,
        len(compressed), major, minor, 0, 0, 0, 0, 0,
    )
    out = header + table_directory + compressed
    return out + b"\0" * (-len(out) % 4)


# Rough brotli speeds in MODE_FONT on a font payload, for progress estimates only.
_BROTLI_SECONDS_PER_BYTE = {11: 2.2e-6, 10: 0.8e-6, 9: 1.2e-7}


def _read_sfnt(sfnt: bytes) -> tuple[bytes, dict[str, bytes]]:
    """The SFNT version tag and the tables (tag → data) of a TrueType/OpenType font file."""
    version, count = struct.unpack_from(">4sH", sfnt)
    tables: dict[str, bytes] = {}
    for i in range(count):
        tag, _, offset, length = struct.unpack_from(">4sLLL", sfnt, 12 + 16 * i)
        if offset + length > len(sfnt):
            raise FontError(f"the subset's {tag!r} table is truncated")
        tables[tag.decode("latin-1")] = sfnt[offset : offset + length]
    return version, tables


def _checksum(data: bytes) -> int:
    """The OpenType table checksum: the sum of big-endian uint32 words, zero-padded."""
    padded = data + b"\0" * (-len(data) % 4)
    words = array("I")
    if words.itemsize != 4:  # pragma: no cover - every platform CPython runs on today
        return int(sum(struct.unpack(f">{len(padded) // 4}L", padded))) & 0xFFFFFFFF
    words.frombytes(padded)
    if struct.pack("=I", 1) != struct.pack(">I", 1):
        words.byteswap()
    return sum(words) & 0xFFFFFFFF


def _normalise_glyf(
    tables: dict[str, bytes], head: bytearray
) -> tuple[list[bytes], bytes, bytes, int]:
    """The glyphs (as stored), and glyf/loca re-laid out with 4-byte aligned glyphs.

    fontTools does this for WOFF2 because the reference decoder mishandles unaligned glyphs; the
    loca format becomes the shortest that fits, as fontTools' loca compiler picks it.
    """
    try:
        glyf, loca_data = tables["glyf"], tables["loca"]
        long_offsets = struct.unpack_from(">h", head, 50)[0] != 0
        loca = array("I" if long_offsets else "H")
        loca.frombytes(loca_data[: len(loca_data) // loca.itemsize * loca.itemsize])
    except (KeyError, struct.error) as error:
        raise FontError(f"the subset's glyf/loca tables are unusable: {error}") from error
    if struct.pack("=H", 1) != struct.pack(">H", 1):
        loca.byteswap()
    scale = 1 if long_offsets else 2
    glyphs = [glyf[loca[i] * scale : loca[i + 1] * scale] for i in range(len(loca) - 1)]
    padded = [g + b"\0" * (-len(g) % 4) for g in glyphs]
    offsets = [0]
    for g in padded:
        offsets.append(offsets[-1] + len(g))
    if offsets[-1] < 0x20000:
        new_loca = array("H", [o // 2 for o in offsets])
        index_format = 0
    else:
        new_loca = array("I", offsets)
        index_format = 1
    if struct.pack("=H", 1) != struct.pack(">H", 1):
        new_loca.byteswap()
    return glyphs, b"".join(padded) or b"\0", new_loca.tobytes(), index_format


# Composite glyph flags (OpenType glyf).
_ARG_1_AND_2_ARE_WORDS = 0x0001
_WE_HAVE_A_SCALE = 0x0008
_MORE_COMPONENTS = 0x0020
_WE_HAVE_AN_X_AND_Y_SCALE = 0x0040
_WE_HAVE_A_TWO_BY_TWO = 0x0080


def _component_ids(raw: bytes) -> tuple[bytearray, list[int]]:
    """A composite glyph with its component glyph ids zeroed, and those ids in order."""
    data = bytearray(raw)
    ids: list[int] = []
    pos = 10
    more = True
    while more:
        flags, gid = struct.unpack_from(">HH", data, pos)
        ids.append(gid)
        data[pos + 2 : pos + 4] = b"\0\0"
        pos += 4 + (4 if flags & _ARG_1_AND_2_ARE_WORDS else 2)
        if flags & _WE_HAVE_A_SCALE:
            pos += 2
        elif flags & _WE_HAVE_AN_X_AND_Y_SCALE:
            pos += 4
        elif flags & _WE_HAVE_A_TWO_BY_TWO:
            pos += 8
        more = bool(flags & _MORE_COMPONENTS)
    return data, ids


class _CannotTransform(Exception):
    """A glyph the WOFF2 glyf transform cannot encode (cubic curves): store glyf as it is."""


def _transform_glyf(
    glyphs: list[bytes],
    index_format: int,
    store: FaceStore,
    report: Progress,
    timings: dict[str, float],
) -> bytes | None:
    """WOFF2's transformed glyf table (``WOFF2GlyfTable.transform``), assembled from ``store``.

    Each glyph's share of the seven streams depends only on its own bytes, except that composite
    glyphs name their components by glyph id, which changes from subset to subset: the store
    keeps composites with zeroed ids and the offsets where this subset's ids go.
    """
    n = len(glyphs)
    keyed: list[tuple[bytes, list[int]] | None] = []
    todo: dict[bytes, bytes] = {}
    for raw in glyphs:
        if len(raw) < 2 or raw[:2] == b"\0\0":
            keyed.append(None)  # empty glyph
            continue
        if raw[0] & 0x80:  # numberOfContours < 0: composite
            try:
                zeroed, ids = _component_ids(raw)
            except struct.error as error:
                raise FontError(f"a composite glyph is truncated: {error}") from error
            key = hashlib.blake2b(zeroed, digest_size=16).digest()
        else:
            ids = []
            key = hashlib.blake2b(raw, digest_size=16).digest()
        keyed.append((key, ids))
        if key not in store.pieces:
            todo[key] = raw

    if todo:
        report.stage(f"font subset: encoding {len(todo)} glyphs for WOFF2 (new to the cache)",
                     estimate=len(todo) * 1.2e-4)
        t = time.perf_counter()
        try:
            for key, raw in todo.items():
                store.add(key, _encode_glyph(raw))
        except _CannotTransform:
            return None
        finally:
            timings["encode"] = time.perf_counter() - t

    n_contours: list[bytes] = []
    streams: tuple[list[bytes], ...] = ([], [], [], [], [], [])
    n_points, flag_stream, glyph_stream, composite_stream, bbox_stream, instructions = streams
    bbox_bitmap = bytearray(((n + 31) >> 5) << 2)
    overlap_bitmap = bytearray((n + 7) >> 3)
    pack_contours = struct.Struct(">h").pack
    for gid, item in enumerate(keyed):
        if item is None:
            n_contours.append(b"\0\0")
            continue
        key, ids = item
        try:
            contours, points, flags, coords, composite, id_offsets, bbox, program, overlap = (
                store.pieces[key]
            )
            n_contours.append(pack_contours(contours))
        except (ValueError, TypeError, struct.error) as error:
            raise StoreCorrupt(str(error)) from error
        if contours == 0:
            continue
        if id_offsets:
            if len(id_offsets) != len(ids):
                raise StoreCorrupt("component count differs from the glyph's")
            patched = bytearray(composite)
            for offset, component in zip(id_offsets, ids, strict=True):
                patched[offset : offset + 2] = component.to_bytes(2, "big")
            composite = bytes(patched)
        n_points.append(points)
        flag_stream.append(flags)
        glyph_stream.append(coords)
        composite_stream.append(composite)
        instructions.append(program)
        if bbox:
            bbox_bitmap[gid >> 3] |= 0x80 >> (gid & 7)
            bbox_stream.append(bbox)
        if overlap:
            overlap_bitmap[gid >> 3] |= 0x80 >> (gid & 7)

    parts = [
        b"".join(n_contours),
        b"".join(n_points),
        b"".join(flag_stream),
        b"".join(glyph_stream),
        b"".join(composite_stream),
        bytes(bbox_bitmap) + b"".join(bbox_stream),
        b"".join(instructions),
    ]
    has_overlap = any(overlap_bitmap)
    header = struct.pack(
        ">HHHH7L", 0, 1 if has_overlap else 0, n, index_format, *(len(p) for p in parts)
    )
    return header + b"".join(parts) + (bytes(overlap_bitmap) if has_overlap else b"")


class StoreCorrupt(Exception):
    """A cached glyph encoding does not fit the glyph it is keyed by: drop the store."""


class _GlyphIds:
    """The glyf table stand-in fontTools' glyph code asks for component names and ids.

    Components decode to a placeholder name and encode as id 0; the real ids are patched in when
    a subset is assembled (they differ from subset to subset).
    """

    extended = False

    @staticmethod
    def getGlyphName(glyph_id: int) -> str:  # fontTools' protocol
        return "component"

    @staticmethod
    def getGlyphID(name: str) -> int:  # fontTools' protocol
        return 0


def _encode_glyph(raw: bytes) -> Piece:
    """One glyph's share of WOFF2's transformed glyf streams (``WOFF2GlyfTable._encodeGlyph``).

    fontTools decodes the glyph; the encoding follows the WOFF2 specification (section 5.1) the
    way fontTools writes it, which the tests check byte for byte.
    """
    from fontTools.misc.arrayTools import calcIntBounds  # type: ignore[import-untyped]
    from fontTools.ttLib.tables._g_l_y_f import (  # type: ignore[import-untyped]
        Glyph,
        flagCubic,
        flagOnCurve,
        flagOverlapSimple,
    )
    from fontTools.ttLib.woff2 import pack255UShort

    glyph = Glyph(raw)
    try:
        glyph.expand(_GlyphIds)
    except Exception as error:
        raise FontError(f"a glyph cannot be decoded: {type(error).__name__}: {error}") from error
    contours = int(glyph.numberOfContours)
    if contours == 0:
        return (0, b"", b"", b"", b"", (), b"", b"", False)
    bbox = struct.pack(">hhhh", glyph.xMin, glyph.yMin, glyph.xMax, glyph.yMax)
    if glyph.isComposite():
        has_program = hasattr(glyph, "program")
        composite = bytearray()
        offsets: list[int] = []
        last = len(glyph.components) - 1
        for i, component in enumerate(glyph.components):
            offsets.append(len(composite) + 2)
            composite += component.compile(int(i < last), int(has_program and i == last),
                                           _GlyphIds)
        coords = program = b""
        if has_program:
            program = bytes(glyph.program.getBytecode())
            coords = bytes(pack255UShort(len(program)))
        return (-1, b"", b"", coords, bytes(composite), tuple(offsets), bbox, program, False)

    flags = glyph.flags
    if flagCubic in flags:  # fontTools' test, verbatim: an off-curve cubic point
        raise _CannotTransform
    points = bytearray()
    last_end = -1
    for end in glyph.endPtsOfContours:
        points += pack255UShort(end - last_end)
        last_end = end
    absolute = [(int(x), int(y)) for x, y in glyph.coordinates]
    flag_bytes, triplets = _triplets(absolute, [flag & flagOnCurve for flag in flags])
    program = bytes(glyph.program.getBytecode())
    coords = triplets + bytes(pack255UShort(len(program)))
    if (glyph.xMin, glyph.yMin, glyph.xMax, glyph.yMax) == tuple(calcIntBounds(absolute)):
        bbox = b""  # the decoder recomputes it
    overlap = bool(flags[0] & flagOverlapSimple)
    return (contours, bytes(points), flag_bytes, coords, b"", (), bbox, program, overlap)


def _triplets(points: list[tuple[int, int]], on_curve: list[int]) -> tuple[bytes, bytes]:
    """WOFF2's triplet encoding of a simple glyph's points (flags stream, glyph stream)."""
    flags = bytearray()
    out = bytearray()
    last_x = last_y = 0
    for (px, py), on in zip(points, on_curve, strict=True):
        x, y = px - last_x, py - last_y
        last_x, last_y = px, py
        on_bit = 0 if on else 128
        ax, ay = abs(x), abs(y)
        x_sign = 0 if x < 0 else 1
        y_sign = 0 if y < 0 else 1
        xy_signs = x_sign + 2 * y_sign
        if x == 0 and ay < 1280:
            flags.append(on_bit + ((ay & 0xF00) >> 7) + y_sign)
            out.append(ay & 0xFF)
        elif y == 0 and ax < 1280:
            flags.append(on_bit + 10 + ((ax & 0xF00) >> 7) + x_sign)
            out.append(ax & 0xFF)
        elif ax < 65 and ay < 65:
            flags.append(on_bit + 20 + ((ax - 1) & 0x30) + (((ay - 1) & 0x30) >> 2) + xy_signs)
            out.append((((ax - 1) & 0xF) << 4) | ((ay - 1) & 0xF))
        elif ax < 769 and ay < 769:
            flags.append(
                on_bit + 84 + 12 * (((ax - 1) & 0x300) >> 8) + (((ay - 1) & 0x300) >> 6)
                + xy_signs
            )
            out += bytes(((ax - 1) & 0xFF, (ay - 1) & 0xFF))
        elif ax < 4096 and ay < 4096:
            flags.append(on_bit + 120 + xy_signs)
            out += bytes((ax >> 4, ((ax & 0xF) << 4) | (ay >> 8), ay & 0xFF))
        else:
            flags.append(on_bit + 124 + xy_signs)
            out += bytes((ax >> 8, ax & 0xFF, ay >> 8, ay & 0xFF))
    return bytes(flags), bytes(out)


# -- the cache -----------------------------------------------------------------------------------


class FaceStore:
    """What one face's earlier subsets computed that later ones reuse, cached per library version.

    ``order``: the face's glyph order as fontTools names it. ``pieces``: WOFF2 glyph encodings,
    key (BLAKE2b of the glyph's bytes, component ids zeroed) → :data:`Piece`.
    """

    def __init__(self, name: str, order: list[str] | None = None,
                 pieces: dict[bytes, Piece] | None = None) -> None:
        self.name = name
        self.order = order
        self.pieces: dict[bytes, Piece] = pieces or {}
        self.dirty = False
        self.lock = threading.Lock()

    def add(self, key: bytes, piece: Piece) -> None:
        self.pieces[key] = piece
        self.dirty = True

    def set_order(self, order: list[str]) -> None:
        self.order = order
        self.dirty = True

    def to_bytes(self) -> bytes:
        with self.lock:
            return marshal.dumps((self.order, self.pieces))

    @classmethod
    def from_bytes(cls, name: str, body: bytes) -> FaceStore | None:
        try:
            order, pieces = marshal.loads(body)
        except (EOFError, ValueError, TypeError):
            return None
        if not isinstance(pieces, dict) or not (order is None or isinstance(order, list)):
            return None
        return cls(name, order, pieces)
