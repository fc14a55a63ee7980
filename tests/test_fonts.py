"""Font subsets: byte-for-byte what fontTools (and pyftsubset) make, deterministic, cached safely.

The fonts are built here with fontTools' FontBuilder: ASCII plus a few dozen CJK code points,
simple glyphs whose points exercise every WOFF2 triplet encoding, composite glyphs (offsets,
scales, word-sized arguments), a hinted glyph with fpgm/prep/cvt, an overlap flag, a kern
feature, a variation sequence and vertical metrics — small enough that a subset takes
milliseconds. The reference everything is held to is fontTools' own subsetter and writers, set up
as pyftsubset sets them up.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gitpub.config.model import FontSpec
from gitpub.fonts import cache as fonts_cache
from gitpub.fonts import subset as fonts

ROOT = Path(__file__).resolve().parent.parent

CJK = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你"
COMPOSED = "国我以要他时来用"  # drawn from components
Q11 = fonts.PYFTSUBSET_PROFILE  # brotli quality 11, window 2**22: pyftsubset's bytes


def _simple(index: int, variant: int) -> Any:
    """A glyph whose deltas hit every triplet class (small, medium, large, huge, 0-x, 0-y)."""
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    k = index * 7 + variant * 13
    pen = TTGlyphPen(None)
    pen.moveTo((50 + k % 40, -100))
    pen.lineTo((50 + k % 40, 700 + k))  # x delta 0
    pen.lineTo((400 + k, 700 + k))  # y delta 0
    pen.qCurveTo((430 + k, 760 + k), (470 + k % 60, 730))  # small deltas, off-curve point
    pen.lineTo((900 + k, 40))  # medium deltas
    pen.closePath()
    pen.moveTo((200, 200 + k % 30))
    pen.lineTo((260 + k % 50, 230))
    pen.lineTo((230, 300 + k % 20))
    pen.closePath()
    if index % 5 == 0:  # big jumps: the 12-bit and the 16-bit triplets
        pen.moveTo((-1500 - k, 2000))
        pen.lineTo((3000 + k, -2500))
        pen.lineTo((3100, -2400 - k % 9))
        pen.closePath()
    return pen.glyph()


def _composite(parts: list[tuple[str, tuple[float, ...]]]) -> Any:
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    pen = TTGlyphPen({name: None for name, _ in parts})  # the names are all it looks at
    for name, transform in parts:
        pen.addComponent(name, transform)
    return pen.glyph()


def build_font(variant: int = 0) -> bytes:
    """A small hinted TrueType CJK font; ``variant`` changes the outlines and the names."""
    from array import array

    from fontTools.fontBuilder import FontBuilder
    from fontTools.ttLib import newTable
    from fontTools.ttLib.tables import ttProgram
    from fontTools.ttLib.tables._g_l_y_f import flagOverlapSimple

    chars = [chr(c) for c in range(0x20, 0x7F)] + list(CJK)
    order = [".notdef", "rad0", "rad1", "rad2", "alt.yi"] + [f"u{ord(c):04X}" for c in chars]
    cmap = {ord(c): f"u{ord(c):04X}" for c in chars}
    glyphs: dict[str, Any] = {}
    for i, name in enumerate(order):
        if name == "u0020":
            glyphs[name] = _empty()
        elif name in {f"u{ord(c):04X}" for c in COMPOSED}:
            j = order.index(name)
            last = (0.75, 0, 0, 0.5, -60, 400) if j % 2 else (1, 0, 0, 1, 5, 6)  # x/y scale
            glyphs[name] = _composite(
                [
                    ("rad0", (1, 0, 0, 1, 10 + j, 0)),  # byte arguments
                    ("rad1", (0.5, 0, 0, 0.5, 300 + 40 * j, -20)),  # a scale; word arguments
                    ("rad2", last),
                ]
            )
        else:
            glyphs[name] = _simple(i, variant)
    hinted = glyphs["u4E2D"]  # 中
    hinted.program = ttProgram.Program()
    hinted.program.fromBytecode(b"\xb0\x01\x21")  # PUSHB[0] 1, POP
    hinted_composite = glyphs["u56FD"]  # 国
    hinted_composite.program = ttProgram.Program()
    hinted_composite.program.fromBytecode(b"\xb0\x03\x21")
    glyphs["u4EBA"].flags[0] |= flagOverlapSimple  # 人

    fb = FontBuilder(1000, isTTF=True)
    fb.updateHead(created=3_600_000_000, modified=3_600_000_000 + variant)
    fb.setupGlyphOrder(order)
    fb.setupCharacterMap(cmap, uvs=[(ord("一"), 0xFE00, "alt.yi"), (ord("是"), 0xFE00, None)])
    fb.setupGlyf(glyphs)
    wide = {f"u{ord(c):04X}" for c in CJK}
    fb.setupHorizontalMetrics({n: (1000 if n in wide else 600, 50) for n in order})
    fb.setupHorizontalHeader(ascent=880, descent=-120)
    fb.setupVerticalHeader(ascent=500, descent=-500)
    fb.setupVerticalMetrics({n: (1000, 120) for n in order})
    family = f"Test CJK {variant}"
    fb.setupNameTable({"familyName": family, "styleName": "Regular"})
    fb.setupOS2(sTypoAscender=880, usWinAscent=880, usWinDescent=120)
    fb.setupPost()
    fb.addOpenTypeFeatures(
        "languagesystem DFLT dflt;\n"
        "feature kern { pos u0041 u0056 -80; pos u0054 u006F -40; pos u4E2D u56FD -20; } kern;\n"
    )
    for tag, code in (("fpgm", b"\xb0\x00\x21"), ("prep", b"\xb0\x02\x21")):
        table = newTable(tag)
        table.program = ttProgram.Program()
        table.program.fromBytecode(code)
        fb.font[tag] = table
    cvt = newTable("cvt ")
    cvt.values = array("h", [0, 40, 80])
    fb.font["cvt "] = cvt
    fb.setupDummyDSIG()
    out = io.BytesIO()
    fb.save(out)
    return out.getvalue()


def _empty() -> Any:
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    return TTGlyphPen(None).glyph()


def build_cff_font() -> bytes:
    """A small CFF-flavoured OpenType font (no glyf, so WOFF2 transforms nothing)."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.t2CharStringPen import T2CharStringPen

    chars = [chr(c) for c in range(0x20, 0x7F)] + list(CJK[:10])
    order = [".notdef"] + [f"u{ord(c):04X}" for c in chars]
    charstrings = {}
    for i, name in enumerate(order):
        pen = T2CharStringPen(600, None)
        pen.moveTo((50, 0))
        pen.lineTo((50 + i, 700))
        pen.curveTo((200, 750 + i), (400, 750), (550, 700 - i))
        pen.lineTo((550, 0))
        pen.closePath()
        charstrings[name] = pen.getCharString()
    fb = FontBuilder(1000, isTTF=False)
    fb.updateHead(created=3_600_000_000, modified=3_600_000_000)
    fb.setupGlyphOrder(order)
    fb.setupCharacterMap({ord(c): f"u{ord(c):04X}" for c in chars})
    fb.setupCFF("TestCFF-Regular", {"FullName": "Test CFF"}, charstrings, {})
    fb.setupHorizontalMetrics({n: (600, 50) for n in order})
    fb.setupHorizontalHeader(ascent=880, descent=-120)
    fb.setupNameTable({"familyName": "Test CFF", "styleName": "Regular"})
    fb.setupOS2()
    fb.setupPost()
    out = io.BytesIO()
    fb.save(out)
    return out.getvalue()


