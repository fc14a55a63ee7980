"""The commands as functions: plain arguments in, result values out (``commands``).

- ``session``   opening a repository for a command: configuration, job store, context
- ``sources``   reading what ``prepare`` is given (files, directories, stdin)
- ``targets``   the ``--to`` rule: repository paths from the root, cwd-relative ones refused
- ``commands``  one function per command; the exit code is part of each result
- ``ci``        ``git pub confirm``, CI's command, with only the imports it needs
- ``repoconfig`` a repository's configuration (the working tree's, or a bare one's branch)
- ``advice``    the ``hint:`` of every outcome that is not simply done (what to run next)
- ``anywhere``  jobs of the shared store from any clone: found, adopted, taken over
- ``archiving`` when finished jobs are folded into the archive (``reconcile``)
- ``doctor``    ``git pub doctor [--fix]``: the checks, and the safe fixes
- ``dryrun``    ``push --dry-run`` / ``sync --dry-run``: what would be pushed, writing nothing

May import: ``hooks``, ``delivery`` and everything below. Never click, never printing: the
command line (``gitpub.cli``) renders what these return.
"""
