"""Which repository paths gitpub may write: the one definition, as pure functions of strings.

Three questions, asked of every path a job would write:

1. **Would some clone refuse it, or be hurt by it?** (``path_problem``) git refuses, when it
   reads a tree into the index, every spelling of ``.git`` that some file system maps to the
   repository's own directory (``core.protectNTFS``, on by default everywhere, and
   ``core.protectHFS``; ``git fsck`` reports the same names as ``hasDotgit``): NTFS drops
   trailing dots and spaces (``.git .``), resolves 8.3 short names (``git~1``) and alternate
   data streams (``.git::$INDEX_ALLOCATION``); HFS+ ignores some invisible code points
   (``.g\u200cit``) and case. Those rules are ported here from C git (``path.c``
   ``is_ntfs_dotgit``/``is_ntfs_dot_generic``, ``utf8.c`` ``is_hfs_dotgit``, ``read-cache.c``
   ``verify_path``); the git layer checks dulwich's validators as a second opinion
   (``gitpub.git.paths``). Besides, a path no clone can check out, or that reads as something
   else, is refused: not UTF-8, control or invisible direction-changing characters, a
   component over 255 bytes, and what Git for Windows refuses (reserved device names,
   ``<>:"|?*``, a trailing dot or space).
2. **Does it steer git, CI or gitpub?** (``is_steering``) ``.gitpub.yaml``, ``.github/``,
   ``.gitmodules``, ``.gitattributes``, ``.githooks/``, ``.gitlab-ci.yml`` — any component
   that starts with ``.git`` in any spelling a file system folds to it — and the files of other
   CI services, builds, deployments and tools in the one table ``STEERING``. A job may write
   one only if the configuration names it exactly (``Scope``); ``confirm`` and pre-push treat
   a job commit that touches one as suspect.
3. **Is it in the write scope?** (``Scope``) The configuration's ``publish`` globs.

Also ``case_key``: the form in which two paths that a case-insensitive (and
normalisation-insensitive) file system stores as one file are equal.

Standard library only (``re``, ``unicodedata``); no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import NamedTuple

MAX_COMPONENT_BYTES = 255  # NAME_MAX of ext4, XFS, APFS, NTFS (in UTF-16 units there)
MAX_PATH_BYTES = 4096  # PATH_MAX on Linux

#: Code points HFS+ ignores in file names (C git's utf8.c, ``next_hfs_char``).
HFS_IGNORABLE = frozenset(
    "\u200c\u200d\u200e\u200f"  # zero width non-joiner, joiner; left-to-right, right-to-left mark
    "\u202a\u202b\u202c\u202d\u202e"  # bidi embeddings, pop, overrides
    "\u206a\u206b\u206c\u206d\u206e\u206f"  # deprecated format characters
    "\ufeff"  # zero width no-break space (BOM)
)

#: Invisible characters that reorder or hide text: a name holding one reads as another name.
#: (Zero-width joiners stay allowed: scripts and emoji need them.)
_DECEPTIVE = re.compile("[\u200b\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_WINDOWS_FORBIDDEN = re.compile(r'[<>:"|?*]')
#: Matched on the ASCII-lower-cased component: a device name, then spaces, then the end, an
#: extension or a stream (``is_valid_win32_path`` in C git's ``compat/mingw.c``).
_WINDOWS_RESERVED = re.compile(
    r"(?:aux|prn|nul|con|conin\$|conout\$|com[1-9]|lpt[0-9]) *(?:[.:]|$)")

#: Paths that steer a CI service, a build, a deployment or a tool, from the repository root —
#: the one table (every name that starts with ``.git`` — ``.github/``, ``.gitlab-ci.yml``,
#: ``.gitpub.yaml``, ``.gitmodules`` … — steers too, at any depth: ``is_steering``). An entry
#: is a ``/``-separated path whose components may hold ``*`` (within one component); one that
#: ends in ``/`` covers everything below. Compared with each component folded as the most
#: forgiving file system folds it (ASCII case, HFS+ ignorables, trailing dots and spaces).
STEERING: tuple[str, ...] = (
    # CI services (GitHub, GitLab, Gitea and Forgejo live under .github/, .gitlab*, .gitea/)
    ".circleci/", ".travis.yml", ".drone.y*ml", ".woodpecker/", ".woodpecker.y*ml",
    ".forgejo/", ".buildkite/", "jenkinsfile*", "azure-pipelines.y*ml", ".azure-pipelines/",
    "bitbucket-pipelines.yml", ".cirrus.y*ml", ".cirrus.star", "appveyor.y*ml",
    ".appveyor.y*ml", ".semaphore/", "bitrise.y*ml", "codemagic.y*ml", ".readthedocs.y*ml",
    # who must review what
    "codeowners", "docs/codeowners",
    # hosting and deployment
    "netlify.toml", "vercel.json", "now.json", ".vercel/",
    # package managers and builds: they run the scripts these name
    "package.json", ".npmrc", ".yarnrc*", ".pnpmfile.cjs", "makefile", "gnumakefile",
    ".lfsconfig",
    # editors, shells and hooks that run what these say when the directory is opened
    ".devcontainer/", ".devcontainer.json", ".vscode/", ".envrc", ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    # dependency bots
    "renovate.json", "renovate.json5", ".renovaterc", ".renovaterc.json", ".renovaterc.json5",
)

#: Files git itself reads from the tree, with the prefix of their NTFS hashed short names
#: (C git's ``is_ntfs_dotgitmodules`` and friends).
GIT_META_FILES = {"gitmodules": "gi7eba", "gitattributes": "gi7d29", "gitignore": "gi250a",
                  "mailmap": "maba30"}

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
#: An NTFS 8.3 short name of a ``.git…`` name: the dot dropped, up to six characters, ``~N``,
#: up to three of the extension; or the hashed form Windows falls back to (two characters and
#: four hex digits). Matched after ``_fold``.
_GIT_SHORT_NAME = re.compile(
    r"(?:git[^~.]{0,3}|gi[0-9a-f]{4})~[1-9][0-9]*(?:\.[^.]{0,3})?[. ]*(?::.*)?")


def quoted(path: str) -> str:
    """``path`` as one line of text, quoted the way git quotes a path (``core.quotePath``
    false): a path holding a control character, a double quote, a backslash or bytes that are
    not UTF-8 is written between double quotes with C escapes (``"posts/a\\nb.md"``); any other
    path as it is. A path read from a tree or the working tree may be anything git stores."""
    raw = path.encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        plain = False
    else:
        plain = not any(b < 0x20 or b in (0x22, 0x5C, 0x7F) for b in raw)
    if plain:
        return path
    out = []
    for ch in path:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8 (surrogateescape)
            out.append(f"\\{code - 0xDC00:03o}")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\{code:03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v",
            "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def _ascii_lower(text: str) -> str:
    """Lower-case ASCII letters only: C git's ``tolower``/``strncasecmp`` on its ASCII needles."""
    return text.translate(_ASCII_LOWER)