def build_collection(*members: bytes) -> bytes:
    from fontTools.ttLib import TTFont
    from fontTools.ttLib.ttCollection import TTCollection

    collection = TTCollection()
    collection.fonts = [TTFont(io.BytesIO(member)) for member in members]
    out = io.BytesIO()
    collection.save(out)
    return out.getvalue()


def reference(font: bytes, chars: str, flavor: str, *, face: int = 0, hinting: bool = False,
              collection: bool = False) -> bytes:
    """What pyftsubset makes: its loading, its defaults, ``--no-hinting``, brotli quality 11."""
    from fontTools import subset

    options = subset.Options(hinting=hinting, harfbuzz_repacker=False,
                             font_number=face if collection else -1)
    ttfont = subset.load_font(io.BytesIO(font), options, dontLoadGlyphNames=True)
    subsetter = subset.Subsetter(options=options)
    subsetter.populate(text=chars)
    subsetter.subset(ttfont)
    options.flavor = None if flavor == "ttf" else flavor
    out = io.BytesIO()
    subset.save_font(ttfont, out, options)
    return out.getvalue()


def parse(data: bytes) -> Any:
    from fontTools.ttLib import TTFont

    return TTFont(io.BytesIO(data))


@pytest.fixture(scope="module")
def font() -> bytes:
    return build_font()


