"""The configuration as values: small frozen dataclasses, and what each key means.

Every key of ``.gitpub.yaml`` is a field here, and nowhere else: the schema (``config.schema``)
is derived from these definitions — the known keys of a section are its fields, an absent key
takes the field's default, and the field's ``check`` (in its metadata) names the rule its value
must pass. So adding a key is adding a field.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any

from gitpub.core.globs import compile_globs, is_clean_path
from gitpub.core.paths import Scope, is_literal

DEFAULT_REMOTE = "origin"
DEFAULT_BRANCH = "main"
DEFAULT_ARTICLES: tuple[str, ...] = ("content/**/*.md", "posts/**/*.md", "_posts/**/*.md")
DEFAULT_TRAILER_PREFIX = "Blog"
#: A lease outlives a delivery's network segment (fetch and push time out after 300 s each).
DEFAULT_LEASE_SECONDS = 900.0
#: Finished job refs (this clone's and the remote's) that make ``reconcile`` fold them into the
#: archive (``delivery.fold``); 0 never folds.
DEFAULT_ARCHIVE_AFTER = 64
#: What ``confirm`` makes of a job commit on the branch that has neither a job ref on the
#: remote nor an archive entry (``verify.store_check``): BAD, or only reported.
UNRECORDED_CHOICES = ("bad", "report")
DEFAULT_DRAFT_TIMEOUT = 600.0
DEFAULT_JUDGE_TIMEOUT = 120.0
DEFAULT_GATE_TIMEOUT = 120.0
DEFAULT_CHANNEL_TIMEOUT = 30.0
#: A channel lease covers one send (``timeout``) and the writes around it.
CHANNEL_LEASE_GRACE = 60.0
CHANNEL_KINDS = ("command", "webhook")
CHANNEL_AFTER = ("publish", "live")
LIVE_MATCHES = ("title", "hash")
#: The fields a ``site.path`` template may use (see ``channels.payload``).
PATH_FIELDS = ("path", "dir", "name", "stem", "slug")

#: How a job's commit reaches the branch: pushed to it, or through a pull/merge request.
DELIVERY_MODES = ("push", "pull_request")
#: Where the request is opened: a forge's REST API, or nowhere (``branch``: the review branch
#: is pushed and a compare URL printed; a person opens the request).
FORGES = ("github", "gitlab", "gitea", "branch")
#: The environment variable a forge's token is read from unless ``token_env`` names another.
DEFAULT_TOKEN_ENV = {"github": "GITHUB_TOKEN", "gitlab": "GITLAB_TOKEN", "gitea": "GITEA_TOKEN"}
#: A forge's API address unless ``api`` names another (Gitea has no public default).
DEFAULT_API = {"github": "https://api.github.com", "gitlab": "https://gitlab.com/api/v4"}
DEFAULT_REVIEW_PREFIX = "gitpub/"

FONT_SOURCE_EXTENSIONS = (".ttf", ".otf", ".ttc")
FONT_OUTPUT_EXTENSIONS = (".woff2", ".woff", ".ttf")


def check(rule: str, **options: Any) -> dict[str, Any]:
    """Field metadata: the schema checks this field's YAML value with ``rule`` (a method of
    ``config.schema.Parser``) and ``options``."""
    return {"check": rule, "options": options}


@dataclass(frozen=True)
class Command:
    """A pipeline command, normalised: whatever form the YAML used, steps run ``argv`` directly.

    A YAML string becomes ``("sh", "-c", string)``; a YAML list is the argv itself (no shell).
    ``name`` is ``draft``, ``judge`` or the gate's name, for reports. In YAML a command is
    ``run`` (the argv), with an optional ``timeout``; a gate also has its ``name``.
    """

    name: str = field(metadata=check("name"))
    argv: tuple[str, ...] = field(metadata=check("argv", key="run"))
    timeout: float = field(default=DEFAULT_GATE_TIMEOUT, metadata=check("seconds"))


@dataclass(frozen=True)
class FontSpec:
    """A font to subset: the glyphs ``text`` files use, cut from ``source``, written to ``output``.

    ``face`` picks the font inside a ``.ttc`` collection; it is 0 for single fonts.
    """

    source: str = field(metadata=check("path", extensions=FONT_SOURCE_EXTENSIONS))
    output: str = field(metadata=check("path", extensions=FONT_OUTPUT_EXTENSIONS))
    text: tuple[str, ...] = field(metadata=check("globs", allow_empty=False))
    face: int = field(default=0, metadata=check("integer", minimum=0))


@dataclass(frozen=True)
class RetryPolicy:
    """How transient failures (e.g. a push that lost a race to another node) are retried.

    Exponential backoff: the wait starts at ``backoff_base`` seconds, grows up to ``backoff_max``
    and is randomised by the fraction ``jitter`` so that nodes that collided do not collide again.
    """

    max_attempts: int = field(default=5, metadata=check("integer", minimum=1))
    backoff_base: float = field(default=30.0, metadata=check("seconds"))
    backoff_max: float = field(default=3600.0, metadata=check("seconds"))
    jitter: float = field(default=0.2, metadata=check("fraction"))


@dataclass(frozen=True)
class Rate:
    """At most ``count`` sends per ``per`` seconds for one channel's account (``"10/hour"``)."""

    count: int
    per: float

    def __str__(self) -> str:
        return f"{self.count}/{self.per:g}s"


