"""gitpub: crash-safe publishing of content into git repositories.

The package is layered; the file names are the architecture.

The git layer (the only modules that talk to dulwich):

- ``repo``         objects, refs (compare-and-swap), durable writes
- ``store``        the job store: one ref per job under ``refs/pub/``, the event history
- ``notes``        append-only notes under ``refs/notes/pub``, merged by union
- ``remote``       the network segment, with C git: fetch, push and their outcomes

Values and rules:

- ``states``       the state machine: states and legal transitions
- ``record``       the versioned job record kept in each job's state commit
- ``manifest``     the canonical list of files a job writes, and its hash
- ``trailers``     writing and reading the proof-of-publication trailers
- ``sanitize``     the secret redactor every persisted text passes through
- ``config``       ``.gitpub.yaml``
- ``lease``        which process may work on a job right now
- ``crashpoints``  named places to die at, for the fault-injection tests

The pipeline and delivery:

- ``steps``        running pipeline commands (draft, judge, gates) with the temp-file guard
- ``gates``        built-in content gates
- ``prepare``      RECEIVED → … → READY_TO_COMMIT, resumable phase by phase
- ``localcommit``  the in-memory content commit (READY_TO_COMMIT → LOCAL_COMMITTED)
- ``history``      searching history for a job's trailers (bounded ``tips ^base`` walk)
- ``delivery``     fetch, probe, re-check, CAS, in-memory rebase, push, confirm, retries
- ``checkout``     fast-forwarding the user's branch and working tree when safe
- ``resolve``      the way out of REVIEW, CONFLICT and FAILED
- ``fontstep``     font subsets as job artifacts; font-only conflicts resolved on rebase
- ``fonts``        deterministic subsets with fontTools, and their cache
- ``woff2``        WOFF2 encoding from cached per-glyph transforms
- ``sync``         hand edits delivered as sync jobs; ``outbox`` records them
- ``verify``       does a commit's content match its manifest (``confirm``, pre-push)
- ``confirm``      what CI runs: verify the remote branch, write notes
- ``hooks``        hook installation and the hook implementations (``hookfast``: fast path)
- ``maintenance``  keeping the job store cheap for git as it grows

The command line: ``cli`` (option parsing only), ``app`` (the commands), ``demo``.
"""

__version__ = "0.1.0"