@pytest.fixture(autouse=True)
def forget_memory() -> Iterator[None]:
    """Each test starts like a new process: no face index or glyph encodings in memory."""
    fonts._INDEX_MEMO.clear()
    fonts._STORE_MEMO.clear()
    yield
    fonts._INDEX_MEMO.clear()
    fonts._STORE_MEMO.clear()


SAMPLE = "中文的字体子集，Hello 你好！国我以要。𠀀😀"  # 文 字 体 子 集 好 𠀀 😀 are not in the font


# -- character sets ------------------------------------------------------------------------------


def test_charset_of_decodes_utf8_ignores_bad_bytes_and_controls() -> None:
    texts = ["中文\n\tA".encode(), b"\xff\xfebad \xe4\xb8", "\ufeff你\x85好\x7f".encode()]
    got = fonts.charset_of(texts)
    assert got == fonts.ASCII_PRINTABLE | {"中", "文", "你", "好"}
    assert fonts.charset_of(texts, ascii=False) == {"中", "文", "A", "b", "a", "d", " ", "你",
                                                    "好"}
    assert fonts.charset_of([]) == fonts.ASCII_PRINTABLE


def test_charset_for_reads_the_files_the_globs_name() -> None:
    spec = FontSpec(source="fonts/full.ttf", output="static/sub.woff2", text=("posts/**/*.md",))
    files = {"posts/a.md": "甲".encode(), "posts/x/b.md": "乙".encode(),
             "notes/c.md": "丙".encode(), "posts/d.txt": "丁".encode()}
    assert fonts.charset_for(spec, files) - fonts.ASCII_PRINTABLE == {"甲", "乙"}


def test_flavor_for_uses_the_extension() -> None:
    assert fonts.flavor_for("static/fonts/site.woff2") == "woff2"
    assert fonts.flavor_for("a/B.WOFF") == "woff"
    assert fonts.flavor_for("x.ttf") == "ttf"
    with pytest.raises(fonts.FontError):
        fonts.flavor_for("x.otf")


# -- the bytes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", ["woff2", "woff", "ttf"])
def test_subset_is_byte_identical_to_fonttools(font: bytes, flavor: fonts.Flavor) -> None:
    got = fonts.subset_font(font, chars=SAMPLE, flavor=flavor, profile=Q11)
    assert got.data == reference(font, SAMPLE, flavor)
    assert not got.cached


def test_woff2_identical_for_every_glyph_kind_and_hinting(font: bytes) -> None:
    every = "".join(chr(c) for c in range(0x20, 0x7F)) + CJK
    assert fonts.subset_font(font, chars=every, flavor="woff2", profile=Q11).data == reference(
        font, every, "woff2")
    hinted = replace(Q11, hinting=True)
    got = fonts.subset_font(font, chars=every, flavor="woff2", profile=hinted)
    assert got.data == reference(font, every, "woff2", hinting=True)
    assert "fpgm" in parse(got.data)
    assert "fpgm" not in parse(fonts.subset_font(font, chars=every, flavor="woff2").data)


def test_default_quality_decodes_to_the_same_font(font: bytes) -> None:
    import brotli

    def payload(woff2: bytes) -> bytes:
        from fontTools.ttLib.woff2 import WOFF2Reader, woff2DirectorySize

        reader = WOFF2Reader(io.BytesIO(woff2))
        start = woff2DirectorySize + sum(len(e.toString()) for e in reader.tables.values())
        return bytes(brotli.decompress(woff2[start : start + reader.totalCompressedSize]))

    fast = fonts.subset_font(font, chars=CJK, flavor="woff2").data
    best = fonts.subset_font(font, chars=CJK, flavor="woff2", profile=Q11).data
    assert fast != best
    assert payload(fast) == payload(best)


def test_identical_to_the_pyftsubset_command(font: bytes, tmp_path: Path) -> None:
    (tmp_path / "font.ttf").write_bytes(font)
    (tmp_path / "text.txt").write_text(SAMPLE, encoding="utf-8")
    pyftsubset = Path(sys.executable).with_name("pyftsubset")
    subprocess.run([str(pyftsubset), str(tmp_path / "font.ttf"), "--flavor=woff2",
                    f"--text-file={tmp_path / 'text.txt'}", f"--output-file={tmp_path / 'o'}",
                    *Q11.pyftsubset_args()], check=True, capture_output=True)
    got = fonts.subset_font(font, chars=SAMPLE, flavor="woff2", profile=Q11)
    assert got.data == (tmp_path / "o").read_bytes()


