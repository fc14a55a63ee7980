"""Reading what ``prepare`` is given: files, directories, or standard input.

``--to PATH SOURCE`` pairs: ``-`` is stdin, a directory maps below a ``--to`` ending in ``/``.
Each source becomes a ``Source`` (its label for messages and its bytes); nothing here writes.

Sources stay what they claim to be, and reading them never waits:

- only regular files are read. A FIFO, a socket or a device — as SOURCE, behind a symbolic link,
  or anywhere below a directory SOURCE — is refused before it is opened for reading (reading
  ``/dev/zero`` never ends, opening a FIFO blocks until a writer comes). Files are opened with
  ``O_NONBLOCK`` and checked again on the open descriptor, so a file swapped for a FIFO in
  between is refused too. Standard input may be a pipe, a file or a terminal, not a device;
- a directory SOURCE publishes the files below it, walked through directory descriptors with
  ``O_NOFOLLOW``: a symbolic link in it is followed only when it resolves to a regular file
  inside the directory; a link that leads out of it (or to a directory, or nowhere) is refused,
  naming it. So a directory never publishes a file from elsewhere. A link is resolved the same
  way, component by component from the directory's own descriptor (``_open_inside``): each
  directory opened relative to the one before with ``O_NOFOLLOW | O_DIRECTORY``, the file with
  ``O_NOFOLLOW``, ``..`` never above the directory. Nothing is re-opened by path after it was
  checked, so a directory swapped for a link to elsewhere in between is refused, not followed.

``resolve --from FILE`` reads the merged content under the same rules (``read_merged``), bounded
by ``MAX_MERGED_BYTES`` (an endless pipe is refused, not read forever), and refuses empty
content unless the person says it is meant (``--allow-empty``): an empty ``--from -`` is far
more often a mistake (``< /dev/null``, a failed command in a pipe) than a merge.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence

from gitpub.core.errors import UsageError
from gitpub.core.sanitize import sanitize
from gitpub.pipeline.request import Source

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def read_sources(
    targets: Sequence[str], sources: Sequence[str], drafted: bool
) -> tuple[list[str], list[Source]]:
    """Expand ``--to``/SOURCE pairs: ``-`` is stdin, a directory maps below a ``--to`` ending
    in ``/``."""
    if list(sources).count("-") > 1:
        raise UsageError("stdin (-) can be only one SOURCE")
    if drafted:
        return list(targets), [read_source(s) for s in sources]
    if len(targets) != len(sources):
        raise UsageError(f"{len(targets)} --to paths but {len(sources)} sources",
                         hint="give one SOURCE per --to PATH")
    out_targets: list[str] = []
    out_sources: list[Source] = []
    for target, source in zip(targets, sources, strict=True):
        if source != "-" and stat.S_ISDIR(_stat(source).st_mode):
            if not target.endswith("/"):
                raise UsageError(f"{_shown(source)} is a directory: its --to must end with '/'")
            files = read_directory(source)
            if not files:
                raise UsageError(f"{_shown(source)} is an empty directory")
            for rel, found in files:
                out_targets.append(target + rel)
                out_sources.append(found)
        else:
            if target.endswith("/"):
                raise UsageError(
                    f"--to {_shown(target)} ends with '/' but {_shown(source)} is not a directory")
            out_targets.append(target)
            out_sources.append(read_source(source))
    return out_targets, out_sources


def _shown(path: str) -> str:
    return sanitize(path)


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, for a message."""
    for test, name in ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def _refuse(label: str, mode: int) -> UsageError:
    return UsageError(f"{_shown(label)} is {_kind(mode)}: only regular files can be published",
                      hint="copy the content into a file, or give it on stdin with '-'")


def _stat(path: str) -> os.stat_result:
    try:
        return os.stat(path)
    except OSError as e:
        raise UsageError(f"cannot read {_shown(path)}: {e.strerror or e}") from None


