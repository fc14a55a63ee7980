"""What the rule mixins of ``schema.Parser`` (``channel_rules``, ``delivery_rules``) are
written against: the parser's own services, listed so that the rules type-check on their own,
and the dotted key of a field."""

from __future__ import annotations

from typing import Any, NoReturn, Protocol


def join(prefix: str, key: str) -> str:
    """``prefix.key``, or ``key`` at the top level."""
    return f"{prefix}.{key}" if prefix else key


class Parser(Protocol):
    def fail(self, key: str, problem: str, hint: str | None = None) -> NoReturn: ...

    def expected(self, key: str, what: str, value: object,
                 hint: str | None = None) -> NoReturn: ...

    def string(self, value: object, key: str) -> str: ...

    def name(self, value: object, key: str) -> str: ...

    def section(self, cls: type, value: object, key: str,
                skip: tuple[str, ...] = ()) -> dict[str, Any]: ...
