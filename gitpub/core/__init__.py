"""Pure values and rules: what a job is, independent of where it is stored.

- ``errors``       the one error hierarchy, each error carrying its exit code
- ``states``       the state machine (states, legal transitions, exit codes) and the enums of
                   phases, stages, kinds, judge answers and failure codes
- ``record``       the versioned job record, parsed strictly
- ``manifest``     the canonical list of a job's files and its hash
- ``sanitize``     the secret redactor every persisted text passes through
- ``allowlist``    known non-secrets: inline pragmas and the committed ``.gitpub-allowlist``
- ``secretdiff``   which findings a change brings: a file against its version in the base
- ``globs``        repository paths and the one glob engine of the configuration
- ``paths``        which paths a job may write: git's refused spellings of ``.git``, portable
                   names, steering paths, the write scope, case twins
- ``files``        durable file writes outside git (atomic replace, directory fsync), and
                   ``.git/pub``, gitpub's private space in the git directory
- ``crashpoints``  named places to die at, for the fault-injection tests
- ``pushmark``     the mark on gitpub's own verified push, which its pre-push hook honours

May import: the standard library only. No git, no configuration, no I/O but ``files``.
"""