def test_cff_font(font: bytes) -> None:
    cff = build_cff_font()
    for flavor in ("woff2", "ttf"):
        got = fonts.subset_font(cff, chars=SAMPLE, flavor=flavor, profile=Q11)
        assert got.data == reference(cff, SAMPLE, flavor)
        assert "CFF " in parse(got.data)


def test_coverage_and_missing(font: bytes) -> None:
    got = fonts.subset_font(font, chars=SAMPLE, flavor="woff2")
    assert got.missing == {"文", "字", "体", "子", "集", "好", "𠀀", "😀", "，", "！", "。"}
    subset = parse(got.data)
    assert set(subset.getBestCmap()) == {ord(c) for c in SAMPLE} - {ord(c) for c in got.missing}
    assert subset.flavor == "woff2"
    # the variation sequence for 一 comes along with 一 and its selector
    sequence = fonts.subset_font(font, chars="一\ufe00", flavor="ttf")
    assert "\ufe00" not in sequence.missing
    uvs = parse(sequence.data)["cmap"].getcmap(0, 5)
    assert uvs is not None and ord("\ufe00") in uvs.uvsDict


def test_characters_the_font_lacks_change_nothing(font: bytes) -> None:
    plain = fonts.subset_font(font, chars="中国", flavor="woff2")
    extra = fonts.subset_font(font, chars="中国文😀", flavor="woff2")
    assert extra.data == plain.data and extra.key == plain.key


@pytest.mark.parametrize("flavor", ["woff2", "woff", "ttf"])
def test_outputs_parse_back(font: bytes, flavor: fonts.Flavor) -> None:
    got = fonts.subset_font(font, chars=CJK + "AVTo", flavor=flavor)
    ttf = parse(got.data)
    assert ttf.flavor == (None if flavor == "ttf" else flavor)
    assert len(ttf.getGlyphOrder()) > len(CJK)
    glyph_set = ttf.getGlyphSet()
    full = parse(font).getGlyphSet()
    cmap, full_cmap = ttf.getBestCmap(), parse(font).getBestCmap()
    from fontTools.pens.recordingPen import DecomposingRecordingPen

    for code in map(ord, CJK + "AVTo"):  # every outline survives, components resolved
        mine, theirs = DecomposingRecordingPen(glyph_set), DecomposingRecordingPen(full)
        glyph_set[cmap[code]].draw(mine)
        full[full_cmap[code]].draw(theirs)
        assert mine.value == theirs.value
    assert ttf["head"].modified == parse(font)["head"].modified  # never the clock
    assert "GPOS" in ttf and "vmtx" in ttf and "DSIG" not in ttf


def test_collection_face(font: bytes) -> None:
    other = build_font(variant=1)
    ttc = build_collection(font, other)
    for face in (0, 1):
        got = fonts.subset_font(ttc, face=face, chars=SAMPLE, flavor="woff2", profile=Q11)
        assert got.data == reference(ttc, SAMPLE, "woff2", face=face, collection=True)
        assert parse(got.data)["name"].getDebugName(1) == f"Test CJK {face}"
    assert fonts.subset_font(ttc, face=0, chars=CJK, flavor="ttf").data != fonts.subset_font(
        ttc, face=1, chars=CJK, flavor="ttf").data
    with pytest.raises(fonts.FontError, match="collection of 2 faces"):
        fonts.subset_font(ttc, face=2, chars="中", flavor="woff2")
    with pytest.raises(fonts.FontError, match="single font"):
        fonts.subset_font(font, face=1, chars="中", flavor="woff2")
    with pytest.raises(fonts.FontError, match="not a usable font"):
        fonts.subset_font(b"garbage" * 100, chars="中", flavor="woff2")


def test_bad_arguments(font: bytes) -> None:
    with pytest.raises(ValueError):
        fonts.subset_font(font, chars=["中国"], flavor="woff2")
    with pytest.raises(ValueError):
        fonts.subset_font(font, chars="中", flavor="otf")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fonts.subset_font(font, chars="中", flavor="ttf", font_sha256="ABC")


# -- determinism ---------------------------------------------------------------------------------

CHILD = """
import sys
from pathlib import Path
from gitpub.fonts import subset as fonts
font = Path(sys.argv[1]).read_bytes()
cache = sys.argv[3] or None
got = fonts.subset_font(font, chars=sys.argv[4], flavor="woff2", cache_dir=cache)
Path(sys.argv[2]).write_bytes(got.data)
"""


