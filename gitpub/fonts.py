"""Font subsets: the glyphs a site's articles use, cut from a full CJK font, byte-for-byte stable.

A CJK font holds tens of thousands of glyphs (5-20 MB); a site ships a subset with exactly the
characters its articles use (a few hundred KB). Nearly every article with a new character
regenerates that subset, so the subset file is where concurrent writers collide most: two nodes
each add an article, each regenerates the font, and the second push conflicts in a file nobody
can merge by hand. gitpub resolves that by regenerating the subset from the merged article set
(the union of characters), on the critical path of the conflicting push. Hence the three
properties this module is built around:

*Deterministic.* The subset is a pure function of (font bytes, face, the characters the font
covers, flavor, :class:`SubsetProfile`, library versions): two writers computing the subset of
the same union get the same bytes, so the regenerated file never conflicts again and a retried
push reproduces its manifest. Nothing reads the clock: ``head.modified``/``created`` are kept from
the source font (fontTools' ``recalc_timestamp`` is off), the FontForge timestamp table ``FFTM``
is dropped (the subsetter drops tables it cannot subset), WOFF/WOFF2 carry no metadata or private
blocks, and the HarfBuzz table repacker (used only when ``uharfbuzz`` happens to be installed) is
switched off so an optional package cannot change the bytes. Characters the font lacks change
nothing: they are reported in :attr:`SubsetResult.missing` and left out before subsetting and of
the cache key. Library versions are part of the cache key (fontTools, brotli, zlib), but two
writers on *different* versions may still produce different bytes: pin them across nodes.

*Sane web defaults, fixed.* Everything is pyftsubset's default (its layout feature list, name IDs
0-6 in English, no glyph names — ``post`` format 3 —, an empty ``.notdef`` outline, Unicode-range
bits pruned) except **hinting, which is dropped** (``--no-hinting``): browsers on macOS, iOS,
Android and Linux ignore TrueType instructions, CJK outlines are rarely hinted usefully, and the
instructions plus ``fpgm``/``prep``/``cvt`` are ~3 % of a WOFF2 subset. WOFF2 is compressed with
**brotli quality 10 and a 256 KB window, not quality 11 and 4 MB**: quality 11 alone takes about
half the time of a whole pyftsubset run (1.2-1.4 s of 2.2-3 s for the corpus' 3,900-character
subset); quality 10 with the smaller window takes a third of that (0.4-0.5 s) for a file 1 %
larger (295,320 bytes instead of 292,264). Nothing else differs: with :data:`PYFTSUBSET_PROFILE`
the bytes are identical to ``pyftsubset --no-hinting --no-harfbuzz-repacker --flavor=woff2``, and
with the default profile they decompress to the identical font. See :class:`SubsetProfile`.

*Fast when it matters.* ``cache_dir`` (gitpub passes ``<git-dir>/pub/fonts-cache/``) holds, in
``v1/``:

- ``subsets/<key>.<flavor>`` — finished subsets, content-addressed: ``key`` is the SHA-256 of
  (font SHA-256, face, flavor, profile and library versions, SHA-256 of the sorted covered
  characters). A repeated regeneration is a file read (milliseconds; fontTools' subsetter is
  not even imported). At most :data:`MAX_CACHED_SUBSETS` are kept, least recently used first out.
- ``index/<font-sha>-<face>.idx`` — the face's character map (which code points it covers), so
  that the cache key and the missing characters need no font parsing.
- ``faces/<font-sha>-<face>-<fingerprint>.bin`` — what earlier subsets of the face computed:
  its glyph order (fontTools derives glyph names from the character map, decoding it twice) and
  every glyph it has contributed to a WOFF2 subset, already in WOFF2's transformed ``glyf``
  encoding, keyed by the glyph's bytes. The glyf transform (decoding each outline, re-encoding its
  points as triplets) is the costliest pure-Python step of a WOFF2 save; with it cached, a subset
  that adds one article's characters encodes only that article's new glyphs and otherwise
  concatenates.

Every file carries a SHA-256 of its content and is verified on read: a corrupt or truncated file
is a miss (and is rewritten), never an answer. Files are written to a temporary name in the same
directory and renamed (``os.replace``), so readers see whole files and concurrent writers of the
same key simply replace identical bytes; the cache is never fsynced (a torn file after a power loss
fails its checksum). A cache that cannot be written (read-only, full disk) only makes gitpub
slower. The subset itself is produced by fontTools' subsetter on the full font (a subset of a
cached subset would depend on the cache's history), then written as TrueType and, for WOFF2,
re-encoded here from the cached glyph encodings (see :func:`_woff2_from_sfnt`).

Hooks import gitpub modules and must stay cheap, so fontTools, brotli and zlib are imported inside
the functions that need them, and ``typing`` only by type checkers.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import struct
import threading
import time
from dataclasses import dataclass, field

from gitpub.errors import UsageError

TYPE_CHECKING = False  # typing costs ~1.5 ms to import; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from pathlib import Path
    from typing import Any, Literal, TypeAlias

    from gitpub.config import FontSpec

    #: The output format, from the output file's extension: WOFF2, WOFF 1.0 or bare TrueType/CFF.
    Flavor: TypeAlias = Literal["woff2", "woff", "ttf"]
    #: One glyph in WOFF2's transformed glyf encoding: (numberOfContours, nPoints, flags, glyph,
    #: composite with zeroed component ids, offsets of those ids, bbox, instructions, overlap).
    _Piece: TypeAlias = tuple[int, bytes, bytes, bytes, bytes, tuple[int, ...], bytes, bytes, bool]

__all__ = [
    "ASCII_PRINTABLE",
    "DEFAULT_PROFILE",
    "MAX_CACHED_SUBSETS",
    "OPTIONS_VERSION",
    "PYFTSUBSET_PROFILE",
    "FontError",
    "SubsetProfile",
    "SubsetResult",
    "charset_for",
    "charset_of",
    "flavor_for",
    "subset_font",
    "subset_for_spec",
]

#: Bump when a decision that shapes the subset's bytes changes (it is part of every cache key).
OPTIONS_VERSION = 1
#: The cache's file formats; the cache lives in ``<cache_dir>/v<CACHE_FORMAT>/``.
CACHE_FORMAT = 1
#: Bump when the WOFF2 glyph encoder changes (it keys the glyph encoding files).
_ENCODER_VERSION = 1
#: Finished subsets kept in the cache (each is a few hundred KB for a CJK site).
MAX_CACHED_SUBSETS = 48
# Face indexes and glyph encoding files kept (one per font face and library version; <1 MB each).
_MAX_CACHED_FACES = 8

#: U+0020-U+007E, always part of :func:`charset_of`: templates, dates, code and URLs put Latin
#: letters and digits on every page whether or not an article has them, and keeping them means
#: an article with a new ASCII character never regenerates the font.
ASCII_PRINTABLE: frozenset[str] = frozenset(map(chr, range(0x20, 0x7F)))

# C0 and C1 controls and DEL are never drawn; U+FEFF is a byte-order mark when it appears in a
# file. A fixed list rather than Unicode categories, whose data changes between Python versions.
_NOT_TEXT: frozenset[str] = frozenset(
    [*map(chr, range(0x00, 0x20)), "\x7f", *map(chr, range(0x80, 0xA0)), "\ufeff"]
)

_EXTENSIONS: dict[str, Flavor] = {".woff2": "woff2", ".woff": "woff", ".ttf": "ttf"}


class FontError(UsageError):
    """The font cannot be used: not a font, a face the collection lacks, or fontTools failed on it.

    A usage error: the font is a file in the user's repository, named by ``.gitpub.yaml``.
    """


@dataclass(frozen=True)
class SubsetProfile:
    """Every choice that shapes a subset's bytes beyond the font and the characters.

    All other options are pyftsubset's defaults in the installed fontTools, whose version is part
    of the cache key. ``hinting=False`` is pyftsubset's ``--no-hinting``: TrueType instructions
    and the ``fpgm``/``prep``/``cvt``/``hdmx``/``VDMX`` tables are dropped (see the module
    docstring for why). ``brotli_quality`` and ``brotli_window`` (log2 of the window size) apply to
    WOFF2 only. :data:`DEFAULT_PROFILE` compresses at quality 10 with a 256 KB window: half the
    time of quality 11 with fontTools' 4 MB window, for a file about 1 % larger.
    :data:`PYFTSUBSET_PROFILE` reproduces pyftsubset's bytes exactly. Every writer of one site
    must use the same profile; changing it regenerates every subset.
    """

    hinting: bool = False
    brotli_quality: int = 10
    brotli_window: int = 18

    def __post_init__(self) -> None:
        if not 0 <= self.brotli_quality <= 11:
            raise ValueError(f"brotli_quality must be 0..11, got {self.brotli_quality}")
        if not 10 <= self.brotli_window <= 24:
            raise ValueError(f"brotli_window must be 10..24, got {self.brotli_window}")

    def pyftsubset_args(self) -> list[str]:
        """The pyftsubset flags for this profile (brotli has none: pyftsubset uses q11, 2**22)."""
        return [*([] if self.hinting else ["--no-hinting"]), "--no-harfbuzz-repacker"]


DEFAULT_PROFILE = SubsetProfile()
#: The profile whose WOFF2 files are byte for byte those of
#: ``pyftsubset --no-hinting --no-harfbuzz-repacker --flavor=woff2``.
PYFTSUBSET_PROFILE = SubsetProfile(brotli_quality=11, brotli_window=22)


@dataclass(frozen=True)
class SubsetResult:
    """A subset and what the caller should know about it.

    ``missing`` are requested characters the face has no glyph for (reported, not an error: a
    browser falls back to another font for them). ``cached`` says the bytes came from the cache.
    ``key`` is the cache key (hex SHA-256), equal for equal outputs. ``timings`` maps each stage
    to seconds, for logs and benchmarks.
    """

    data: bytes
    missing: frozenset[str]
    cached: bool
    key: str = ""
    timings: Mapping[str, float] = field(default_factory=dict, compare=False, hash=False)


# -- character sets ------------------------------------------------------------------------------


def charset_of(texts: Iterable[bytes], *, ascii: bool = True) -> frozenset[str]:
    """Every character of ``texts`` a font should draw, plus ASCII printable unless ``ascii=False``.

    Texts are UTF-8; invalid bytes are ignored (a stray Latin-1 byte must not block publishing).
    Everything else counts, including punctuation, symbols and emoji a CJK font may lack (they come
    back as :attr:`SubsetResult.missing`), except controls (C0, DEL, C1) and U+FEFF. No Unicode
    normalization: the font must cover the code points the text really contains.
    """
    chars: set[str] = set()
    for text in texts:
        chars.update(text.decode("utf-8", "ignore"))
    chars -= _NOT_TEXT
    if ascii:
        chars |= ASCII_PRINTABLE
    return frozenset(chars)


def charset_for(spec: FontSpec, files: Mapping[str, bytes]) -> frozenset[str]:
    """:func:`charset_of` the files (repository path → content) matching the spec's ``text`` globs.

    Globs mean what they mean for ``articles`` in ``.gitpub.yaml`` (see ``gitpub.config``);
    paths not in normal form never match.
    """
    from gitpub.config import Config

    matcher = Config(articles=spec.text, node="fonts")
    return charset_of(data for path, data in files.items() if matcher.is_article(path))


def flavor_for(output_path: str) -> Flavor:
    """The flavor an output path asks for, by its extension (``.woff2``, ``.woff``, ``.ttf``)."""
    ext = os.path.splitext(output_path)[1].lower()
    try:
        return _EXTENSIONS[ext]
    except KeyError:
        raise FontError(
            f"{output_path}: cannot tell the font format from the extension {ext or '(none)'!r}",
            "name the output .woff2, .woff or .ttf",
        ) from None


# -- the subset ----------------------------------------------------------------------------------


def subset_for_spec(
    spec: FontSpec,
    font: bytes,
    files: Mapping[str, bytes],
    *,
    cache_dir: Path | str | None,
    progress: Callable[[str], None] | None = None,
    profile: SubsetProfile = DEFAULT_PROFILE,
) -> SubsetResult:
    """The subset ``spec`` asks for: ``font`` is the content of ``spec.source``, ``files`` maps
    repository paths to contents (those matching ``spec.text`` are read). The output is meant for
    ``spec.output``, whose extension picks the flavor."""
    return subset_font(
        font,
        face=spec.face,
        chars=charset_for(spec, files),
        flavor=flavor_for(spec.output),
        cache_dir=cache_dir,
        progress=progress,
        profile=profile,
    )


def subset_font(
    font: bytes,
    *,
    face: int = 0,
    chars: Iterable[str],
    flavor: Flavor,
    cache_dir: Path | str | None = None,
    font_sha256: str | None = None,
    progress: Callable[[str], None] | None = None,
    progress_after: float = 1.0,
    profile: SubsetProfile = DEFAULT_PROFILE,
) -> SubsetResult:
    """The subset of ``font`` (face ``face`` of a collection) covering ``chars``, as ``flavor``.

    ``chars`` are single characters (a ``str`` works); the subset covers those the face has and
    reports the others as ``missing``. With ``cache_dir`` the result is looked up and stored
    there (see the module docstring); without it, only this process' memory caches help.
    ``font_sha256`` may be given when the caller already knows it (it must be right: it keys
    the cache). ``progress`` receives one-line messages, but only for a subset that is taking
    more than ``progress_after`` seconds (by the time a stage starts, or by that stage's estimate).

    Raises :class:`FontError` when the font or face cannot be read or subset.
    """
    started = time.perf_counter()
    timings: dict[str, float] = {}
    report = _Progress(progress, progress_after)
    wanted = frozenset(chars)
    for char in wanted:
        if not isinstance(char, str) or len(char) != 1:
            raise ValueError(f"chars must be single characters, got {char!r}")
    if flavor not in ("woff2", "woff", "ttf"):
        raise ValueError(f"flavor must be 'woff2', 'woff' or 'ttf', got {flavor!r}")
    if font_sha256 is None:
        font_sha256 = hashlib.sha256(font).hexdigest()
    elif len(font_sha256) != 64 or font_sha256.strip("0123456789abcdef"):
        raise ValueError(f"font_sha256 must be 64 lower-case hex digits, got {font_sha256!r}")
    cache = _Cache.open(cache_dir)

    index = _face_index(font, font_sha256, face, cache)
    covered = index.covered(wanted)
    missing = frozenset(c for c in wanted if ord(c) not in index.supported)
    fingerprint = _fingerprint(profile, flavor)
    charset_sha = hashlib.sha256(
        "".join(sorted(covered)).encode("utf-8", "surrogatepass")
    ).hexdigest()
    key = hashlib.sha256(
        f"gitpub-font-subset\n{fingerprint}\nfont={font_sha256}\nface={face}\n"
        f"chars={charset_sha}\n".encode()
    ).hexdigest()
    timings["lookup"] = time.perf_counter() - started

    if cache is not None:
        hit = cache.read_subset(key, flavor)
        if hit is not None:
            timings["total"] = time.perf_counter() - started
            return SubsetResult(hit, missing, True, key, timings)

    report.stage(
        f"font subset: {len(covered)} characters from a {len(font) / 1e6:.1f} MB font "
        f"(face {face}) to {flavor.upper()}",
        estimate=0.1 + len(font) * 7e-8,
    )
    t = time.perf_counter()
    store = _face_store(cache, font_sha256, face)
    timings["read face"] = time.perf_counter() - t
    t = time.perf_counter()
    sfnt = _subset_sfnt(font, face, index.collection, covered, profile, flavor, store)
    timings["subset"] = time.perf_counter() - t
    if flavor == "woff2":
        try:
            data = _woff2_from_sfnt(sfnt, store, profile, report, timings)
        except _StoreCorrupt:  # start this face's glyph encodings afresh
            store = _face_store(cache, font_sha256, face, fresh=store)
            data = _woff2_from_sfnt(sfnt, store, profile, report, timings)
    else:
        data = sfnt
    if cache is not None and store.dirty:
        t = time.perf_counter()
        cache.write_face(store)
        timings["write face"] = time.perf_counter() - t
    if cache is not None:
        t = time.perf_counter()
        cache.write_subset(key, flavor, data)
        timings["write"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - started
    report.done(f"font subset: {len(data) / 1000:.0f} KB in {timings['total']:.1f} s")
    return SubsetResult(data, missing, False, key, timings)


class _Progress:
    """Forwards stage messages once a subset has taken, or is about to take, ``after`` seconds."""

    def __init__(self, callback: Callable[[str], None] | None, after: float) -> None:
        self.callback = callback
        self.after = after
        self.start = time.perf_counter()
        self.shown = False

    def stage(self, message: str, estimate: float = 0.0) -> None:
        if self.callback is None:
            return
        if self.shown or time.perf_counter() - self.start + estimate >= self.after:
            self.shown = True
            self.callback(message)

    def done(self, message: str) -> None:
        if self.callback is not None and self.shown:
            self.callback(message)


@dataclass(frozen=True)
class _FaceIndex:
    """What gitpub needs to know about a face without parsing it: the code points it covers.

    ``supported``: the best Unicode cmap plus variation selectors the face has sequences for — a
    character outside it is *missing*. ``keys``: every code point any Unicode cmap subtable
    mentions (including format 14's selectors and base characters) — only these can change the
    subset, so the requested set is reduced to them before subsetting and keying.
    """

    collection: bool
    supported: frozenset[int]
    keys: frozenset[int]

    def covered(self, chars: frozenset[str]) -> frozenset[str]:
        return frozenset(c for c in chars if ord(c) in self.keys)

    def to_bytes(self) -> bytes:
        from array import array

        best = array("I", sorted(self.supported))
        rest = array("I", sorted(self.keys - self.supported))
        head = struct.pack(">BII", self.collection, len(best), len(rest))
        return head + best.tobytes() + rest.tobytes()  # native order: the cache is local

    @classmethod
    def from_bytes(cls, data: bytes) -> _FaceIndex:
        from array import array

        collection, n_best, n_rest = struct.unpack_from(">BII", data)
        arrays = array("I"), array("I")
        arrays[0].frombytes(data[9 : 9 + 4 * n_best])
        arrays[1].frombytes(data[9 + 4 * n_best : 9 + 4 * (n_best + n_rest)])
        if len(arrays[0]) != n_best or len(arrays[1]) != n_rest:
            raise ValueError("truncated face index")
        supported = frozenset(arrays[0])
        return cls(bool(collection), supported, supported | frozenset(arrays[1]))


_MEMO_LOCK = threading.Lock()
_INDEX_MEMO: dict[tuple[str, int], _FaceIndex] = {}
_STORE_MEMO: dict[tuple[str, int, str], _FaceStore] = {}
_MEMO_SIZE = 4


def _remember(memo: dict[Any, Any], key: object, value: object) -> None:
    with _MEMO_LOCK:
        memo.pop(key, None)
        memo[key] = value
        while len(memo) > _MEMO_SIZE:
            del memo[next(iter(memo))]


def _face_index(font: bytes, font_sha: str, face: int, cache: _Cache | None) -> _FaceIndex:
    index = _INDEX_MEMO.get((font_sha, face))
    if index is None and cache is not None:
        index = cache.read_index(font_sha, face)
    if index is None:
        index = _build_index(font, face)
        if cache is not None:
            cache.write_index(font_sha, face, index)
    _remember(_INDEX_MEMO, (font_sha, face), index)
    return index


def _collection_size(font: bytes) -> int | None:
    """The number of faces of a TrueType/OpenType collection, None for a single font."""
    if font[:4] != b"ttcf":
        return None
    if len(font) < 12:
        raise FontError("font collection header is truncated")
    return int(struct.unpack_from(">I", font, 8)[0])


def _check_face(font: bytes, face: int) -> bool:
    """Whether ``font`` is a collection; FontError unless ``face`` is one of its faces."""
    faces = _collection_size(font)
    if faces is None:
        if face != 0:
            raise FontError(f"face {face} asked of a single font (not a .ttc collection)",
                            "use face 0, or leave 'face' out")
        return False
    if not 0 <= face < faces:
        raise FontError(f"face {face} asked of a collection of {faces} faces",
                        f"use a face between 0 and {faces - 1}")
    return True


_FONTTOOLS_LOCK = threading.Lock()
_logging_quiet = False


def _load(font: bytes, face: int, collection: bool) -> Any:
    """The face as a lazy fontTools TTFont, loaded as pyftsubset loads it (no glyph names).

    ``subset.load_font`` swaps a class attribute for a moment, hence the lock.
    """
    global _logging_quiet
    from fontTools import subset  # type: ignore[import-untyped]

    if not _logging_quiet:
        # fontTools logs warnings ("FFTM NOT subset") with no handler configured, which Python
        # prints to stderr; a library's log belongs to the application's logging setup.
        import logging

        logging.getLogger("fontTools").addHandler(logging.NullHandler())
        _logging_quiet = True
    options = subset.Options(font_number=face if collection else -1)
    try:
        with _FONTTOOLS_LOCK:
            return subset.load_font(io.BytesIO(font), options, dontLoadGlyphNames=True)
    except Exception as error:
        raise FontError(f"not a usable font: {type(error).__name__}: {error}") from error


def _build_index(font: bytes, face: int) -> _FaceIndex:
    collection = _check_face(font, face)
    ttfont = _load(font, face, collection)
    try:
        supported: set[int] = set()
        keys: set[int] = set()
        if "cmap" in ttfont:
            for table in ttfont["cmap"].tables:
                if not table.isUnicode():
                    continue
                if table.format == 14:
                    for selector, pairs in table.uvsDict.items():
                        supported.add(selector)
                        keys.add(selector)
                        keys.update(base for base, _ in pairs)
                else:
                    keys.update(table.cmap)
            supported.update(ttfont.getBestCmap() or {})
    except Exception as error:
        raise FontError(f"cannot read the font's character map: {error}") from error
    finally:
        ttfont.close()
    return _FaceIndex(collection, frozenset(supported), frozenset(keys | supported))


def _fingerprint(profile: SubsetProfile, flavor: Flavor) -> str:
    """Everything besides font and characters that the output bytes depend on."""
    import fontTools

    parts = [f"options={OPTIONS_VERSION}", f"fonttools={fontTools.version}",
             f"hinting={int(profile.hinting)}", f"flavor={flavor}"]
    if flavor == "woff2":
        import brotli  # type: ignore[import-untyped]

        version = getattr(brotli, "__version__", None) or getattr(brotli, "version", "?")
        parts += [f"brotli={version}", f"quality={profile.brotli_quality}",
                  f"window={profile.brotli_window}"]
    elif flavor == "woff":
        import zlib

        parts.append(f"zlib={zlib.ZLIB_RUNTIME_VERSION}")
    return " ".join(parts)


def _subset_sfnt(
    font: bytes,
    face: int,
    collection: bool,
    covered: frozenset[str],
    profile: SubsetProfile,
    flavor: Flavor,
    store: _FaceStore,
) -> bytes:
    """fontTools' subset, as pyftsubset makes it: TrueType/CFF for ttf and woff2, or WOFF.

    A TrueType face without glyph names (pyftsubset does not load them) gets its glyph order
    from ``store`` when it has it: fontTools otherwise derives the names from the character map,
    decoding the cmap twice (0.04-0.08 s of the 0.3 s a 50,000-glyph CJK face takes). The names
    are fontTools' own from an earlier run (same font, same fontTools), so nothing else changes.
    """
    from fontTools import subset

    _check_face(font, face)
    ttfont = _load(font, face, collection)
    try:
        if "glyf" in ttfont and "CFF " not in ttfont and "CFF2" not in ttfont:
            order = store.order
            if order is not None and len(order) == ttfont["maxp"].numGlyphs:
                ttfont.setGlyphOrder(list(order))
            else:
                store.set_order(list(ttfont.getGlyphOrder()))
        options = subset.Options(
            font_number=face if collection else -1,
            hinting=profile.hinting,
            harfbuzz_repacker=False,
            flavor="woff" if flavor == "woff" else None,
        )
        subsetter = subset.Subsetter(options=options)
        subsetter.populate(unicodes=sorted(map(ord, covered)))
        subsetter.subset(ttfont)
        out = io.BytesIO()
        subset.save_font(ttfont, out, options)
    except FontError:
        raise
    except Exception as error:
        raise FontError(
            f"fontTools could not subset the font: {type(error).__name__}: {error}"
        ) from error
    finally:
        ttfont.close()
    return out.getvalue()


# -- WOFF2 ----------------------------------------------------------------------------------------


def _woff2_from_sfnt(
    sfnt: bytes,
    store: _FaceStore,
    profile: SubsetProfile,
    report: _Progress,
    timings: dict[str, float],
) -> bytes:
    """The WOFF2 file fontTools' ``WOFF2Writer`` makes of ``sfnt``, with the profile's brotli.

    The same steps in the same order (the tests hold the output to fontTools' byte for byte):
    drop ``DSIG``; re-pad glyphs to 4 bytes and rebuild ``loca``; set ``head`` flag bit 11; sort
    the tables by tag; checksum them as an SFNT would be laid out, for ``checkSumAdjustment``;
    transform ``glyf`` (``loca`` becomes empty); brotli the concatenation. The difference is where
    the glyf transform comes from: per glyph from ``store``, encoding only glyphs it lacks.
    """
    import brotli
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
    from array import array

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
    from array import array

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
    store: _FaceStore,
    report: _Progress,
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
            raise _StoreCorrupt(str(error)) from error
        if contours == 0:
            continue
        if id_offsets:
            if len(id_offsets) != len(ids):
                raise _StoreCorrupt("component count differs from the glyph's")
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


class _StoreCorrupt(Exception):
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


def _encode_glyph(raw: bytes) -> _Piece:
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


class _FaceStore:
    """What one face's earlier subsets computed that later ones reuse, cached per library version.

    ``order``: the face's glyph order as fontTools names it. ``pieces``: WOFF2 glyph encodings,
    key (BLAKE2b of the glyph's bytes, component ids zeroed) → :data:`_Piece`.
    """

    def __init__(self, name: str, order: list[str] | None = None,
                 pieces: dict[bytes, _Piece] | None = None) -> None:
        self.name = name
        self.order = order
        self.pieces: dict[bytes, _Piece] = pieces or {}
        self.dirty = False
        self.lock = threading.Lock()

    def add(self, key: bytes, piece: _Piece) -> None:
        self.pieces[key] = piece
        self.dirty = True

    def set_order(self, order: list[str]) -> None:
        self.order = order
        self.dirty = True

    def to_bytes(self) -> bytes:
        import marshal

        with self.lock:
            return marshal.dumps((self.order, self.pieces))

    @classmethod
    def from_bytes(cls, name: str, body: bytes) -> _FaceStore | None:
        import marshal

        try:
            order, pieces = marshal.loads(body)
        except (EOFError, ValueError, TypeError):
            return None
        if not isinstance(pieces, dict) or not (order is None or isinstance(order, list)):
            return None
        return cls(name, order, pieces)


def _face_store(
    cache: _Cache | None, font_sha: str, face: int, *, fresh: _FaceStore | None = None
) -> _FaceStore:
    """The face's store: from memory, else the cache, else empty; ``fresh`` replaces a bad one.

    A replacement keeps the bad store's glyph order (checked against the font when used) and
    drops its glyph encodings.
    """
    import sys

    import fontTools

    fingerprint = hashlib.sha256(
        f"{_ENCODER_VERSION} {fontTools.version} {sys.version_info[:2]}".encode()
    ).hexdigest()[:16]
    name = f"{font_sha}-{face}-{fingerprint}"
    memo_key = (font_sha, face, fingerprint)
    if fresh is not None:
        store = _FaceStore(name, fresh.order)
        store.dirty = True  # replaces the bad file even if nothing new is added
    else:
        known = _STORE_MEMO.get(memo_key)
        if known is not None:
            return known
        store = (cache.read_face(name) if cache is not None else None) or _FaceStore(name)
    _remember(_STORE_MEMO, memo_key, store)
    return store


_MAGIC = b"gitpub-fonts\n"


class _Cache:
    """The files under ``<cache_dir>/v1``; every method is best-effort and never raises OSError."""

    def __init__(self, root: str) -> None:
        self.root = root

    @classmethod
    def open(cls, cache_dir: Path | str | None) -> _Cache | None:
        if cache_dir is None:
            return None
        return cls(os.path.join(os.fspath(cache_dir), f"v{CACHE_FORMAT}"))

    # Files are _MAGIC, a kind, the SHA-256 of the body, the body: verified before use.

    def _read(self, relpath: str, kind: bytes) -> bytes | None:
        path = os.path.join(self.root, relpath)
        try:
            with open(path, "rb") as file:
                blob = file.read()
        except OSError:
            return None
        prefix = _MAGIC + kind + b"\n"
        body = blob[len(prefix) + 32 :]
        if not blob.startswith(prefix) or blob[len(prefix) : len(prefix) + 32] != hashlib.sha256(
            body
        ).digest():
            return None  # corrupt or from elsewhere: a miss; the rewrite replaces it
        return body

    def _write(self, relpath: str, kind: bytes, body: bytes) -> bool:
        path = os.path.join(self.root, relpath)
        directory = os.path.dirname(path)
        blob = _MAGIC + kind + b"\n" + hashlib.sha256(body).digest() + body
        try:
            os.makedirs(directory, exist_ok=True)
            import tempfile

            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(blob)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            return False
        return True

    def read_subset(self, key: str, flavor: Flavor) -> bytes | None:
        relpath = os.path.join("subsets", f"{key}.{flavor}")
        data = self._read(relpath, b"subset")
        if data is not None:
            with contextlib.suppress(OSError):  # least recently used goes first when pruning
                os.utime(os.path.join(self.root, relpath))
        return data

    def write_subset(self, key: str, flavor: Flavor, data: bytes) -> None:
        if self._write(os.path.join("subsets", f"{key}.{flavor}"), b"subset", data):
            self.prune(os.path.join(self.root, "subsets"), MAX_CACHED_SUBSETS)

    def read_index(self, font_sha: str, face: int) -> _FaceIndex | None:
        body = self._read(os.path.join("index", f"{font_sha}-{face}.idx"), b"index")
        if body is None:
            return None
        try:
            return _FaceIndex.from_bytes(body)
        except (struct.error, ValueError):
            return None

    def write_index(self, font_sha: str, face: int, index: _FaceIndex) -> None:
        if self._write(os.path.join("index", f"{font_sha}-{face}.idx"), b"index",
                       index.to_bytes()):
            self.prune(os.path.join(self.root, "index"), _MAX_CACHED_FACES)

    def read_face(self, name: str) -> _FaceStore | None:
        body = self._read(os.path.join("faces", f"{name}.bin"), b"face")
        return None if body is None else _FaceStore.from_bytes(name, body)

    def write_face(self, store: _FaceStore) -> None:
        body = store.to_bytes()
        store.dirty = False
        if self._write(os.path.join("faces", f"{store.name}.bin"), b"face", body):
            self.prune(os.path.join(self.root, "faces"), _MAX_CACHED_FACES)

    @staticmethod
    def prune(directory: str, keep: int) -> None:
        """Keep the ``keep`` most recently used files; drop temporary files older than an hour."""
        now = time.time()
        files: list[tuple[float, str]] = []
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    try:
                        mtime = entry.stat().st_mtime
                    except OSError:
                        continue
                    if entry.name.startswith(".tmp-"):
                        if now - mtime > 3600:
                            files.append((-1.0, entry.path))
                    else:
                        files.append((mtime, entry.path))
        except OSError:
            return
        files.sort(reverse=True)
        stale = [path for mtime, path in files[keep:]]
        stale += [path for mtime, path in files[:keep] if mtime < 0]
        for path in stale:
            with contextlib.suppress(OSError):
                os.unlink(path)