@dataclass(frozen=True)
class ChannelSpec:
    """A distribution channel: where a published article is announced (docs/design.md §11).

    ``command`` channels run ``send`` (and the optional ``probe``) with the frozen payload on
    stdin; ``webhook`` channels POST it to ``url`` with an ``Idempotency-Key`` header. ``headers``
    values may name environment variables (``${TOKEN}``), expanded at send time and never stored.
    ``lease`` is how long one worker may hold the (channel, account) lease for one send; it must
    exceed ``timeout`` (default: ``timeout`` + 60 s). ``after: live`` waits for the live check.
    """

    name: str = field(metadata=check("channel_name"))
    kind: str = field(metadata=check("choice", choices=CHANNEL_KINDS))
    account: str = field(metadata=check("name"))
    required: bool = field(default=False, metadata=check("boolean"))
    timeout: float = field(default=DEFAULT_CHANNEL_TIMEOUT, metadata=check("seconds"))
    lease: float | None = field(default=None, metadata=check("seconds"))
    rate: Rate | None = field(default=None, metadata=check("rate"))
    retry: RetryPolicy = field(default_factory=RetryPolicy, metadata=check("retry"))
    after: str = field(default="publish", metadata=check("choice", choices=CHANNEL_AFTER))
    send: tuple[str, ...] | None = field(default=None, metadata=check("argv"))
    probe: tuple[str, ...] | None = field(default=None, metadata=check("argv"))
    url: str | None = field(default=None, metadata=check("http_url"))
    headers: tuple[tuple[str, str], ...] = field(default=(), metadata=check("headers"))

    @property
    def lease_seconds(self) -> float:
        return self.lease if self.lease is not None else self.timeout + CHANNEL_LEASE_GRACE


@dataclass(frozen=True)
class LiveCheck:
    """Whether the published article is really public: its canonical URL answers 200 with the
    article in it (``match``: its ``title``, or a ``hash`` the build embeds — the article's or
    the manifest's SHA-256). One run waits at most ``timeout`` seconds, asking every
    ``interval``; ``give_up`` seconds after publication a person has to look."""

    match: str = field(default="title", metadata=check("choice", choices=LIVE_MATCHES))
    timeout: float = field(default=30.0, metadata=check("seconds"))
    interval: float = field(default=2.0, metadata=check("seconds"))
    give_up: float = field(default=86400.0, metadata=check("seconds"))


