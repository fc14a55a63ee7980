"""The command line: click commands and rendering only.

- ``entry``    the ``git-pub`` executable: ``--version`` before any import, the plain forms of
               ``status`` and ``log`` to ``quick``, else ``main``
- ``quick``    ``status`` and ``log`` without click (the same functions the click commands run)
- ``guard``    the one error handler: every outcome as an exit code, errors as one line + hint
- ``main``     the click commands
- ``lazy``     modules imported on first use (``-h`` does not load the commands)
- ``options``  ``--json``/``--debug`` on every command; the working directory after ``-C``
- ``output``   human text or one JSON object; progress on stderr; errors as one line + hint
- ``render``   results as text and as JSON
- ``hooks``    ``git pub hooks …`` and ``hook-impl`` (loaded on first use)
- ``demo``     the end-to-end demo
- ``generate`` the man page and the bash/zsh completions, written from the click definitions

May import: everything. The only layer that imports click.
"""