def read_source(source: str) -> Source:
    """One file SOURCE (or ``-``, stdin) under the rules above: a regular file, never waited on."""
    if source == "-":
        return Source("-", _read_stdin())
    mode = _stat(source).st_mode
    if not stat.S_ISREG(mode):
        raise _refuse(source, mode)
    return Source(source, _read_regular(source, source))


#: The most bytes ``--from`` reads: GitHub's hard limit on one file.
MAX_MERGED_BYTES = 100 * 1024 * 1024


def read_merged(path: str, allow_empty: bool = False) -> bytes:
    """The merged content of ``resolve --from PATH`` (``-``: stdin): a regular file or stdin,
    never waited on, at most ``MAX_MERGED_BYTES``, and not empty unless ``allow_empty``."""
    label = f"--from {path}"
    if path == "-":
        data = _read_stdin(MAX_MERGED_BYTES + 1)
    else:
        mode = _stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(f"{_shown(label)} is {_kind(mode)}: only a regular file (or - for "
                             "stdin) can hold the merged content",
                             hint="write the merged content to a file and give its path")
        data = _read_regular(path, label, limit=MAX_MERGED_BYTES + 1)
    if len(data) > MAX_MERGED_BYTES:
        raise UsageError(f"{_shown(label)}: more than {MAX_MERGED_BYTES // (1024 * 1024)} MiB",
                         hint="give the merged file itself, not a stream that does not end")
    if not data and not allow_empty:
        raise UsageError(f"{_shown(label)} is empty: the file would be published empty",
                         hint="check the merged content; if the file is meant to become empty, "
                              "add --allow-empty")
    return data


def _read_stdin(limit: int = -1) -> bytes:
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None  # not a real descriptor (an embedding caller's stream): nothing to check
    if fd is not None:
        mode = os.fstat(fd).st_mode
        if stat.S_ISBLK(mode) or stat.S_ISDIR(mode) or (stat.S_ISCHR(mode)
                                                         and not os.isatty(fd)):
            raise _refuse("stdin", mode)
    return sys.stdin.buffer.read(limit)


def _read_regular(path: str, label: str, dir_fd: int | None = None,
                  nofollow: bool = False, limit: int = -1) -> bytes:
    """The content of the regular file ``path``; refused if it is anything else by the time
    it is open (``O_NONBLOCK``: opening a FIFO does not wait for a writer)."""
    flags = os.O_RDONLY | _NONBLOCK | _CLOEXEC | (_NOFOLLOW if nofollow else 0)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as e:
        raise UsageError(f"cannot read {_shown(label)}: {e.strerror or e}") from None
    with open(fd, "rb", closefd=True) as file:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refuse(label, mode)
        return file.read(limit)


def read_directory(root: str) -> list[tuple[str, Source]]:
    """Every regular file below the directory ``root``: (path relative to it, ``/``-separated,
    its Source), sorted. Refuses a FIFO, socket or device anywhere below, and a symbolic link
    that does not resolve to a regular file inside ``root``."""
    real_root = os.path.realpath(root)
    try:
        fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as e:
        raise UsageError(f"cannot read {_shown(root)}: {e.strerror or e}") from None
    found: list[tuple[str, Source]] = []
    try:
        _walk(_Root(fd, root, real_root), fd, "", found)
    finally:
        os.close(fd)
    return sorted(found, key=lambda item: item[0])


class _Root:
    """The directory SOURCE being read: its descriptor, its name and its real path."""

    def __init__(self, fd: int, name: str, real: str) -> None:
        self.fd, self.name, self.real = fd, name, real
        self.spellings = tuple(dict.fromkeys((real, os.path.abspath(name))))

    def inside(self, target: str) -> str | None:
        """An absolute link target as a path relative to the root, None if it is elsewhere."""
        for spelling in self.spellings:
            if target == spelling:
                return ""
            if target.startswith(spelling.rstrip("/") + "/"):
                return target[len(spelling.rstrip("/")) + 1:]
        return None


