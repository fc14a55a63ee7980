"""The schema of ``.gitpub.yaml``, derived from the dataclasses of ``config.model``.

A section of the file (the top level, ``retry``, each ``fonts`` entry, each gate) is a dataclass:
its known keys are the fields, an absent key takes the field's default, a field without one is
required, and each field names the rule its value must pass (``check`` in its metadata) — a
method of ``Parser`` below. What is left here by hand is only what no single field can say:
rules across fields (``backoff_max >= backoff_base``, a font's output is not its source, gate
names are unique) and the two spellings of a command (``run: …`` or the command itself).

The parser refuses anything doubtful — an unknown key, a wrong type, a path that leaves the
repository — with one line naming the file and the key path (``retry.max_attempts``,
``gates[1].run``). A typo in a file that drives automated commits must stop the tool, not be
silently ignored.
"""

from __future__ import annotations

import math
import re
from dataclasses import MISSING, Field, fields
from typing import Any, NoReturn

from gitpub.config.channel_rules import ChannelRules
from gitpub.config.delivery_rules import DeliveryRules
from gitpub.config.model import (
    DEFAULT_REMOTE,
    Command,
    Config,
    FontSpec,
    RetryPolicy,
    sanitize_node,
)
from gitpub.config.rules import join
from gitpub.core.errors import ConfigError
from gitpub.core.globs import CONTROL_RE, glob_regex, path_problem, shown
from gitpub.core.paths import is_steering
from gitpub.core.paths import path_problem as repository_path_problem
from gitpub.core.sanitize import contains_secret

_TRAILER_TOKEN_RE = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
_NODE_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_REF_BAD_CHARS_RE = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")

_COMMAND_FORMS = "a command (a string, run with sh -c, or a list of strings, run directly)"


def yaml_key(f: Field[Any]) -> str:
    """The key a field has in the YAML file (its name, unless its check says otherwise)."""
    return str(f.metadata["options"].get("key", f.name))


