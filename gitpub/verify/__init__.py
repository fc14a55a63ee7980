"""Verification: is a commit the publication it claims to be, and is a job published?

- ``commit``   a commit's files against the manifest its trailers promise (pre-push, confirm)
- ``probe``    searching the remote branch since a job's base for the job's proof
- ``history``  the once-per-job search of a base's whole history for a job id
- ``confirm``  what CI runs: verify the remote branch, record verdicts as notes
- ``rules``    which trailer prefixes ``confirm`` checks (the range's start's, only ever more)
- ``ledger``   what ``confirm`` remembers between runs, and why it can be believed
- ``anchor``   the rollback anchor CI keeps: the last ledger it wrote, out of pushers' reach
- ``facts``    the configuration ``confirm`` may believe (never the pushed tree's)
- ``store_check`` confirm's check of the remote's job store (job refs, archive) against the
                branch

May import: ``store``, ``proof``, ``config``, ``git``, ``core``.
"""