# -- spellings of .git (C git's rules, ported) -------------------------------------------------

def _ntfs_trailer(name: str, start: int) -> bool:
    """Whether ``name[start:]`` is only what NTFS ignores: dots and spaces, up to the end or to
    an alternate data stream (``:``)."""
    for char in name[start:]:
        if char == ":":
            return True
        if char not in ". ":
            return False
    return True


def is_ntfs_dotgit(name: str) -> bool:
    """Whether NTFS resolves the component ``name`` to ``.git`` (``path.c``, ``is_ntfs_dotgit``):
    ``.git`` or its short name ``git~1``, in any case, followed only by dots and spaces, to the
    end, to a stream (``:``) or to a backslash (a directory separator there)."""
    low = _ascii_lower(name.partition("\\")[0])
    if low.startswith(".git"):
        return _ntfs_trailer(low, 4)
    if low.startswith("git~1"):
        return _ntfs_trailer(low, 5)
    return False


def is_ntfs_dot(name: str, needle: str, short_prefix: str) -> bool:
    """Whether NTFS resolves ``name`` to ``.<needle>`` (``path.c``, ``is_ntfs_dot_generic``):
    the name with trailing dots/spaces/stream, its short name ``<first six>~1..4``, or the
    hashed short name ``<short_prefix>~N`` Windows falls back to."""
    low = _ascii_lower(name)
    if low.startswith("." + needle):
        return _ntfs_trailer(name, len(needle) + 1)
    if low[:6] == needle[:6] and len(name) >= 8 and name[6] == "~" and name[7] in "1234":
        return _ntfs_trailer(name, 8)
    saw_tilde, i = False, 0
    while i < 8:
        if i >= len(name):
            return False
        char = name[i]
        if saw_tilde:
            if char not in "0123456789":
                return False
        elif char == "~":
            i += 1
            if i >= len(name) or not "1" <= name[i] <= "9":
                return False
            saw_tilde = True
        elif i >= 6 or ord(char) > 0x7F or _ascii_lower(char) != short_prefix[i]:
            return False
        i += 1
    return _ntfs_trailer(name, 8)


