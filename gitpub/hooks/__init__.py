"""Git hooks: the shims gitpub installs into content repositories, and what they do.

- ``shared``   hook names, the shim marker, the fast path's configuration cache (stdlib only)
- ``fast``     the entry point every shim execs: stdlib only, decides in a few ms whether a
               commit or push matters to gitpub at all
- ``work``     what post-commit and pre-push do when it matters (link job commits, record hand
               edits in the outbox, verify pushed job commits)
- ``install``  installing and removing the shims, planned first, applied atomically

May import: ``pipeline``, ``runtime`` and everything below; ``fast`` and ``shared`` import
nothing of gitpub at start (``fast`` imports the import-free ``core.pushmark`` for pre-push, and
``work`` only on its slow path). The commands
(``git pub hooks …``, ``hook-impl``) are in ``gitpub.app.hooks``.
"""
