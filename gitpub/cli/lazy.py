"""A module imported on first use: the seam that keeps ``git pub -h`` from loading the commands.

``gitpub.cli.main`` defines every command with click at import time, but only the command that
runs needs ``gitpub.app.commands`` (and through it the pipeline, the job store, dulwich). Rather
than an import inside every command function, ``main`` names those modules once through
``lazy``: a stand-in whose first attribute access imports the real module (and replaces
nothing else: ``commands.status`` then is the real function). mypy sees the real modules, as
``main`` imports them under ``TYPE_CHECKING``. Only the command line uses this; the layers
below import what they need, where they need it, so that ``lint-imports`` sees every arrow.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    """Stands for the module ``name`` until an attribute is read; then imports it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> object:
        if attr.startswith("__"):
            raise AttributeError(attr)  # copy/pickle/introspection: not a reason to import
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}{'' if self._module is None else ' (loaded)'}>"


def lazy(name: str) -> ModuleType:
    """A stand-in for module ``name`` (typed as a module: attribute access is all it offers)."""
    return LazyModule(name)  # type: ignore[return-value]