def _walk(root: _Root, dir_fd: int, rel_dir: str, found: list[tuple[str, Source]]) -> None:
    with os.scandir(dir_fd) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        rel = rel_dir + name
        label = os.path.join(root.name, rel)
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except OSError as e:
            raise UsageError(f"cannot read {_shown(label)}: {e.strerror or e}") from None
        if stat.S_ISDIR(mode):
            try:
                sub = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC,
                              dir_fd=dir_fd)
            except OSError as e:
                raise UsageError(f"cannot read {_shown(label)}: {e.strerror or e}") from None
            try:
                _walk(root, sub, rel + "/", found)
            finally:
                os.close(sub)
        elif stat.S_ISREG(mode):
            found.append((rel, Source(label, _read_regular(name, label, dir_fd, True))))
        elif stat.S_ISLNK(mode):
            found.append((rel, Source(label, _read_link(root, rel, label))))
        else:
            raise _refuse(label, mode)


#: At most this many symbolic links on the way to one file (Linux's own limit).
_MAX_LINKS = 40


def _read_link(root: _Root, rel: str, label: str) -> bytes:
    """The content a symbolic link inside ``root`` leads to: only a regular file inside it."""
    fd = _open_inside(root, rel.split("/"), label)
    with open(fd, "rb", closefd=True) as file:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refuse(label, mode)
        return file.read()


def _out_of(root: _Root, label: str) -> UsageError:
    return UsageError(
        f"{_shown(label)} is a symbolic link that leads out of {_shown(root.name)}: refused",
        hint="a directory SOURCE publishes only what is inside it; copy the file in")


def _open_inside(root: _Root, parts: list[str], label: str) -> int:
    """Open the regular file that ``parts`` (a path relative to ``root``) resolves to, following
    symbolic links component by component from the root's descriptor; refused when the way
    leaves the root, ends anywhere but at a regular file, or changes while it is walked."""
    stack = [os.dup(root.fd)]  # the directories from the root down to where we are
    pending = list(reversed(parts))  # components still to resolve, the next one last
    links = 0
    try:
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                if len(stack) == 1:
                    raise _out_of(root, label)
                os.close(stack.pop())
                continue
            here = stack[-1]
            try:
                mode = os.stat(name, dir_fd=here, follow_symlinks=False).st_mode
            except OSError:
                raise UsageError(f"{_shown(label)} is a broken symbolic link") from None
            if stat.S_ISLNK(mode):
                links += 1
                if links > _MAX_LINKS:
                    raise UsageError(f"{_shown(label)}: too many levels of symbolic links")
                try:
                    target = os.readlink(name, dir_fd=here)
                except OSError as e:  # it changed since the stat
                    raise UsageError(f"cannot read {_shown(label)}: {e.strerror or e} (it "
                                     "changed while it was read)") from None
                if target.startswith("/"):
                    inside = root.inside(os.path.normpath(target))
                    if inside is None:
                        raise _out_of(root, label)
                    while len(stack) > 1:
                        os.close(stack.pop())
                    target = inside
                pending.extend(reversed(target.split("/")))
                continue
            if pending and not stat.S_ISDIR(mode):
                raise UsageError(f"{_shown(label)} is a broken symbolic link")
            if not pending and not stat.S_ISREG(mode):
                raise UsageError(f"{_shown(label)} is a symbolic link to {_kind(mode)}: refused",
                                 hint="a symbolic link in a directory SOURCE may lead only to a "
                                      "file inside it")
            flags = (os.O_RDONLY | _DIRECTORY if pending else os.O_RDONLY | _NONBLOCK) \
                | _NOFOLLOW | _CLOEXEC
            try:
                fd = os.open(name, flags, dir_fd=here)
            except OSError as e:
                raise UsageError(f"cannot read {_shown(label)}: {e.strerror or e} (it changed "
                                 "while it was read)") from None
            if not pending:
                return fd
            stack.append(fd)
        raise UsageError(f"{_shown(label)} is a symbolic link to a directory: refused",
                         hint="a symbolic link in a directory SOURCE may lead only to a file "
                              "inside it")
    finally:
        for fd in stack:
            os.close(fd)
