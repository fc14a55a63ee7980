"""What every command runs on: the session, its context, the processes it starts, its locks.

- ``session``   opening a repository for a command (with the lock policy), its configuration,
                its job store; finding a job by id or prefix
- ``context``   the frozen context every step runs in (repository, store, configuration, clock)
- ``repoconfig`` a repository's configuration (the working tree's, or a bare one's branch)
- ``steps``     running commands (pipeline steps, channel commands) in private scratch space,
                with the temp-file guard; the one place besides ``git.run`` that starts a
                process
- ``contain``   one job's failure contained to that job (reported, or the job to REVIEW)
- ``pubdir``    ``.git/pub``'s lock policy: who is alive, which lock files are stale

May import: ``fonts``, ``verify``, ``store``, ``proof``, ``config``, ``git``, ``core``.
"""
