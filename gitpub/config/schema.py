"""``.gitpub.yaml``: the committed configuration every writer node of a site shares.

The file lives at the repository root and is committed, so every machine publishing into the same
site applies the same rules: which paths are articles, which gates a job must pass, how pushes are
retried. This module turns the YAML into small frozen dataclasses, so nothing else in gitpub sees
raw YAML, and it refuses anything doubtful — an unknown key, a wrong type, a path that leaves the
repository — with one line naming the file and the key. A typo in a file that drives automated
commits must stop the tool, not be silently ignored.

Paths and globs are relative to the repository root, ``/``-separated and anchored there: ``*``
and ``?`` never cross a ``/``, ``[...]`` is a character class (``[!...]`` or ``[^...]`` negates)
and a ``**`` path component matches zero or more directories (a trailing ``/**`` matches
everything below a directory). ``**`` inside a component is an ordinary ``*``, as in gitignore.
There are no escapes: backslashes are refused, ``[*]`` matches a literal star.

Hooks import this module, so importing it stays cheap: PyYAML, difflib and importlib.resources are
imported inside the functions that need them, and ``typing`` is imported only by type checkers.
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import dataclass, field

from gitpub.core.errors import UsageError

TYPE_CHECKING = False  # typing costs ~1.5 ms to import; mypy treats this name as True
if TYPE_CHECKING:
    import pathlib
    from collections.abc import Hashable
    from typing import Any, NoReturn

    import yaml

__all__ = [
    "CONFIG_FILE",
    "Command",
    "Config",
    "ConfigError",
    "FontSpec",
    "RetryPolicy",
    "default_config_text",
    "default_node",
    "load_config",
    "parse_config",
]

CONFIG_FILE = ".gitpub.yaml"

DEFAULT_REMOTE = "origin"
DEFAULT_BRANCH = "main"
DEFAULT_ARTICLES: tuple[str, ...] = ("content/**/*.md", "posts/**/*.md", "_posts/**/*.md")
DEFAULT_TRAILER_PREFIX = "Blog"
DEFAULT_DRAFT_TIMEOUT = 600.0
DEFAULT_JUDGE_TIMEOUT = 120.0
DEFAULT_GATE_TIMEOUT = 120.0

FONT_SOURCE_EXTENSIONS = (".ttf", ".otf", ".ttc")
FONT_OUTPUT_EXTENSIONS = (".woff2", ".woff", ".ttf")


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


@dataclass(frozen=True)
class Command:
    """A pipeline command, normalised: whatever form the YAML used, steps run ``argv`` directly.

    A YAML string becomes ``("sh", "-c", string)``; a YAML list is the argv itself (no shell).
    ``name`` is ``draft``, ``judge`` or the gate's name, for reports.
    """

    name: str
    argv: tuple[str, ...]
    timeout: float


@dataclass(frozen=True)
class FontSpec:
    """A font to subset: the glyphs ``text`` files use, cut from ``source``, written to ``output``.

    ``face`` picks the font inside a ``.ttc`` collection; it is 0 for single fonts.
    """

    source: str
    output: str
    text: tuple[str, ...]
    face: int = 0


@dataclass(frozen=True)
class RetryPolicy:
    """How transient failures (e.g. a push that lost a race to another node) are retried.

    Exponential backoff: the wait starts at ``backoff_base`` seconds, grows up to ``backoff_max``
    and is randomised by the fraction ``jitter`` so that nodes that collided do not collide again.
    """

    max_attempts: int = 5
    backoff_base: float = 30.0
    backoff_max: float = 3600.0
    jitter: float = 0.2


def default_node() -> str:
    """This machine's writer-node name: its host name, sanitised to ``[A-Za-z0-9._-]``.

    Sanitised further so it is always a valid ``node``: it starts and ends with a letter or digit
    and has no ``..`` (node names end up in trailers, ref names and file names).
    """
    try:
        host = os.uname().nodename
    except AttributeError:  # pragma: no cover - Windows
        import socket

        host = socket.gethostname()
    return _sanitize_node(host)


def _sanitize_node(host: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", host)
    name = re.sub(r"\.{2,}", ".", name).strip("._-")
    return name or "node"


@dataclass(frozen=True)
class Config:
    """The whole configuration. ``Config()`` is the configuration of a repository without a file.

    Lists are tuples so that a Config is immutable and hashable; the glob lists are compiled (and
    checked) once, when the Config is made.
    """

    remote: str = DEFAULT_REMOTE
    branch: str = DEFAULT_BRANCH
    articles: tuple[str, ...] = DEFAULT_ARTICLES
    fonts: tuple[FontSpec, ...] = ()
    trailer_prefix: str = DEFAULT_TRAILER_PREFIX
    node: str = field(default_factory=default_node)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    draft: Command | None = None
    judge: Command | None = None
    gates: tuple[Command, ...] = ()
    content: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Callers building a Config by hand may pass lists; keep the instance hashable.
        for name in ("articles", "fonts", "gates", "content"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        # Compile now (cached by pattern list) so a malformed glob fails here, not at first use.
        _compile_globs(self.articles)
        _compile_globs(self.content)

    @functools.cached_property
    def _articles_re(self) -> re.Pattern[str]:
        return _compile_globs(self.articles)

    @functools.cached_property
    def _content_re(self) -> re.Pattern[str]:
        return _compile_globs(self.content)

    @functools.cached_property
    def _font_outputs(self) -> frozenset[str]:
        return frozenset(font.output for font in self.fonts)

    def is_article(self, path: str) -> bool:
        """Whether ``path`` (relative to the repository root, ``/``-separated) is an article.

        A path that is not in normal form (absolute, ``.``/``..``/empty components, backslashes,
        control characters, inside ``.git``) is never an article, whatever the globs say.
        """
        return _is_clean_path(path) and self._articles_re.fullmatch(path) is not None

    def is_content(self, path: str) -> bool:
        """Whether ``git pub sync`` may publish ``path``: an article, a font output, ``content``."""
        if not _is_clean_path(path):
            return False
        return (
            path in self._font_outputs
            or self._articles_re.fullmatch(path) is not None
            or self._content_re.fullmatch(path) is not None
        )


# -- globs ----------------------------------------------------------------------------------------

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def _path_problem(path: str) -> tuple[str, str | None] | None:
    """Why ``path`` (a path or glob from the file) may not be used, as (problem, hint), or None.

    The rules keep every configured path inside the repository's working tree and in the one
    spelling git uses, so a glob can never match something outside the repository or in ``.git``.
    """
    if not path:
        return "expected a non-empty path, got ''", None
    if _CONTROL_RE.search(path):
        return f"must not contain control characters, got {_show(path)}", None
    if "\\" in path:
        return (
            f"must not contain backslashes, got {_show(path)}",
            "separate directories with '/'; to match a literal glob character use a class: '[*]'",
        )
    if path.startswith("/"):
        return (
            f"must be relative to the repository root, got {_show(path)}",
            f"drop the leading '/': {path.lstrip('/')!r}" if path.strip("/") else None,
        )
    parts = path.split("/")
    if ".." in parts:
        return f"must not contain '..' components, got {_show(path)}", None
    if any(part in ("", ".") for part in parts):
        hint: str | None = None
        if path.endswith("/") and path.strip("/"):
            hint = f"to mean everything below a directory write {path.rstrip('/') + '/**'!r}"
        else:
            normal = "/".join(part for part in parts if part not in ("", "."))
            if normal:
                hint = f"write {normal!r}"
        return f"must not contain empty or '.' components, got {_show(path)}", hint
    if any(part.lower() == ".git" for part in parts):
        return f"must not point into .git, got {_show(path)}", None
    return None


def _is_clean_path(path: str) -> bool:
    """The fast form of ``_path_problem(path) is None``, for matching repository paths."""
    if not path or path[0] == "/" or path[-1] == "/" or "//" in path or "\\" in path:
        return False
    if _CONTROL_RE.search(path):
        return False
    return all(part not in (".", "..") and part.lower() != ".git" for part in path.split("/"))


def _segment_regex(segment: str) -> str:
    """The regex for one path component of a glob (which contains no ``/``)."""
    out: list[str] = []
    i, n = 0, len(segment)
    while i < n:
        char = segment[i]
        if char == "*":
            while i + 1 < n and segment[i + 1] == "*":  # '**' inside a component is just '*'
                i += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            j = i + 1
            negate = j < n and segment[j] in "!^"
            if negate:
                j += 1
            start = j
            if j < n and segment[j] == "]":  # a ']' first in the class is literal
                j += 1
            while j < n and segment[j] != "]":
                j += 1
            if j >= n:
                raise ValueError(
                    f"unterminated character class in {segment!r} (write '[[]' for a literal '[')"
                )
            out.append(_class_regex(segment[start:j], negate))
            i = j
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _class_regex(body: str, negate: bool) -> str:
    items: list[str] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            low, high = body[k], body[k + 2]
            if low > high:
                raise ValueError(f"character range {low}-{high} is out of order")
            items.append(f"{re.escape(low)}-{re.escape(high)}")
            k += 3
        else:
            items.append(re.escape(body[k]))
            k += 1
    # A negated class must still never match the separator.
    return ("[^/" if negate else "[") + "".join(items) + "]"


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> str:
    """Translate one glob to a regex for ``fullmatch``; ValueError says why it is invalid."""
    problem = _path_problem(pattern)
    if problem is not None:
        raise ValueError(problem[0])
    segments: list[str] = []
    for segment in pattern.split("/"):
        if segment == "**" and segments and segments[-1] == "**":
            continue  # '**/**' is '**'
        segments.append(segment)
    out: list[str] = []
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if segment == "**":
            # Followed by more: zero or more whole directories. Last: everything below.
            out.append(".+" if index == last else "(?:[^/]+/)*")
        else:
            out.append(_segment_regex(segment))
            if index != last:
                out.append("/")
    return "".join(out)


@functools.lru_cache(maxsize=64)
def _compile_globs(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching any of ``globs`` (use ``fullmatch``); ValueError for a bad glob."""
    if not globs:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{_glob_regex(glob)})" for glob in globs))


