"""The git layer: the only place that knows dulwich, and the one way to run C git.

- ``repo``      objects and refs: durable writes, compare-and-swap, corruption detection
- ``values``    the plain values it hands out: entries, commits, changes, identities
- ``locate``    finding the repository as git does (``GIT_DIR`` & co., worktrees, bare)
- ``run``       running C git with the hardened environment (no prompts, exactly one repository)
- ``worktrees`` where each branch is checked out (``git worktree list``)
- ``message``   a person's commit message with the proof added, checked against git
- ``remote``    the network segment with C git: fetch, push and their three outcomes
- ``push``      what a push did, ref by ref (sent, race, rejected, unknown); atomic and leases
- ``storefetch`` one fetch of the branch and the remote's ``refs/pub/*``; its records alone
                (a shallow clone)
- ``fetchdir``  the private fetch repository (``.git/pub/fetch.git``) those fetches run in
- ``reftx``      several refs moved in one C git ref transaction (all or none)
- ``refstore``  one ref read or moved without parsing all of ``packed-refs``
- ``notes``     append-only notes under ``refs/notes/pub``, merged by line union
- ``trailers``  writing and reading the proof-of-publication trailers
- ``walk``      git's ``tips ^base`` history walk, in-process
- ``paths``     whether git would refuse a path (with dulwich's validators); submodules and
                case twins along a path in a tree

May import: ``gitpub.core``. Everything above deals in hex object ids and plain values.
See docs/dulwich.md for the dulwich behaviours this layer guards against.
"""
