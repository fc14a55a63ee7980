"""The git layer: the only place that knows dulwich, and the one way to run C git.

- ``repo``      ``Repository``: a repository's objects, refs and configuration
- ``catfile``   object reads through one long-lived ``git cat-file --batch-command``
- ``reading``   reading objects, trees and commits; ``ls-tree`` and ``diff-tree`` for whole trees
- ``writing``   writing objects durably (dulwich's object store; trees rebuilt along the changes)
- ``objects``   git's object formats (SHA-1, SHA-256): ids, tree entries, commit headers
- ``refs``      refs read with ``for-each-ref``, moved by ``update-ref --stdin`` transactions
- ``values``    the plain values it hands out: entries, commits, changes, identities
- ``locate``    finding the repository as git does (``git rev-parse``, ``GIT_DIR`` & co.)
- ``run``       running C git with the hardened environment (no prompts, exactly one repository)
- ``locks``     git's lock files: ``FileLocked``, waiting, the ``LockPolicy`` a caller gives
- ``worktrees`` where each branch is checked out (``git worktree list``)
- ``remote``    the network segment with C git: fetch, push and their three outcomes
- ``push``      what a push did, ref by ref (sent, race, rejected, unknown); atomic and leases
- ``notes``     append-only notes under ``refs/notes/pub``, merged by line union
- ``walk``      git's ``tips ^base`` history walk; a long one split in two at a commit sampled
                from the packs (their indexes read by dulwich, imported only then)
- ``diff``      what a commit changes against its first parent (``git diff-tree``)
- ``mergefile`` one file's three-way merge, as ``git merge-file`` makes it
- ``treecheck`` what ``git fsck --strict`` refuses in one tree object
- ``paths``     whether git would refuse a path (with dulwich's validators); submodules and
                case twins along a path in a tree

May import: ``gitpub.core``. Everything above deals in hex object ids and plain values.
See docs/dulwich.md for the dulwich behaviours this layer guards against.
"""
