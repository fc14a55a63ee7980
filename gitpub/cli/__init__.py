"""The command line: click commands and rendering only.

- ``entry``    the ``git-pub`` executable: a plain ``confirm`` command line goes to ``fast``
               (read without click: CI runs it on every push), every other to ``main``
- ``main``     the click commands, and ``main``: every other command line
- ``guard``    the one error handler: every outcome as an exit code, errors as one line + hint
- ``options``  ``--json``/``--debug`` on every command; the working directory after ``-C``
- ``output``   human text or one JSON object; progress on stderr; errors as one line + hint
- ``render``   results as text and as JSON; ``confirm_view``: confirm's report
- ``hooks``    ``git pub hooks …`` and ``hook-impl``
- ``generate`` the man page and the bash/zsh completions, written from the click definitions

May import: ``gitpub.app`` and ``gitpub.core`` only (an import contract). The only layer that
imports click (``entry`` and ``fast`` do not).
"""
