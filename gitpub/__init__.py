"""gitpub: crash-safe publishing of content into git repositories.

The subpackages are the architecture; each one's docstring says what it owns and what it may
import, and ``lint-imports`` (the contracts in ``pyproject.toml``) holds them to it. From the top:

- ``cli``       the command line: click and rendering only
- ``app``       the commands as functions: arguments in, results out
- ``hooks``     the git hooks gitpub installs, and their work  ·  ``delivery``  fetch, probe,
                rebase, push, confirm; resolve; sync of hand edits
- ``pipeline``  the offline pipeline from request to local content commit
- ``fonts``     deterministic font subsets  ·  ``verify``  proofs of publication, and confirm
- ``store``     the job store under ``refs/pub/``: jobs, leases, outbox
- ``git``       the git layer: dulwich, and the one C-git runner  ·  ``config``  .gitpub.yaml
- ``core``      pure values: states, records, manifests, the sanitizer, globs, errors

A layer imports only from the layers below it (siblings on one line are independent); dulwich
is imported only in ``git``, click only in ``cli``. docs/design.md explains the design,
docs/dulwich.md the dulwich behaviours the git layer guards against.
"""

__version__ = "0.1.0"
