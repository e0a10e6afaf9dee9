"""The plugin's choices handler in the thread that lowers: the lowering hooks ask, ``choices`` answers.

Before torch 2.15 the plugin reaches Inductor through ``config.inductor_choices_class``, whose value holds
for the thread that set it only, and ``V.choices`` is built once per thread: a training step's backward,
compiled lazily in autograd's device thread, would lower with Inductor's own handler. This module holds the
callable that fixes the calling thread (set by ``choices`` when it is imported), so the lowering hooks reach
it without importing ``choices`` (which imports them).
"""

from __future__ import annotations

from typing import Callable

_installer: list[Callable[[], None]] = []


def set_installer(function: Callable[[], None]) -> None:
    """``function`` puts the plugin's handler in the calling thread (a no-op where it is there already)."""
    _installer[:] = [function]


def ensure() -> None:
    """The plugin's handler in the calling thread, where an installer was set. Never fails a lowering: where
    the handler cannot be built (a user's choices class that takes arguments) the thread keeps its own, and
    the selector still prunes the candidates after code generation."""
    for function in list(_installer):
        try:
            function()
        except Exception:  # not tried again in this process
            _installer.remove(function)
