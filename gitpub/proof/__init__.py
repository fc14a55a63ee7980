"""The proof of publication as gitpub writes it into commits, and reads it back as git does.

- ``trailers``  writing and reading the proof-of-publication trailers (``Blog-Job-Id``,
                ``Blog-Manifest-Sha256``, …), exactly as ``git interpret-trailers`` reads them
- ``message``   a person's commit message with the proof added, checked against git

May import: ``gitpub.git``, ``gitpub.core``.
"""