def is_hfs_dot(name: str, needle: str) -> bool:
    """Whether HFS+ resolves ``name`` to ``.<needle>`` (``utf8.c``, ``is_hfs_dot_generic``): the
    ignorable code points dropped, ASCII case folded."""
    visible = "".join(char for char in name if char not in HFS_IGNORABLE)
    return visible[:1] == "." and _ascii_lower(visible[1:]) == needle


def is_dotgit(name: str) -> bool:
    """Whether the component ``name`` is ``.git`` in any spelling git refuses (``hasDotgit``).
    An ASCII name holds no ignorable code point: it is one only when it starts with ``.`` or
    with ``git~1`` in any case (the only beginnings either rule accepts), which is asked first:
    every entry of every tree checked comes here. As ``git fsck``, what follows each backslash
    is asked too (``x\\.git`` is ``x/.git`` on Windows)."""
    if name.isascii() and not name.startswith(".") and name[:5].lower() != "git~1" \
            and "\\" not in name:
        return False
    return is_ntfs_dotgit(name) or is_hfs_dot(name, "git") or any(
        is_ntfs_dotgit(after) for after in name.split("\\")[1:])


def git_meta_name(name: str) -> str | None:
    """Which file git reads from the tree (``gitmodules``, ``gitattributes``, ``gitignore``,
    ``mailmap``) the component ``name`` spells on NTFS or HFS+, or None."""
    for needle, short in GIT_META_FILES.items():
        if is_ntfs_dot(name, needle, short) or is_hfs_dot(name, needle):
            return needle
    return None


# -- whether a path can be published at all ---------------------------------------------------

def structural_problem(path: str) -> str | None:
    """Why ``path`` is no repository path at all, or None: what a manifest may never hold.

    Relative, ``/``-separated, in normal form (no empty, ``.`` or ``..`` component), UTF-8, no
    control character or backslash, and no component that is ``.git`` in any spelling.
    """
    if not path or path.startswith("/") or path.endswith("/"):
        return "is not a relative file path"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    control = _CONTROL.search(path)
    if control:
        return f"contains a control character (U+{ord(control.group()):04X})"
    if "\\" in path:
        return "contains a backslash (a directory separator on Windows); separate with '/'"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return "is not in normal form (an empty, '.' or '..' component)"
        if is_dotgit(part):
            return (f"names git's own directory: {part!r} is .git on NTFS or HFS+ "
                    "(core.protectNTFS/core.protectHFS)")
    return None


def path_problem(path: str) -> str | None:
    """Why no job may write ``path``, or None: ``structural_problem``, and what would make a
    clone fail or mislead — too long, invisible characters, or a name Git for Windows refuses."""
    problem = structural_problem(path)
    if problem is not None:
        return problem
    deceptive = _DECEPTIVE.search(path)
    if deceptive:
        return ("contains an invisible or direction-changing character "
                f"(U+{ord(deceptive.group()):04X})")
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        return f"is longer than {MAX_PATH_BYTES} bytes"
    for part in path.split("/"):
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            return f"has a component longer than {MAX_COMPONENT_BYTES} bytes"
        forbidden = _WINDOWS_FORBIDDEN.search(part)
        if forbidden:
            return f"contains {forbidden.group()!r}, which Windows does not allow in file names"
        if _WINDOWS_RESERVED.match(_ascii_lower(part)):
            return f"{part!r} is a reserved device name on Windows"
        if part.endswith((" ", ".")):
            return f"{part!r} ends in a space or a dot, which Windows drops"
    return None


def symlink_problem(path: str) -> str | None:
    """Why ``path`` may not be a symbolic link, or None: git and ``fsck`` refuse a symlink as
    ``.gitmodules``, ``.gitattributes``, ``.gitignore`` or ``.mailmap`` in any spelling (and,
    as ``git fsck``, ``.gitmodules`` after any backslash: ``x\\.gitmodules``)."""
    name = path.rsplit("/", 1)[-1]
    meta = git_meta_name(name)
    if meta is None and any(is_ntfs_dot(after, "gitmodules", GIT_META_FILES["gitmodules"])
                            for after in name.split("\\")[1:]):
        meta = "gitmodules"
    return None if meta is None else f"a symbolic link may not be .{meta}"


