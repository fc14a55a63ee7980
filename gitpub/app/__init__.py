"""The commands as functions: plain arguments in, a result value out; one module per command.

- ``initialize`` ``git pub init``
- ``prepare``   ``git pub prepare``
- ``status``    ``git pub status`` and ``git pub log``
- ``push``      ``git pub push`` and ``git pub reconcile`` (and folding into the archive)
- ``sync``      ``git pub sync``
- ``plan``      ``push --dry-run`` / ``sync --dry-run``: what would be pushed, writing nothing
- ``resolve``   ``git pub resolve`` (a job, or one of its channels)
- ``confirm``   ``git pub confirm``, CI's command
- ``doctor``    ``git pub doctor [--fix]``
- ``metrics``   ``git pub metrics``
- ``hooks``     ``git pub hooks install|uninstall`` and ``hook-impl``
- ``secrets``   ``git pub secrets baseline``: the findings already on the branch, as allowlist rules
- ``demo``      ``git pub demo``
- ``results``   what the commands return, and the exit codes they carry
- ``common``    what the commands that deliver share: delivering jobs, folding the finished
- ``distribution``  driving the published jobs' channels (``prepare`` loads no delivery code)

May import everything below it. Never click, never printing: the command line
(``gitpub.cli``) renders what these return, and imports a command's module only when that
command runs (``git pub status`` loads neither the delivery machinery nor the verifier).
"""