def test_deterministic_across_processes_and_concurrent_cache_writers(
    font: bytes, tmp_path: Path
) -> None:
    (tmp_path / "font.ttf").write_bytes(font)
    cache = tmp_path / "cache"
    procs = []
    for n, (seed, cache_dir) in enumerate([("1", cache), ("2", cache), ("3", "")]):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        procs.append(subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path / "font.ttf"), str(tmp_path / f"out{n}"),
             str(cache_dir), SAMPLE], env=env, cwd=ROOT))
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    here = fonts.subset_font(font, chars=SAMPLE, flavor="woff2").data
    assert [(tmp_path / f"out{n}").read_bytes() for n in range(3)] == [here] * 3
    again = fonts.subset_font(font, chars=SAMPLE, flavor="woff2", cache_dir=cache)
    assert again.cached and again.data == here
    assert not [p for p in cache.rglob(".tmp-*")]


def test_output_does_not_depend_on_cache_history(font: bytes, tmp_path: Path) -> None:
    cold = fonts.subset_font(font, chars=CJK, flavor="woff2", cache_dir=tmp_path / "a").data
    fonts._STORE_MEMO.clear()
    fonts.subset_font(font, chars=CJK[:9] + "AV", flavor="woff2", cache_dir=tmp_path / "b")
    fonts.subset_font(font, chars=CJK[5:], flavor="woff2", cache_dir=tmp_path / "b")
    warm = fonts.subset_font(font, chars=CJK, flavor="woff2", cache_dir=tmp_path / "b")
    assert not warm.cached and warm.data == cold


# -- the cache -----------------------------------------------------------------------------------


def test_cache_hit(font: bytes, tmp_path: Path) -> None:
    first = fonts.subset_font(font, chars=SAMPLE, flavor="woff2", cache_dir=tmp_path)
    fonts._INDEX_MEMO.clear()
    second = fonts.subset_font(font, chars=SAMPLE, flavor="woff2", cache_dir=tmp_path)
    assert (first.cached, second.cached) == (False, True)
    assert second.data == first.data and second.missing == first.missing
    assert second.key == first.key
    other = fonts.subset_font(font, chars=SAMPLE, flavor="woff", cache_dir=tmp_path)
    assert not other.cached and other.key != first.key


