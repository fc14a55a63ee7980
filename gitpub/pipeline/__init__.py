"""The local pipeline: RECEIVED → PREPARING → READY_TO_COMMIT → LOCAL_COMMITTED, offline.

- ``context``   the frozen context every step runs in (repository, store, configuration, clock)
- ``request``   what a user asks for, and finding or creating the one job a key names
- ``prepare``   the phases (snapshot, draft, judge, gates, fonts) and the driver that resumes a
                job at its first unrecorded phase
- ``history``   the once-per-job search of the base's whole history for the job id
- ``steps``     running pipeline commands in private scratch space, with the temp-file guard
- ``gates``     the built-in content gates (secrets, UTF-8, front matter, titles)
- ``frontmatter`` YAML ``---``, TOML ``+++`` and JSON ``{`` front matter; an article's title
- ``commit``    the reproducible in-memory content commit, and its recovery after a crash

May import: ``fonts``, ``verify``, ``store``, ``config``, ``git``, ``core``. Never the network:
preparation never waits on a remote (promise 10).
"""
