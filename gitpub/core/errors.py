"""One error hierarchy, each error carrying the exit code of the command-line contract.

Users see one line saying what went wrong and, where we know one, a ``hint:`` line saying what to
do. Tracebacks are for ``--debug`` only.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_KEY_REUSED = 3
EXIT_NEEDS_PERSON = 4
EXIT_UNCONFIRMED = 5


class GitpubError(Exception):
    """An expected failure: reported as one line (plus a hint), never as a traceback."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(GitpubError):
    """Bad input from the user: arguments, source files, configuration."""

    exit_code = EXIT_USAGE


#: The configuration file, at the top of the repository (``config``).
CONFIG_FILE = ".gitpub.yaml"


class ConfigError(UsageError):
    """The configuration file is unreadable or invalid.

    A ``UsageError`` so the command line reports it as one line plus ``hint:`` with the usage exit
    code. The message always starts with the file name and, where there is one, the key path
    (``retry.max_attempts``, ``gates[1].run``), so the user can go straight to the mistake.
    """

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        source: str | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.source = source
        self.key = key


class KeyReusedError(GitpubError):
    """An idempotency key already names a job whose request differs from this one."""

    exit_code = EXIT_KEY_REUSED


class CorruptStateError(GitpubError):
    """A job's state cannot be read: it is reported and left exactly as it is, for repair."""

    exit_code = EXIT_ERROR


class FontError(UsageError):
    """The font cannot be used: not a font, a face the collection lacks, or fontTools failed on it.

    A usage error: the font is a file in the user's repository, named by ``.gitpub.yaml``.
    """


class TryLaterError(GitpubError):
    """Nothing was done because something is not available right now (another process holds
    the job, the remote does not answer): the same command, run later, may succeed."""

    exit_code = EXIT_UNCONFIRMED


class NotARepositoryError(GitpubError):
    exit_code = EXIT_USAGE


class LostRace(Exception):
    """A compare-and-swap found another value: someone else moved the ref first.

    Not a user-visible error: callers re-read and decide (usually: do nothing more).
    """