@dataclass(frozen=True)
class SiteSpec:
    """The site's public address: an article's canonical URL is ``url`` joined with ``path``, a
    template over the article's repository path (fields: ``{path}``, ``{dir}``, ``{name}``,
    ``{stem}``, ``{slug}`` — front matter ``slug``, else the stem)."""

    url: str | None = field(default=None, metadata=check("http_url"))
    path: str = field(default="/{stem}/", metadata=check("url_template"))
    live: LiveCheck | None = field(default=None, metadata=check("live"))


@dataclass(frozen=True)
class DeliverySpec:
    """How a job's commit reaches the configured branch (docs/review.md).

    ``mode: push`` (the default): pushed to the branch, as a fast-forward. ``mode:
    pull_request``: pushed to a review branch (``branch_prefix`` + the job id) and a pull/merge
    request opened on ``forge`` (``github``, ``gitlab``, ``gitea``: the REST API at ``api``,
    for ``repository``, with the token in the environment variable ``token_env``, never
    stored; ``branch``: no API, the ``compare_url`` template is printed); the job rests in
    IN_REVIEW until the request is merged or closed. Each run checks at most
    ``checks_per_run`` requests, each API call bounded by ``timeout`` seconds.
    """

    mode: str = field(default="push", metadata=check("choice", choices=DELIVERY_MODES))
    forge: str | None = field(default=None, metadata=check("choice", choices=FORGES))
    repository: str | None = field(default=None, metadata=check("forge_repository"))
    api: str | None = field(default=None, metadata=check("http_url"))
    token_env: str | None = field(default=None, metadata=check("env_name"))
    branch_prefix: str = field(default=DEFAULT_REVIEW_PREFIX, metadata=check("branch_prefix"))
    compare_url: str | None = field(default=None, metadata=check("compare_template"))
    timeout: float = field(default=30.0, metadata=check("seconds"))
    checks_per_run: int = field(default=20, metadata=check("integer", minimum=1))

    @property
    def reviewed(self) -> bool:
        return self.mode == "pull_request"

    @property
    def api_url(self) -> str | None:
        return self.api or DEFAULT_API.get(self.forge or "")

    @property
    def token_variable(self) -> str | None:
        return self.token_env or DEFAULT_TOKEN_ENV.get(self.forge or "")


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
    return sanitize_node(host)


