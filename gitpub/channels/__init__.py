"""Channels: distributing a published article to other platforms, never twice, never "maybe".

Each channel of a published job is a branch of the job with its own state (docs/design.md §11).

- ``model``     channel and live-check records, their statuses and legal moves, the three
                outcomes of a send (sent, not sent, unknown); strict parsing
- ``payload``   the frozen payload: canonical URL, title, summary, media, built once
- ``decide``    pure rules: the next action, what an outcome makes of a record, backoff
- ``adapters``  the Protocol and the ``command`` kind; ``webhook`` the HTTP kind (httpx)
- ``lease``     the per-(channel, account) lease and rate window, a ref moved by CAS
- ``claim``     the intent's claim on the remote: no send without one another clone can see
- ``state``     channel documents in the job's state commits; the index of unsettled jobs
- ``drive``     the driver: record the intent, send, record the outcome, reconcile
- ``live``      the live check of the published page
- ``resolve``   a person's way out (``--confirmed URL``, ``--not-sent``, ``--skip``)
- ``metrics``   the Prometheus text of ``git pub metrics``

May import: ``gitpub.pipeline``, ``gitpub.store``, ``gitpub.git``, ``gitpub.config``,
``gitpub.core`` (and httpx). ``gitpub.app`` drives it after delivery.
"""
