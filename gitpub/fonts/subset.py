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
re-encoded here from the cached glyph encodings (see :func:`woff2_from_sfnt`).

fontTools and brotli (~100 ms to import) are imported inside the functions that need them: only a
job with fonts to subset loads them.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitpub.config.model import FontSpec
from gitpub.core.errors import FontError
from gitpub.core.globs import matcher
from gitpub.fonts.cache import MAX_CACHED_SUBSETS, Cache, FaceIndex
from gitpub.fonts.profile import (
    DEFAULT_PROFILE,
    PYFTSUBSET_PROFILE,
    Flavor,
    Progress,
    SubsetProfile,
)
from gitpub.fonts.woff2 import ENCODER_VERSION, FaceStore, StoreCorrupt, woff2_from_sfnt

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

    Globs mean what they mean everywhere in ``.gitpub.yaml`` (``gitpub.core.globs``); paths not
    in normal form never match.
    """
    covers = matcher(spec.text)
    return charset_of(data for path, data in files.items() if covers(path))


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
    report = Progress(progress, progress_after)
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
    cache = Cache.open(cache_dir)

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
            data = woff2_from_sfnt(sfnt, store, profile, report, timings)
        except StoreCorrupt:  # start this face's glyph encodings afresh
            store = _face_store(cache, font_sha256, face, fresh=store)
            data = woff2_from_sfnt(sfnt, store, profile, report, timings)
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


_MEMO_LOCK = threading.Lock()
_INDEX_MEMO: dict[tuple[str, int], FaceIndex] = {}
_STORE_MEMO: dict[tuple[str, int, str], FaceStore] = {}
_MEMO_SIZE = 4


def _remember(memo: dict[Any, Any], key: object, value: object) -> None:
    with _MEMO_LOCK:
        memo.pop(key, None)
        memo[key] = value
        while len(memo) > _MEMO_SIZE:
            del memo[next(iter(memo))]


def _face_index(font: bytes, font_sha: str, face: int, cache: Cache | None) -> FaceIndex:
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
        logging.getLogger("fontTools").addHandler(logging.NullHandler())
        _logging_quiet = True
    options = subset.Options(font_number=face if collection else -1)
    try:
        with _FONTTOOLS_LOCK:
            return subset.load_font(io.BytesIO(font), options, dontLoadGlyphNames=True)
    except Exception as error:
        raise FontError(f"not a usable font: {type(error).__name__}: {error}") from error


def _build_index(font: bytes, face: int) -> FaceIndex:
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
    return FaceIndex(collection, frozenset(supported), frozenset(keys | supported))


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
        parts.append(f"zlib={zlib.ZLIB_RUNTIME_VERSION}")
    return " ".join(parts)


def _subset_sfnt(
    font: bytes,
    face: int,
    collection: bool,
    covered: frozenset[str],
    profile: SubsetProfile,
    flavor: Flavor,
    store: FaceStore,
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
    cache: Cache | None, font_sha: str, face: int, *, fresh: FaceStore | None = None
) -> FaceStore:
    """The face's store: from memory, else the cache, else empty; ``fresh`` replaces a bad one.

    A replacement keeps the bad store's glyph order (checked against the font when used) and
    drops its glyph encodings.
    """
    import fontTools

    fingerprint = hashlib.sha256(
        f"{ENCODER_VERSION} {fontTools.version} {sys.version_info[:2]}".encode()
    ).hexdigest()[:16]
    name = f"{font_sha}-{face}-{fingerprint}"
    memo_key = (font_sha, face, fingerprint)
    if fresh is not None:
        store = FaceStore(name, fresh.order)
        store.dirty = True  # replaces the bad file even if nothing new is added
    else:
        known = _STORE_MEMO.get(memo_key)
        if known is not None:
            return known
        store = (cache.read_face(name) if cache is not None else None) or FaceStore(name)
    _remember(_STORE_MEMO, memo_key, store)
    return store


