"""What shapes a subset's bytes besides the font and its characters, and how a long subset
reports progress: the values the subsetter (``fonts.subset``) and the WOFF2 encoder
(``fonts.woff2``) share.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

#: The output format, from the output file's extension: WOFF2, WOFF 1.0 or bare TrueType/CFF.
Flavor: TypeAlias = Literal["woff2", "woff", "ttf"]
#: One glyph in WOFF2's transformed glyf encoding: (numberOfContours, nPoints, flags, glyph,
#: composite with zeroed component ids, offsets of those ids, bbox, instructions, overlap).
Piece: TypeAlias = tuple[int, bytes, bytes, bytes, bytes, tuple[int, ...], bytes, bytes, bool]


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


class Progress:
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
