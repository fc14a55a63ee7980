"""Channels: distributing a published article to other platforms, never twice, never "maybe".

Each channel of a published job is a branch of the job with its own state (docs/design.md §11).

- ``model``     channel and live-check records, their statuses and legal moves, the three
                outcomes of a send (sent, not sent, unknown); strict parsing
- ``payload``   the frozen payload: canonical URL, title, summary, media, built once
- ``decide``    pure rules: the next action, what an outcome makes of a record, backoff
- ``adapters``  the Protocol and the ``command`` kind; ``webhook`` the HTTP kind (httpx)
- ``shared``    every channel write is an atomic compare-and-swap push to the remote first
- ``lease``     the per-(channel, account) ledger on the remote: lease, rate window, counters,
                the settled intents
- ``claim``     the intent's claim on the remote: no send without one another clone can see;
                folded into the ledger once the send settles
- ``state``     channel documents in the job's state commits (shared through the remote);
                the index of unsettled jobs
- ``drive``     the driver: record the intent, send, record the outcome, reconcile
- ``live``      the live check of the published page
- ``resolve``   a person's way out (``--confirmed URL``, ``--not-sent``, ``--skip``)
- ``metrics``   the Prometheus text of ``git pub metrics``

May import: ``gitpub.pipeline``, ``gitpub.store``, ``gitpub.git``, ``gitpub.config``,
``gitpub.core`` (and httpx). ``gitpub.app`` drives it after delivery.
"""