def test_only_new_glyphs_are_encoded(
    font: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitpub.fonts import woff2

    calls: list[bytes] = []
    encode = woff2._encode_glyph

    def counting(raw: bytes) -> Any:
        calls.append(raw)
        return encode(raw)

    monkeypatch.setattr(woff2, "_encode_glyph", counting)
    fonts.subset_font(font, chars=CJK[:20], flavor="woff2", cache_dir=tmp_path)
    first = len(calls)
    fonts._STORE_MEMO.clear()  # a new process: the encodings come from the cache file
    got = fonts.subset_font(font, chars=CJK, flavor="woff2", cache_dir=tmp_path, profile=Q11)
    assert 0 < len(calls) - first < len(CJK) - 20 + 3
    assert got.data == reference(font, CJK, "woff2")


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_corrupt_subset_entry_is_regenerated(font: bytes, tmp_path: Path, damage: str) -> None:
    good = fonts.subset_font(font, chars=SAMPLE, flavor="woff2", cache_dir=tmp_path)
    (entry,) = tmp_path.rglob("subsets/*.woff2")
    if damage == "flip":
        _corrupt(entry)
    else:
        entry.write_bytes(entry.read_bytes()[: 0 if damage == "empty" else 200])
    again = fonts.subset_font(font, chars=SAMPLE, flavor="woff2", cache_dir=tmp_path)
    assert not again.cached and again.data == good.data
    assert fonts.subset_font(font, chars=SAMPLE, flavor="woff2", cache_dir=tmp_path).cached


def test_corrupt_index_and_glyph_files_are_rebuilt(font: bytes, tmp_path: Path) -> None:
    good = fonts.subset_font(font, chars=SAMPLE, flavor="woff2", cache_dir=tmp_path)
    for path in [*tmp_path.rglob("index/*"), *tmp_path.rglob("faces/*"),
                 *tmp_path.rglob("subsets/*")]:
        _corrupt(path)
    fonts._INDEX_MEMO.clear()
    fonts._STORE_MEMO.clear()
    again = fonts.subset_font(font, chars=SAMPLE, flavor="woff2", cache_dir=tmp_path)
    assert not again.cached and again.data == good.data and again.missing == good.missing


def test_glyph_encodings_that_do_not_fit_are_dropped(font: bytes, tmp_path: Path) -> None:
    """A glyph file that passes its checksum but holds wrong data (a bug, a hand edit)."""
    good = fonts.subset_font(font, chars=CJK, flavor="woff2", cache_dir=tmp_path)
    (store,) = fonts._STORE_MEMO.values()
    store.pieces = {key: (1, b"") for key in store.pieces}  # type: ignore[misc]
    fonts_cache.Cache.open(tmp_path).write_face(store)  # type: ignore[union-attr]
    fonts._STORE_MEMO.clear()
    for path in tmp_path.rglob("subsets/*"):
        path.unlink()
    again = fonts.subset_font(font, chars=CJK, flavor="woff2", cache_dir=tmp_path)
    assert again.data == good.data
    fonts._STORE_MEMO.clear()
    for path in tmp_path.rglob("subsets/*"):
        path.unlink()
    assert fonts.subset_font(font, chars=CJK, flavor="woff2", cache_dir=tmp_path).data == good.data


def test_a_glyph_order_that_does_not_fit_is_not_used(font: bytes, tmp_path: Path) -> None:
    good = fonts.subset_font(font, chars=CJK, flavor="ttf", cache_dir=tmp_path)
    (store,) = fonts._STORE_MEMO.values()
    assert store.order is not None
    store.order = store.order[:-1]
    fonts_cache.Cache.open(tmp_path).write_face(store)  # type: ignore[union-attr]
    fonts._STORE_MEMO.clear()
    for path in tmp_path.rglob("subsets/*"):
        path.unlink()
    assert fonts.subset_font(font, chars=CJK, flavor="ttf", cache_dir=tmp_path).data == good.data


def test_concurrent_writers_in_one_process(font: bytes, tmp_path: Path) -> None:
    results: list[bytes] = []
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            chars = SAMPLE if i % 2 else CJK
            results.append(fonts.subset_font(font, chars=chars, flavor="woff2",
                                             cache_dir=tmp_path).data)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    expected = {fonts.subset_font(font, chars=c, flavor="woff2").data for c in (SAMPLE, CJK)}
    assert set(results) == expected
    assert len(list(tmp_path.rglob("subsets/*"))) == 2
    assert not list(tmp_path.rglob(".tmp-*"))


def test_cache_is_pruned(font: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fonts_cache, "MAX_CACHED_SUBSETS", 3)
    keys = []
    for i in range(6):
        got = fonts.subset_font(font, chars=CJK[i : i + 3], flavor="ttf", cache_dir=tmp_path)
        keys.append(got.key)
        for n, path in enumerate(sorted(tmp_path.rglob("subsets/*"))):  # distinct ages
            age = 1000 * (6 - keys.index(path.stem)) if path.stem in keys else 10**6
            os.utime(path, (1e9 - age - n, 1e9 - age - n))
    left = sorted(path.stem for path in tmp_path.rglob("subsets/*"))
    assert left == sorted(keys[3:])
    assert fonts.subset_font(font, chars=CJK[5:8], flavor="ttf", cache_dir=tmp_path).cached


def test_unwritable_cache_only_costs_time(font: bytes, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    got = fonts.subset_font(font, chars=SAMPLE, flavor="woff2", cache_dir=blocker)
    assert got.data == fonts.subset_font(font, chars=SAMPLE, flavor="woff2").data


# -- progress -------------------------------------------------------------------------------------


def test_progress_only_for_slow_subsets(font: bytes) -> None:
    quiet: list[str] = []
    fonts.subset_font(font, chars=CJK, flavor="woff2", progress=quiet.append)
    assert quiet == []
    fonts._STORE_MEMO.clear()
    loud: list[str] = []
    fonts.subset_font(font, chars=CJK, flavor="woff2", progress=loud.append, progress_after=0)
    assert [m.split(":")[0] for m in loud] == ["font subset"] * len(loud)
    assert any("encoding" in m for m in loud) and any("compressing" in m for m in loud)
    assert "KB in" in loud[-1]


def test_subset_for_spec(font: bytes, tmp_path: Path) -> None:
    spec = FontSpec(source="fonts/full.ttf", output="static/site.woff", text=("posts/*.md",))
    files = {"posts/a.md": "中国人".encode(), "drafts/b.md": "大".encode()}
    got = fonts.subset_for_spec(spec, font, files, cache_dir=tmp_path)
    assert parse(got.data).flavor == "woff"
    assert set(parse(got.data).getBestCmap()) == {ord(c) for c in "中国人"} | set(range(0x20, 0x7F))
