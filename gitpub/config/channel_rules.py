"""The rules of the ``site`` and ``channels`` sections of ``.gitpub.yaml`` (see ``schema``).

A mixin of ``schema.Parser``: each method is a rule a field's ``check`` names, written against
the parser's own services (errors naming the file and key, sections from dataclasses), which
``rules.Parser`` lists so that the rules type-check on their own.
"""

from __future__ import annotations

import re
import string
from urllib.parse import urlsplit

from gitpub.config.model import PATH_FIELDS, ChannelSpec, LiveCheck, Rate, SiteSpec
from gitpub.config.rules import Parser, join
from gitpub.core.globs import CONTROL_RE, shown

_CHANNEL_NAME_RE = re.compile(r"[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?")
_HEADER_NAME_RE = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
_ENV_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_RATE_RE = re.compile(r"\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*")
_RATE_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
               "h": 3600.0, "hour": 3600.0, "d": 86400.0, "day": 86400.0}
_RESERVED_HEADERS = ("content-type", "content-length", "idempotency-key", "host",
                     "transfer-encoding")





class ChannelRules:
    def boolean(self: Parser, value: object, key: str) -> bool:
        if not isinstance(value, bool):
            self.expected(key, "true or false", value)
        return value

    def choice(self: Parser, value: object, key: str, choices: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in choices:
            self.expected(key, "one of " + ", ".join(choices), value)
        return value

    def channel_name(self: Parser, value: object, key: str) -> str:
        name = self.string(value, key)
        if not _CHANNEL_NAME_RE.fullmatch(name):
            self.fail(key, "expected lower-case letters, digits, '_' or '-' (at most 64, "
                      f"starting and ending with a letter or digit), got {shown(name)}",
                      "the name is part of file and ref names, e.g. 'mastodon' or 'cdn-purge'")
        return name

    def rate(self: Parser, value: object, key: str) -> Rate:
        """``"10/hour"``, ``"1/min"``, ``"5/30s"``: at most N sends per period."""
        match = _RATE_RE.fullmatch(value) if isinstance(value, str) else None
        if match is not None:
            count, number, unit = int(match[1]), match[2], match[3]
            seconds = _RATE_UNITS.get(unit) or _RATE_UNITS.get(unit.removesuffix("s"))
            if count >= 1 and seconds and not number.startswith("0"):
                return Rate(count, float(int(number or "1")) * seconds)
        self.expected(key, "a rate like '10/hour', '1/min' or '5/30s'", value)

    def http_url(self: Parser, value: object, key: str) -> str:
        url = self.name(value, key)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self.expected(key, "an http:// or https:// URL", value)
        return url

    def headers(self: Parser, value: object, key: str) -> tuple[tuple[str, str], ...]:
        """HTTP headers; a value may name environment variables as ``${NAME}``."""
        if value is None:
            return ()
        mapping = value if isinstance(value, dict) else None
        if mapping is None:
            self.expected(key, "a mapping of header names to strings", value)
        result = []
        for name, text in mapping.items():
            if not isinstance(name, str) or not _HEADER_NAME_RE.fullmatch(name):
                self.expected(key, "header names made of letters, digits and '-'", name)
            if name.lower() in _RESERVED_HEADERS:
                self.fail(join(key, name), "is set by gitpub itself")
            if not isinstance(text, str) or CONTROL_RE.search(text):
                self.expected(join(key, name), "a one-line string", text)
            result.append((name, text))
        return tuple(result)

    def url_template(self: Parser, value: object, key: str) -> str:
        template = self.name(value, key)
        try:
            names = [field for _, field, _, _ in string.Formatter().parse(template)
                     if field is not None]
        except ValueError as error:
            self.fail(key, f"invalid template {shown(template)}: {error}")
        for name in names:
            if name not in PATH_FIELDS:
                self.fail(key, f"unknown field {{{name}}} in {shown(template)}",
                          "fields: " + ", ".join("{" + f + "}" for f in PATH_FIELDS))
        return template

    def live(self: Parser, value: object, key: str) -> LiveCheck | None:
        if value is None:
            return None
        if value is True or value == {}:
            return LiveCheck()
        return LiveCheck(**self.section(LiveCheck, value, key))

    def site(self: Parser, value: object, key: str) -> SiteSpec:
        if value is None:
            return SiteSpec()
        return SiteSpec(**self.section(SiteSpec, value, key))

    def channels(self: Parser, value: object, key: str) -> tuple[ChannelSpec, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.expected(key, "a list of channels ({name, kind, account, ...} mappings)", value)
        channels: list[ChannelSpec] = []
        seen: dict[str, int] = {}
        for index, item in enumerate(value):
            item_key = f"{key}[{index}]"
            if not isinstance(item, dict):
                self.expected(item_key, "a mapping with 'name', 'kind' and 'account'", item)
            channel = ChannelSpec(**self.section(ChannelSpec, item, item_key))
            ChannelRules._check_channel(self, channel, item_key)
            if channel.name in seen:
                self.fail(join(item_key, "name"), f"duplicate channel name {channel.name!r} "
                          f"(also {key}[{seen[channel.name]}])")
            seen[channel.name] = index
            channels.append(channel)
        return tuple(channels)

    def _check_channel(self: Parser, channel: ChannelSpec, key: str) -> None:
        """What no single key can say: each kind's own keys, a lease longer than a send."""
        own = {"command": ("send",), "webhook": ("url",)}[channel.kind]
        other = {"command": ("url", "headers"), "webhook": ("send", "probe")}[channel.kind]
        for name in own:
            if getattr(channel, name) is None:
                self.fail(join(key, name), f"required for a {channel.kind} channel")
        for name in other:
            if getattr(channel, name):
                self.fail(join(key, name), f"not a key of a {channel.kind} channel")
        if channel.lease is not None and channel.lease <= channel.timeout:
            self.fail(join(key, "lease"), f"must be longer than timeout "
                      f"({channel.timeout:g}), got {channel.lease:g}")
