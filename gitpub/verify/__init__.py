"""Verification: is a commit the publication it claims to be, and is a job published?

- ``commit``   a commit's files against the manifest its trailers promise (pre-push, confirm)
- ``probe``    searching the remote branch since a job's base for the job's proof
- ``confirm``  what CI runs: verify the remote branch, record verdicts as notes
- ``store_check`` confirm's check of the remote's job store (job refs, archive) against the
                branch

May import: ``store``, ``config``, ``git``, ``core``.
"""
