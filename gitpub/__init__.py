"""gitpub: crash-safe publishing of content into git repositories.

The subpackages are the architecture; each one's docstring says what it owns and what it may
import, and ``lint-imports`` (the contracts in ``pyproject.toml``) holds them to it. From the top:

- ``cli``       the command line: click and rendering only (imports ``app`` and ``core`` only)
- ``app``       the commands as functions, one module each: arguments in, results out
- ``hooks``     the git hooks gitpub installs, and their work  ·  ``delivery``  fetch, probe,
                rebase, push, confirm; resolve; sync of hand edits  ·  ``channels``
                distribution to other platforms
- ``pipeline``  the offline pipeline from request to local content commit
- ``runtime``   a command's session and context, the processes it starts, its lock policy
- ``fonts``     deterministic font subsets  ·  ``verify``  proofs of publication, and confirm
- ``store``     the job store under ``refs/pub/``: jobs, leases, outbox, its fetch
                ·  ``proof``  the trailers a publication carries
- ``git``       the git layer: C git, dulwich for object writes  ·  ``config``  .gitpub.yaml
                ·  ``forge``  the pull/merge requests of GitHub, GitLab, Gitea (REST, httpx)
- ``core``      pure values: states, records, manifests, the sanitizer, globs, errors

A layer imports only from the layers below it (siblings on one line are independent); dulwich
is imported only in ``git``, click only in ``cli``, httpx only in ``channels`` and ``forge``,
and processes are started only by
``git.run`` (C git), ``runtime.steps`` (commands) and the hooks' stdlib-only fast path
(``hooks.fast``). docs/design.md explains the design,
docs/dulwich.md the dulwich behaviours the git layer guards against.
"""

__version__ = "0.1.0"
