"""The local pipeline: RECEIVED → PREPARING → READY_TO_COMMIT → LOCAL_COMMITTED, offline.

- ``request``   what a user asks for, and finding or creating the one job a key names
- ``sources``   reading what ``prepare`` is given (files, directories, stdin)
- ``targets``   the ``--to`` rule: repository paths from the root, cwd-relative ones refused
- ``prepare``   the phases (snapshot, draft, judge, gates, fonts) and the driver that resumes a
                job at its first unrecorded phase
- ``history``   the once-per-job search of the base's whole history for the job id
- ``jobs``      a job read again, sent to REVIEW: what the phases and the delivery share (the
                delivery loads the prepare pipeline only to re-prepare)
- ``gates``     the built-in content gates (secrets, UTF-8, front matter)
- ``frontmatter`` YAML ``---``, TOML ``+++`` and JSON ``{`` front matter (each parser loaded
                only for a text that has it); an article's title
- ``commit``    the reproducible in-memory content commit, and its recovery after a crash
- ``merging``   a job's edit and another writer's edit of the same file merged three-way (for
                the delivery's rebase), the merged content gated again
- ``advice``    the ``hint:`` of every outcome that is not simply done (what to run next)

May import: ``runtime`` and everything below it. Never the network: preparation never waits
on a remote (promise 10).
"""