# -- parsing --------------------------------------------------------------------------------------

_TOP_KEYS = (
    "remote",
    "branch",
    "articles",
    "content",
    "fonts",
    "trailer_prefix",
    "node",
    "retry",
    "draft",
    "judge",
    "gates",
)
_RETRY_KEYS = ("max_attempts", "backoff_base", "backoff_max", "jitter")
_FONT_KEYS = ("source", "output", "text", "face")
_GATE_KEYS = ("name", "run", "timeout")
_COMMAND_KEYS = ("run", "timeout")

_TRAILER_TOKEN_RE = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
_NODE_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_REF_BAD_CHARS_RE = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")

_COMMAND_FORMS = "a command (a string, run with sh -c, or a list of strings, run directly)"


def _show(value: object) -> str:
    """``repr`` of a bad value for an error message, cut short: the file may hold anything."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _ref_problem(name: str) -> tuple[str, str | None] | None:
    """Why ``name`` is not a usable branch name (git check-ref-format rules), or None."""
    if name.startswith("-"):
        return "must not start with '-'", None
    if name.startswith("refs/"):
        short = name.removeprefix("refs/heads/")
        return "expected a branch name, not a ref", f"write {short!r}" if short != name else None
    if _REF_BAD_CHARS_RE.search(name):
        return "must not contain spaces, control characters or any of ~ ^ : ? * [ \\", None
    if name == "@" or "@{" in name or ".." in name or "//" in name:
        return "is not a valid git branch name ('@', '@{', '..' and '//' are not allowed)", None
    if name.endswith(("/", ".")) or name.startswith("/"):
        return "is not a valid git branch name (no '/' first, no '/' or '.' last)", None
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return "is not a valid git branch name (no part may start with '.' or end in '.lock')", None
    return None


class _Parser:
    """Turns the loaded YAML into a Config; every failure names ``source`` and the key path."""

    def __init__(self, source: str) -> None:
        self.source = source

    # -- errors

    def fail(self, key: str, problem: str, hint: str | None = None) -> NoReturn:
        where = f"{self.source}: {key}: " if key else f"{self.source}: "
        raise ConfigError(where + problem, hint, source=self.source, key=key or None)

    def expected(self, key: str, what: str, value: object, hint: str | None = None) -> NoReturn:
        if hint is None and what == "a string" and isinstance(value, bool | int | float):
            hint = (
                "YAML reads unquoted true/false/yes/no/on/off as booleans and digits as numbers; "
                "put the value in quotes"
            )
        self.fail(key, f"expected {what}, got {_show(value)}", hint)

    # -- structure

    def mapping(self, value: object, key: str, known: tuple[str, ...]) -> dict[str, object]:
        """A mapping whose keys are all in ``known`` (the first unknown key is reported)."""
        if not isinstance(value, dict):
            self.expected(key, "a mapping", value)
        result: dict[str, object] = {}
        for item_key, item in value.items():
            if not isinstance(item_key, str):
                hint = None
                if isinstance(item_key, bool):
                    hint = "YAML reads unquoted yes/no/on/off as booleans; quote the key"
                self.fail(key, f"keys must be strings, got {_show(item_key)}", hint)
            if item_key not in known:
                self.fail(_join(key, item_key), "unknown key", _suggest(item_key, key, known))
            result[item_key] = item
        return result

    def required(self, mapping: dict[str, object], key: str, name: str) -> object:
        if name not in mapping:
            self.fail(_join(key, name), "required key is missing")
        return mapping[name]

    # -- scalars

    def string(self, value: object, key: str) -> str:
        if not isinstance(value, str):
            self.expected(key, "a string", value)
        if not value.strip():
            self.fail(key, f"expected a non-empty string, got {_show(value)}")
        return value

    def name(self, value: object, key: str) -> str:
        """A one-line string that may be shown, or passed to git, as a single word."""
        text = self.string(value, key)
        if _CONTROL_RE.search(text) or text != text.strip():
            self.fail(key, f"must be one line without surrounding spaces, got {_show(text)}")
        if text.startswith("-"):
            self.fail(key, f"must not start with '-', got {_show(text)}")
        return text

    def integer(self, value: object, key: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.expected(key, f"an integer >= {minimum}", value)
        return value

    def number(self, value: object, key: str, what: str) -> float:
        """A finite int or float (never a bool), as float; range checks are the caller's."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.expected(key, what, value)
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            number = math.inf
        if not math.isfinite(number):
            self.expected(key, what, value)
        return number

    def seconds(self, value: object, key: str) -> float:
        what = "a number of seconds > 0"
        number = self.number(value, key, what)
        if number <= 0:
            self.expected(key, what, value)
        return number

    # -- paths and globs

    def path(self, value: object, key: str, extensions: tuple[str, ...]) -> str:
        path = self.string(value, key)
        problem = _path_problem(path)
        if problem is not None:
            self.fail(key, *problem)
        if not path.lower().endswith(extensions):
            kinds = ", ".join(extensions[:-1]) + " or " + extensions[-1]
            self.fail(key, f"expected a path ending in {kinds}, got {_show(path)}")
        return path

    def glob(self, value: object, key: str) -> str:
        if not isinstance(value, str):
            self.expected(key, "a glob string", value)
        problem = _path_problem(value)
        if problem is not None:
            self.fail(key, *problem)
        try:
            _glob_regex(value)
        except ValueError as error:
            self.fail(key, f"invalid glob {_show(value)}: {error}")
        return value

    def globs(self, value: object, key: str, *, allow_empty: bool) -> tuple[str, ...]:
        if value is None and allow_empty:
            return ()
        if not isinstance(value, list):
            hint = None
            if isinstance(value, str):
                hint = f"write a list: {key.rsplit('.', 1)[-1]}: [{value!r}]"
            self.expected(key, "a list of glob strings", value, hint)
        if not value and not allow_empty:
            self.fail(key, "expected at least one glob, got []")
        return tuple(self.glob(item, f"{key}[{index}]") for index, item in enumerate(value))

    # -- commands

    def argv(self, value: object, key: str) -> tuple[str, ...]:
        if isinstance(value, str):
            if not value.strip():
                self.fail(key, f"expected a non-empty command, got {_show(value)}")
            if "\x00" in value:
                self.fail(key, "must not contain NUL characters")
            return ("sh", "-c", value)
        if isinstance(value, list):
            if not value:
                self.fail(key, "expected a non-empty command, got []")
            argv: list[str] = []
            for index, item in enumerate(value):
                if not isinstance(item, str):
                    self.expected(f"{key}[{index}]", "a string", item)
                if "\x00" in item:
                    self.fail(f"{key}[{index}]", "must not contain NUL characters")
                argv.append(item)
            if not argv[0].strip():
                self.fail(f"{key}[0]", f"expected a program name, got {_show(argv[0])}")
            return tuple(argv)
        self.expected(key, _COMMAND_FORMS, value)

    def command(self, value: object, key: str, default_timeout: float) -> Command | None:
        """``draft``/``judge``: absent or null for none, else a command, maybe as {run, timeout}."""
        if value is None:
            return None
        timeout = default_timeout
        if isinstance(value, dict):
            mapping = self.mapping(value, key, _COMMAND_KEYS)
            argv = self.argv(self.required(mapping, key, "run"), _join(key, "run"))
            if "timeout" in mapping:
                timeout = self.seconds(mapping["timeout"], _join(key, "timeout"))
        else:
            argv = self.argv(value, key)
        return Command(name=key, argv=argv, timeout=timeout)

    def gates(self, value: object, key: str) -> tuple[Command, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.expected(key, "a list of gates ({name, run} mappings)", value)
        gates: list[Command] = []
        seen: dict[str, int] = {}
        for index, item in enumerate(value):
            item_key = f"{key}[{index}]"
            if not isinstance(item, dict):
                self.expected(
                    item_key,
                    "a mapping with 'name' and 'run'",
                    item,
                    "e.g. - {name: spelling, run: 'make spellcheck'}",
                )
            mapping = self.mapping(item, item_key, _GATE_KEYS)
            name_key = _join(item_key, "name")
            name = self.name(self.required(mapping, item_key, "name"), name_key)
            if name in seen:
                self.fail(name_key, f"duplicate gate name {name!r} (also {key}[{seen[name]}])")
            seen[name] = index
            argv = self.argv(self.required(mapping, item_key, "run"), _join(item_key, "run"))
            timeout = DEFAULT_GATE_TIMEOUT
            if "timeout" in mapping:
                timeout = self.seconds(mapping["timeout"], _join(item_key, "timeout"))
            gates.append(Command(name=name, argv=argv, timeout=timeout))
        return tuple(gates)

    # -- the other sections

    def fonts(self, value: object, key: str) -> tuple[FontSpec, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.expected(key, "a list of fonts ({source, output, text} mappings)", value)
        fonts: list[FontSpec] = []
        outputs: dict[str, int] = {}
        for index, item in enumerate(value):
            item_key = f"{key}[{index}]"
            if not isinstance(item, dict):
                self.expected(item_key, "a mapping with 'source', 'output' and 'text'", item)
            mapping = self.mapping(item, item_key, _FONT_KEYS)
            source = self.path(
                self.required(mapping, item_key, "source"),
                _join(item_key, "source"),
                FONT_SOURCE_EXTENSIONS,
            )
            output_key = _join(item_key, "output")
            output = self.path(
                self.required(mapping, item_key, "output"), output_key, FONT_OUTPUT_EXTENSIONS
            )
            if output == source:
                self.fail(output_key, "must differ from source: the full font would be overwritten")
            if output in outputs:
                self.fail(output_key, f"same output as {key}[{outputs[output]}]: {output!r}")
            outputs[output] = index
            text = self.globs(
                self.required(mapping, item_key, "text"), _join(item_key, "text"), allow_empty=False
            )
            face = 0
            if "face" in mapping:
                face_key = _join(item_key, "face")
                face = self.integer(mapping["face"], face_key, 0)
                if face and not source.lower().endswith(".ttc"):
                    self.fail(face_key, f"only a .ttc collection has several faces, got {face}")
            fonts.append(FontSpec(source=source, output=output, text=text, face=face))
        return tuple(fonts)

    def retry(self, value: object, key: str) -> RetryPolicy:
        default = RetryPolicy()
        if value is None:
            return default
        mapping = self.mapping(value, key, _RETRY_KEYS)
        max_attempts = default.max_attempts
        if "max_attempts" in mapping:
            max_attempts = self.integer(mapping["max_attempts"], _join(key, "max_attempts"), 1)
        backoff_base = default.backoff_base
        if "backoff_base" in mapping:
            backoff_base = self.seconds(mapping["backoff_base"], _join(key, "backoff_base"))
        backoff_max = default.backoff_max
        if "backoff_max" in mapping:
            backoff_max = self.seconds(mapping["backoff_max"], _join(key, "backoff_max"))
        if backoff_max < backoff_base:
            self.fail(
                _join(key, "backoff_max"),
                f"must be >= {_join(key, 'backoff_base')} ({backoff_base:g}), got {backoff_max:g}",
            )
        jitter = default.jitter
        if "jitter" in mapping:
            what = "a number between 0 and 1"
            jitter = self.number(mapping["jitter"], _join(key, "jitter"), what)
            if not 0.0 <= jitter <= 1.0:
                self.expected(_join(key, "jitter"), what, mapping["jitter"])
        return RetryPolicy(max_attempts, backoff_base, backoff_max, jitter)

    def config(self, data: object) -> Config:
        if data is None:  # an empty file, or only comments
            data = {}
        if not isinstance(data, dict):
            self.fail(
                "",
                f"expected a mapping of keys at the top level, got {_show(data)}",
                f"start from the template `git pub init` writes, e.g. 'remote: {DEFAULT_REMOTE}'",
            )
        top = self.mapping(data, "", _TOP_KEYS)
        kwargs: dict[str, Any] = {}
        if "remote" in top:
            kwargs["remote"] = self.name(top["remote"], "remote")
        if "branch" in top:
            branch = self.name(top["branch"], "branch")
            problem = _ref_problem(branch)
            if problem is not None:
                self.fail("branch", f"{problem[0]}, got {_show(branch)}", problem[1])
            kwargs["branch"] = branch
        if "articles" in top:
            kwargs["articles"] = self.globs(top["articles"], "articles", allow_empty=False)
        if "content" in top:
            kwargs["content"] = self.globs(top["content"], "content", allow_empty=True)
        kwargs["fonts"] = self.fonts(top.get("fonts"), "fonts")
        if "trailer_prefix" in top:
            prefix = self.string(top["trailer_prefix"], "trailer_prefix")
            if not _TRAILER_TOKEN_RE.fullmatch(prefix):
                self.fail(
                    "trailer_prefix",
                    f"expected a git trailer token (a letter, then letters, digits or '-'), "
                    f"got {_show(prefix)}",
                    "e.g. 'Blog' or 'My-Site'; underscores and spaces are not allowed",
                )
            kwargs["trailer_prefix"] = prefix
        if "node" in top:
            node = self.string(top["node"], "node")
            if not _NODE_RE.fullmatch(node) or ".." in node:
                self.fail(
                    "node",
                    "expected letters, digits, '.', '_' or '-', starting and ending with a letter "
                    f"or digit, without '..', got {_show(node)}",
                    f"e.g. {_sanitize_node(node)!r}",
                )
            kwargs["node"] = node
        kwargs["retry"] = self.retry(top.get("retry"), "retry")
        kwargs["draft"] = self.command(top.get("draft"), "draft", DEFAULT_DRAFT_TIMEOUT)
        kwargs["judge"] = self.command(top.get("judge"), "judge", DEFAULT_JUDGE_TIMEOUT)
        kwargs["gates"] = self.gates(top.get("gates"), "gates")
        return Config(**kwargs)


def _suggest(key: str, parent: str, known: tuple[str, ...]) -> str:
    """A hint for an unknown key: the closest known key, else the list of known keys."""
    import difflib

    if not parent and key in _RETRY_KEYS:
        return f"did you mean 'retry.{key}'? ({key} belongs under retry:)"
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not close:
        normal = key.lower().replace("-", "_")
        close = [k for k in known if k == normal]
    if close:
        return f"did you mean {close[0]!r}?"
    return "known keys: " + ", ".join(known)


# -- loading --------------------------------------------------------------------------------------


@functools.cache
def _loader() -> type[yaml.SafeLoader]:
    """A safe YAML loader (the C one when available) that refuses duplicate keys.

    PyYAML keeps the last of two equal keys without a word; in a config file that is almost
    always a mistake (two ``gates:`` sections, say), so it is an error here.
    """
    import yaml

    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[valid-type,misc]
        def construct_mapping(
            self, node: yaml.MappingNode, deep: bool = False
        ) -> dict[Hashable, Any]:
            seen: set[object] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:  # unhashable: the base class reports it
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {_show(key)}",
                        key_node.start_mark,
                    )
                seen.add(key)
            result: dict[Hashable, Any] = super().construct_mapping(node, deep=deep)
            return result

    return Loader


def _load_yaml(text: str, source: str) -> object:
    import yaml

    try:
        return yaml.load(text, Loader=_loader())  # a SafeLoader subclass: safe
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = error.problem or error.context or "syntax error"
        hint = None
        if problem.startswith("found duplicate key"):
            hint = "a key may appear only once in a mapping; merge the two"
        elif isinstance(error, yaml.scanner.ScannerError | yaml.parser.ParserError):
            hint = "check the indentation and quoting on that line and the one before"
        raise ConfigError(
            f"{source}: {where}invalid YAML: {problem}", hint, source=source
        ) from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{source}: invalid YAML: {error}", source=source) from None


def parse_config(text: str, source: str = CONFIG_FILE) -> Config:
    """The Config described by the YAML ``text``; ``source`` names the file in error messages.

    An empty file, or one with only comments, means all defaults; so does an absent key.
    Raises ConfigError for anything else that is not exactly right.
    """
    return _Parser(source).config(_load_yaml(text, source))


def load_config(repo_root: pathlib.Path, cache_dir: pathlib.Path | None = None) -> Config:
    """The configuration of the repository at ``repo_root``: its ``.gitpub.yaml``, else defaults.

    The file is read from the working tree, where a user edits it before committing it. With
    ``cache_dir``, the YAML's data is cached there as JSON keyed by the file's exact text, so a
    command does not pay PyYAML's import (~15 ms) when the file has not changed; the data is
    validated every time all the same.
    """
    path = os.path.join(repo_root, CONFIG_FILE)
    try:
        with open(path, encoding="utf-8-sig") as file:
            text = file.read()
    except FileNotFoundError:
        return Config()
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{CONFIG_FILE}: not valid UTF-8 (byte {error.start})",
            "save the file as UTF-8",
            source=CONFIG_FILE,
        ) from None
    except OSError as error:
        raise ConfigError(
            f"{CONFIG_FILE}: cannot read: {error.strerror or error}", source=CONFIG_FILE
        ) from None
    if cache_dir is None:
        return parse_config(text, CONFIG_FILE)
    return _Parser(CONFIG_FILE).config(_cached_yaml(text, cache_dir))


def _cached_yaml(text: str, cache_dir: pathlib.Path) -> object:
    """``_load_yaml(text)``, through a JSON cache (derived data: a bad cache is a miss)."""
    import hashlib
    import json

    key = hashlib.sha256(text.encode()).hexdigest()
    path = os.path.join(cache_dir, "config-cache.json")
    try:
        with open(path, encoding="utf-8") as file:
            cached = json.load(file)
        if isinstance(cached, dict) and cached.get("key") == key and "data" in cached:
            return cached["data"]
    except (OSError, ValueError):
        pass
    data = _load_yaml(text, CONFIG_FILE)
    try:
        blob = json.dumps({"key": key, "data": data})
        if json.loads(blob)["data"] != data:
            return data  # not plain JSON data (e.g. a YAML date): do not cache
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as file:
            file.write(blob)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        pass
    return data


def default_config_text() -> str:
    """The commented template ``git pub init`` writes; it parses to ``Config()``."""
    from importlib import resources

    template = resources.files("gitpub.config").joinpath("default_config.yaml")
    return template.read_text(encoding="utf-8")
