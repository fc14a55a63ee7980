"""The job store: jobs as refs under ``refs/pub/``, each moved only by compare-and-swap.

- ``jobs``         one ref per job; its state commits are the job's event history; the
                   active-job index (``refs/pub/active/``) that keeps status and push cheap
- ``lease``        which process may work on a job right now
- ``outbox``       content changes made outside gitpub, recorded for ``git pub sync``
- ``shared``       the remote's job store as last fetched (``refs/pub/remote/<remote>/``): a
                   job found anywhere, how this clone's value relates to the remote's
- ``mirror``       where this clone keeps the remote's refs: ``refs/remotes/<remote>/``, and
                   its job store under ``refs/pub/remote/<remote>/``
- ``fetch``        one fetch of the branch and the remote's ``refs/pub/*``; its records alone
                   (a shallow clone)
- ``fetchdir``     the private fetch repository (``.git/pub/fetch.git``) every fetch runs in
- ``archive``      the archive of finished jobs (format; the fold is ``delivery.fold``)
- ``maintenance``  keeping many refs cheap for git itself (packing with git's ``pack-refs``)

May import: ``gitpub.git``, ``gitpub.config``, ``gitpub.core``.
"""
