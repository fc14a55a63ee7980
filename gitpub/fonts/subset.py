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

from gitpub.core.errors import FontError
from gitpub.fonts.woff2 import _FaceStore, _StoreCorrupt, _woff2_from_sfnt

TYPE_CHECKING = False  # typing costs ~1.5 ms to import; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from pathlib import Path
    from typing import Any, Literal, TypeAlias

    from gitpub.config.schema import FontSpec

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
    from gitpub.config.schema import Config

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