# -- steering paths ---------------------------------------------------------------------------

def _fold(name: str) -> str:
    """``name`` as the most forgiving file system sees it: ignorable code points dropped,
    ASCII case folded."""
    return _ascii_lower("".join(char for char in name if char not in HFS_IGNORABLE))


def _table_entry(entry: str) -> tuple[tuple[tuple[str, bool], ...], bool]:
    """An entry of ``STEERING`` as (its components, each with whether it is a glob; whether
    it covers what is below)."""
    below = entry.endswith("/")
    return tuple((c, any(ch in c for ch in "*?[")) for c in entry.rstrip("/").split("/")), below


_STEERING = tuple(_table_entry(e) for e in STEERING)


def _matches(name: str, component: tuple[str, bool]) -> bool:
    """``fnmatchcase(name, pattern)``; a pattern without ``*?[`` matches only itself, which
    is asked without compiling it (a command compiled every pattern of the table once)."""
    pattern, glob = component
    return fnmatchcase(name, pattern) if glob else name == pattern


def _in_table(parts: list[str]) -> bool:
    folded = [_fold(p).rstrip(". ") for p in parts]
    for components, below in _STEERING:
        if len(folded) < len(components) or (len(folded) > len(components) and not below):
            continue
        if all(_matches(f, c) for f, c in zip(folded, components, strict=False)):
            return True
    return False


def is_steering(path: str) -> bool:
    """Whether writing ``path`` can change how git, a CI service, a build or gitpub behaves.

    Any component that starts with ``.git`` (``.github/``, ``.gitmodules``, ``.gitpub.yaml``,
    ...) in any spelling a file system folds to it (case, HFS+ ignorables, an NTFS short name
    such as ``GITHUB~1``), any spelling of ``.mailmap``, and the paths of ``STEERING``.
    """
    parts = path.split("/")
    for part in parts:
        folded = _fold(part)
        if folded.startswith(".git") or _GIT_SHORT_NAME.fullmatch(folded):
            return True
        if git_meta_name(part) is not None:
            return True
    return _in_table(parts)


# -- the write scope --------------------------------------------------------------------------

_GLOB_CHARS = re.compile(r"[*?\[]")


def is_literal(glob: str) -> bool:
    """Whether ``glob`` has no wildcard, i.e. names exactly one path."""
    return _GLOB_CHARS.search(glob) is None


class Scope(NamedTuple):
    """The paths a job may write: those ``pattern`` matches (a compiled ``publish`` glob list,
    used with ``fullmatch``), and exactly ``named``. A steering path must be named exactly."""

    pattern: re.Pattern[str]
    named: frozenset[str]
    globs: tuple[str, ...] = ()  # the globs ``pattern`` was made from, for messages

    def problem(self, path: str) -> str | None:
        """Why ``path`` is outside this scope, or None."""
        if path in self.named:
            return None
        if is_steering(path):
            return ("steers git, CI or gitpub (.git*, CI files): a job may write it only if "
                    "`publish` names it exactly")
        if self.pattern.fullmatch(path) is None:
            listed = ", ".join(self.globs[:4]) + (", ..." if len(self.globs) > 4 else "")
            return f"is outside the write scope (publish: {listed or 'nothing'})"
        return None


# -- case collisions --------------------------------------------------------------------------

def case_key(name: str) -> str:
    """The form in which names a case-insensitive, normalisation-insensitive file system
    (APFS, HFS+, NTFS) stores as one file are equal."""
    visible = "".join(char for char in name if char not in HFS_IGNORABLE)
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", visible).casefold())


def case_twins(paths: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of ``paths`` that such a file system would store as one file, or below one
    directory spelled two ways (``Posts/a.md`` and ``posts/b.md``): (earlier path, later path)."""
    seen: dict[str, tuple[str, str]] = {}  # key of a prefix -> (the prefix, the path it is in)
    pairs: list[tuple[str, str]] = []
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            key = "/".join(case_key(part) for part in parts[:depth])
            first_prefix, first_path = seen.setdefault(key, (prefix, path))
            if first_prefix != prefix:
                pairs.append((first_path, path))
                break
    return pairs
