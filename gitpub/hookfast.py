"""Where hook shims written by gitpub 0.1 look for the hook entry point.

Those shims run ``from gitpub.hookfast import main``; the entry point now lives in
``gitpub.hooks.fast``. Kept so that hooks installed before an upgrade keep working until
``git pub hooks install`` rewrites them. Nothing in gitpub imports this module.
"""

from gitpub.hooks.fast import main

__all__ = ["main"]