def sanitize_node(host: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", host)
    name = re.sub(r"\.{2,}", ".", name).strip("._-")
    return name or "node"


@dataclass(frozen=True)
class Config:
    """The whole configuration. ``Config()`` is the configuration of a repository without a file.

    Lists are tuples so that a Config is immutable and hashable; the glob lists are compiled (and
    checked) once, when the Config is made.
    """

    remote: str = field(default=DEFAULT_REMOTE, metadata=check("name"))
    branch: str = field(default=DEFAULT_BRANCH, metadata=check("branch"))
    articles: tuple[str, ...] = field(default=DEFAULT_ARTICLES,
                                      metadata=check("globs", allow_empty=False))
    fonts: tuple[FontSpec, ...] = field(default=(), metadata=check("fonts"))
    trailer_prefix: str = field(default=DEFAULT_TRAILER_PREFIX,
                                metadata=check("trailer_prefix"))
    node: str = field(default_factory=default_node, metadata=check("node"))
    retry: RetryPolicy = field(default_factory=RetryPolicy, metadata=check("retry"))
    #: How long a claim on a job (the lease a node pushes with the job's state) holds without
    #: a renewal: after it, another node may take the job over (``delivery.shared``).
    lease_seconds: float = field(default=DEFAULT_LEASE_SECONDS, metadata=check("seconds"))
    #: Fold finished jobs into the archive ref once this many finished job refs piled up
    #: (``reconcile``, ``delivery.fold``); 0: never.
    archive_after: int = field(default=DEFAULT_ARCHIVE_AFTER,
                               metadata=check("integer", minimum=0))
    #: ``confirm``: a job commit without a job ref or archive entry on the remote (published
    #: before the job store was shared, or its record deleted) is ``bad`` or only ``report``ed.
    confirm_unrecorded: str = field(default="bad",
                                    metadata=check("choice", choices=UNRECORDED_CHOICES))
    draft: Command | None = field(default=None,
                                  metadata=check("command", timeout=DEFAULT_DRAFT_TIMEOUT))
    judge: Command | None = field(default=None,
                                  metadata=check("command", timeout=DEFAULT_JUDGE_TIMEOUT))
    gates: tuple[Command, ...] = field(default=(), metadata=check("gates"))
    content: tuple[str, ...] = field(default=(), metadata=check("globs", allow_empty=True))
    #: The write scope: globs of the paths a job may write. None (the default) means the
    #: ``articles`` and ``content`` globs. Font outputs are always in it. A steering path
    #: (``core.paths.is_steering``) is in it only when an entry names it exactly.
    publish: tuple[str, ...] | None = field(default=None, metadata=check("publish"))
    site: SiteSpec = field(default_factory=SiteSpec, metadata=check("site"))
    channels: tuple[ChannelSpec, ...] = field(default=(), metadata=check("channels"))
    #: How a job's commit reaches ``branch``: pushed, or through a pull/merge request.
    delivery: DeliverySpec = field(default_factory=DeliverySpec, metadata=check("delivery"))

    def __post_init__(self) -> None:
        # Callers building a Config by hand may pass lists; keep the instance hashable.
        for name in ("articles", "fonts", "gates", "content", "publish", "channels"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        # Compile now (cached by pattern list) so a malformed glob fails here, not at first use.
        compile_globs(self.articles)
        compile_globs(self.content)
        compile_globs(self.publish_globs)

    @functools.cached_property
    def _articles_re(self) -> re.Pattern[str]:
        return compile_globs(self.articles)

    @functools.cached_property
    def _content_re(self) -> re.Pattern[str]:
        return compile_globs(self.content)

    def channel(self, name: str) -> ChannelSpec | None:
        return next((c for c in self.channels if c.name == name), None)

    @functools.cached_property
    def font_outputs(self) -> frozenset[str]:
        return frozenset(font.output for font in self.fonts)

    @property
    def publish_globs(self) -> tuple[str, ...]:
        """``publish``, or by default the ``articles`` and ``content`` globs."""
        return self.publish if self.publish is not None else self.articles + self.content

    @functools.cached_property
    def scope(self) -> Scope:
        """The write scope: what ``publish_globs`` match; exactly named, every entry without a
        wildcard and every font output (only those may be steering paths)."""
        globs = self.publish_globs
        named = {glob for glob in globs if is_literal(glob)} | self.font_outputs
        return Scope(compile_globs(globs), frozenset(named), globs)

    def scope_problem(self, path: str) -> str | None:
        """Why a job may not write ``path`` (outside ``publish``, or a steering path not named
        exactly), or None. ``prepare`` refuses such a path; so should every writer of jobs."""
        return self.scope.problem(path)

    def is_article(self, path: str) -> bool:
        """Whether ``path`` (relative to the repository root, ``/``-separated) is an article.

        A path that is not in normal form (absolute, ``.``/``..``/empty components, backslashes,
        control characters, inside ``.git``) is never an article, whatever the globs say.
        """
        return is_clean_path(path) and self._articles_re.fullmatch(path) is not None

    def is_content(self, path: str) -> bool:
        """Whether ``git pub sync`` may publish ``path``: an article, a font output, ``content``."""
        if not is_clean_path(path):
            return False
        return (
            path in self.font_outputs
            or self._articles_re.fullmatch(path) is not None
            or self._content_re.fullmatch(path) is not None
        )


def font_outputs(config: Config) -> frozenset[str]:
    """The files the configured fonts derive (``fonts:`` outputs): not articles of a job, but
    derived from them (``fonts.step``); here, so that knowing them loads no font code."""
    return config.font_outputs
