"""gitpub: crash-safe publishing of content into git repositories.

The package is layered; the file names are the architecture:

- ``repo``        the git layer (the only module besides ``store`` that talks to dulwich)
- ``trailers``    writing and reading the proof-of-publication trailers
- ``manifest``    the canonical list of files a job writes, and its hash
- ``states``      the state machine: states and allowed transitions
- ``record``      the versioned job record kept in each job's state commit
- ``store``       the job store: one compare-and-swap ref per job under ``refs/pub/``
- ``sanitize``    the secret redactor every persisted text passes through
- ``config``      ``.gitpub.yaml``
- ``steps``       running pipeline commands (draft, judge, gates) with the temp-file guard
- ``gates``       built-in content gates
- ``prepare``     the prepare pipeline (RECEIVED → … → READY_TO_COMMIT)
- ``localcommit`` the in-memory content commit (READY_TO_COMMIT → LOCAL_COMMITTED)
- ``cli``         the thin click layer
"""

__version__ = "0.1.0"
