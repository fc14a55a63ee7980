"""Font subsets: deterministic fontTools subsets of a site's CJK fonts, and their cache.

- ``subset``   the subset of a face for a set of characters, byte-for-byte reproducible
- ``woff2``    WOFF2 encoding from cached per-glyph transforms
- ``cache``    the verified, content-addressed cache under ``.git/pub/fonts-cache/``
- ``profile``  the choices that shape a subset's bytes, and progress of long subsets
- ``step``     subsets as job artifacts: which files a font must cover, in a tree plus a job

May import: ``config``, ``git``, ``core``. fontTools and brotli are imported inside the functions
that need them: only a job with fonts to subset loads them.
"""