def yaml_keys(cls: type, skip: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The known keys of a section: its dataclass's fields, in order."""
    return tuple(yaml_key(f) for f in fields(cls) if f.name not in skip)



def _ref_problem(name: str) -> tuple[str, str | None] | None:
    """Why ``name`` is not a usable branch name (git check-ref-format rules), or None."""
    if name.startswith("-"):
        return "must not start with '-'", None
    if name.startswith("refs/"):
        short = name.removeprefix("refs/heads/")
        return "expected a branch name, not a ref", f"write {short!r}" if short != name else None
    if _REF_BAD_CHARS_RE.search(name):
        return "must not contain spaces, control characters or any of ~ ^ : ? * [ \\", None
    if name == "HEAD":  # git branch refuses it; refs/remotes/<remote>/HEAD is the remote's
        return "is not a valid git branch name (HEAD names the current branch)", None
    if name == "@" or "@{" in name or ".." in name or "//" in name:
        return "is not a valid git branch name ('@', '@{', '..' and '//' are not allowed)", None
    if name.endswith(("/", ".")) or name.startswith("/"):
        return "is not a valid git branch name (no '/' first, no '/' or '.' last)", None
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return "is not a valid git branch name (no part may start with '.' or end in '.lock')", None
    return None


class Parser(ChannelRules, DeliveryRules):
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
        self.fail(key, f"expected {what}, got {shown(value)}", hint)

    # -- sections, from the dataclasses

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
                self.fail(key, f"keys must be strings, got {shown(item_key)}", hint)
            if item_key not in known:
                self.fail(join(key, item_key), "unknown key", _suggest(item_key, key, known))
            result[item_key] = item
        return result

    def section(self, cls: type, value: object, key: str,
                skip: tuple[str, ...] = ()) -> dict[str, Any]:
        """The keyword arguments of ``cls`` that the mapping ``value`` gives, each checked by
        its field's rule; a field without a default must be there."""
        mapping = self.mapping(value, key, yaml_keys(cls, skip))
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in skip:
                continue
            name = yaml_key(f)
            if name in mapping:
                kwargs[f.name] = self.check(f, mapping[name], join(key, name))
            elif f.default is MISSING and f.default_factory is MISSING:
                self.fail(join(key, name), "required key is missing")
        return kwargs

    def check(self, f: Field[Any], value: object, key: str) -> Any:
        options = {k: v for k, v in f.metadata["options"].items() if k != "key"}
        return getattr(self, f.metadata["check"])(value, key, **options)

    def config(self, data: object) -> Config:
        if data is None:  # an empty file, or only comments
            data = {}
        if not isinstance(data, dict):
            self.fail(
                "",
                f"expected a mapping of keys at the top level, got {shown(data)}",
                f"start from the template `git pub init` writes, e.g. 'remote: {DEFAULT_REMOTE}'",
            )
        config = Config(**self.section(Config, data, ""))
        named = set(config.publish or ())
        for index, font in enumerate(config.fonts):
            if is_steering(font.output) and font.output not in named:
                self.fail(f"fonts[{index}].output",
                          f"{shown(font.output)} steers git, CI or gitpub (.git*, CI and tool "
                          "files): a font may be written there only if `publish` names it "
                          "exactly", "choose an output under your site's static files, e.g. "
                                     "static/fonts/site.woff2")
        if config.channels and config.site.url is None:
            self.fail("site.url", "required when channels are configured",
                      "every payload carries the article's canonical URL: site.url + site.path")
        for index, channel in enumerate(config.channels):
            if channel.after == "live" and config.site.live is None:
                self.fail(f"channels[{index}].after", "'live' needs site.live configured")
        return config

    # -- scalars

    def string(self, value: object, key: str) -> str:
        if not isinstance(value, str):
            self.expected(key, "a string", value)
        if not value.strip():
            self.fail(key, f"expected a non-empty string, got {shown(value)}")
        return value

    def name(self, value: object, key: str) -> str:
        """A one-line string that may be shown, or passed to git, as a single word."""
        text = self.string(value, key)
        if CONTROL_RE.search(text) or text != text.strip():
            self.fail(key, f"must be one line without surrounding spaces, got {shown(text)}")
        if text.startswith("-"):
            self.fail(key, f"must not start with '-', got {shown(text)}")
        return text

    def branch(self, value: object, key: str) -> str:
        branch = self.name(value, key)
        problem = _ref_problem(branch)
        if problem is not None:
            self.fail(key, f"{problem[0]}, got {shown(branch)}", problem[1])
        return branch

    def no_secret(self, value: str, key: str) -> None:
        """A value that ends up in every commit's trailers and in job records: refused when the
        sanitizer would redact it (it would be published, not redacted)."""
        if contains_secret(value):
            self.fail(key, "looks like a secret (the sanitizer would redact it), and it would "
                           "be written into every commit's trailers and job record",
                      "use a plain name; a secret does not belong in .gitpub.yaml")

    def trailer_prefix(self, value: object, key: str) -> str:
        prefix = self.string(value, key)
        self.no_secret(prefix, key)
        if not _TRAILER_TOKEN_RE.fullmatch(prefix):
            self.fail(
                key,
                f"expected a git trailer token (a letter, then letters, digits or '-'), "
                f"got {shown(prefix)}",
                "e.g. 'Blog' or 'My-Site'; underscores and spaces are not allowed",
            )
        return prefix

    def node(self, value: object, key: str) -> str:
        node = self.string(value, key)
        self.no_secret(node, key)
        if not _NODE_RE.fullmatch(node) or ".." in node:
            self.fail(
                key,
                "expected letters, digits, '.', '_' or '-', starting and ending with a letter "
                f"or digit, without '..', got {shown(node)}",
                f"e.g. {sanitize_node(node)!r}",
            )
        return node

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

    def fraction(self, value: object, key: str) -> float:
        what = "a number between 0 and 1"
        number = self.number(value, key, what)
        if not 0.0 <= number <= 1.0:
            self.expected(key, what, value)
        return number

    # -- paths and globs

    def path(self, value: object, key: str, extensions: tuple[str, ...]) -> str:
        path = self.string(value, key)
        problem = path_problem(path)
        if problem is not None:
            self.fail(key, problem[0], _outside_hint(key, path) or problem[1])
        refused = repository_path_problem(path)  # a font output is a file a job writes
        if refused is not None:
            self.fail(key, f"{shown(path)} {refused}")
        if not path.lower().endswith(extensions):
            kinds = ", ".join(extensions[:-1]) + " or " + extensions[-1]
            self.fail(key, f"expected a path ending in {kinds}, got {shown(path)}")
        return path

    def glob(self, value: object, key: str) -> str:
        if not isinstance(value, str):
            self.expected(key, "a glob string", value)
        problem = path_problem(value)
        if problem is not None:
            self.fail(key, *problem)
        try:
            glob_regex(value)
        except ValueError as error:
            self.fail(key, f"invalid glob {shown(value)}: {error}")
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

    def publish(self, value: object, key: str) -> tuple[str, ...] | None:
        """The write scope: absent or null for the default, else a non-empty list of globs."""
        if value is None:
            return None
        return self.globs(value, key, allow_empty=False)

    # -- commands

    def argv(self, value: object, key: str) -> tuple[str, ...]:
        if isinstance(value, str):
            if not value.strip():
                self.fail(key, f"expected a non-empty command, got {shown(value)}")
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
                self.fail(f"{key}[0]", f"expected a program name, got {shown(argv[0])}")
            return tuple(argv)
        self.expected(key, _COMMAND_FORMS, value)

    def command(self, value: object, key: str, timeout: float) -> Command | None:
        """``draft``/``judge``: absent or null for none, else a command, maybe as {run, timeout}."""
        if value is None:
            return None
        if isinstance(value, dict):
            kwargs = {"timeout": timeout} | self.section(Command, value, key, skip=("name",))
            return Command(name=key, **kwargs)
        return Command(name=key, argv=self.argv(value, key), timeout=timeout)

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
            gate = Command(**self.section(Command, item, item_key))
            if gate.name in seen:
                self.fail(join(item_key, "name"),
                          f"duplicate gate name {gate.name!r} (also {key}[{seen[gate.name]}])")
            seen[gate.name] = index
            gates.append(gate)
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
            font = FontSpec(**self.section(FontSpec, item, item_key))
            output_key = join(item_key, "output")
            if font.output == font.source:
                self.fail(output_key, "must differ from source: the full font would be overwritten")
            if font.output in outputs:
                self.fail(output_key, f"same output as {key}[{outputs[font.output]}]: "
                          f"{font.output!r}")
            outputs[font.output] = index
            if font.face and not font.source.lower().endswith(".ttc"):
                self.fail(join(item_key, "face"),
                          f"only a .ttc collection has several faces, got {font.face}")
            fonts.append(font)
        return tuple(fonts)

    def retry(self, value: object, key: str) -> RetryPolicy:
        if value is None:
            return RetryPolicy()
        policy = RetryPolicy(**self.section(RetryPolicy, value, key))
        if policy.backoff_max < policy.backoff_base:
            self.fail(
                join(key, "backoff_max"),
                f"must be >= {join(key, 'backoff_base')} ({policy.backoff_base:g}), "
                f"got {policy.backoff_max:g}",
            )
        return policy


def _suggest(key: str, parent: str, known: tuple[str, ...]) -> str:
    """A hint for an unknown key: the closest known key, else the list of known keys."""
    if not parent and key in yaml_keys(RetryPolicy):
        return f"did you mean 'retry.{key}'? ({key} belongs under retry:)"
    import difflib  # only for a mistake

    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not close:
        normal = key.lower().replace("-", "_")
        close = [k for k in known if k == normal]
    if close:
        return f"did you mean {close[0]!r}?"
    return "known keys: " + ", ".join(known)


def _outside_hint(key: str, path: str) -> str | None:
    """For a file named by an absolute path: it must be a file *in* the repository."""
    if not path.startswith("/"):
        return None
    name = path.rstrip("/").rsplit("/", 1)[-1] or "font.ttf"
    if key.endswith(".source"):
        return (f"the font source must be a file in the repository, committed: copy it in "
                f"(e.g. fonts/{name}), commit and push it, and write that path")
    return f"write a path inside the repository, relative to its root (e.g. static/fonts/{name})"
