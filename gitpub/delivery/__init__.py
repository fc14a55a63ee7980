"""Delivery: LOCAL_COMMITTED → PUSHING → PUBLISHED, and everything that moves content to the
remote.

- ``deliver``   the rounds: fetch, probe, dedup re-check, compare-and-swap, in-memory rebase,
                push, confirm, bounded retries
- ``checkout``  fast-forwarding the user's branch and working tree when it is safe
- ``resolve``   a person's way out of REVIEW, CONFLICT and FAILED, or abandoning a job;
                never destroys anything
- ``sync``      hand edits delivered as sync jobs

May import: ``pipeline`` and everything below it.
"""
