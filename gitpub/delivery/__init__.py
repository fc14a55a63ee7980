"""Delivery: LOCAL_COMMITTED → PUSHING → PUBLISHED, and everything that moves content to the
remote.

- ``deliver``   the rounds: fetch, probe, dedup re-check, compare-and-swap, in-memory rebase,
                push, confirm, bounded retries
- ``lock``      the per-repository lock of the network segment (an ``flock``)
- ``checkout``  moving a branch together with the worktree that has it checked out, or not
- ``review``    delivery through a pull/merge request (``delivery.mode: pull_request``): the
                review branch, the request found or opened, IN_REVIEW checked until merged
- ``resolve``   a person's way out of REVIEW, CONFLICT and FAILED, or abandoning a job;
                never destroys anything
- ``handplan``  what becomes of each unpushed hand commit, decided before anything is done
- ``sync``      the plan carried out: a sync job per hand commit, the local branch rebuilt
- ``shared``    the remote's job store: sync with it, claims and fencing, the atomic delivery
                and its fallback order, take-over, finding a job on the remote
- ``fold``      folding finished jobs into the archive ref (``reconcile``: ``app.push``)
- ``anywhere``  jobs of the shared store from any clone: found, adopted, taken over

May import: ``pipeline`` and everything below it.
"""
