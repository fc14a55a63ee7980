"""``git pub hooks install``, ``git pub hooks uninstall`` and ``git pub hook-impl`` (what the
shims fall back to, and what the pre-commit framework runs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gitpub.hooks import fast
from gitpub.hooks.shared import HOOKS

if TYPE_CHECKING:
    from gitpub.hooks.install import HookState

# The installer reads the configuration (PyYAML and the model): loaded by the commands that
# install, not by the command line's start (it names the hooks: ``HOOKS``).


def hooks_install(where: Path, hooks_path_ok: bool) -> list[HookState]:
    from gitpub.hooks.install import install

    return install(where, hooks_path_ok=hooks_path_ok)


def hooks_uninstall(where: Path) -> list[HookState]:
    from gitpub.hooks.install import uninstall

    return uninstall(where)


def run_hook(hook: str, args: list[str]) -> int:
    """Run ``hook`` (``pre-push``, ``post-commit``) in the current directory, as a shim does."""
    return fast.main([hook, *args])


__all__ = ["HOOKS", "HookState", "hooks_install", "hooks_uninstall", "run_hook"]
