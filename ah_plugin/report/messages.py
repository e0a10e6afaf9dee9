"""What the plugin says to a user: one prefix on every line, and warnings shown at the user's own line.

Every message, verbose line or warning, starts with ``PREFIX`` (``prefixed``). On Python 3.12 and newer a
warning is attributed to the first frame of the call stack outside the plugin, torch and the standard
library (``warnings.warn``'s ``skip_file_prefixes``): the user's ``import torch``, ``torch.compile`` call or
compiled model's call, so Python shows that file and line and the user's source line under the message,
never the plugin's own code. Older Pythons have no such option and the plugin walks no frames itself: there
a warning names the main script, at line 0 (no source line shown). Nothing global changes: the user's
filters (``-W``, ``filterwarnings``) and display apply as to any warning. ``warn_once`` says a warning once
per key per process. Standard library only.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import warnings

PREFIX = "ah_plugin: "

_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the whole package
SKIPS_FILES = sys.version_info >= (3, 12)  # warnings.warn(skip_file_prefixes=...)


QUOTED_LIMIT = 60  # characters of a value from a file or a variable shown in a message


def quoted(text: str, limit: int = QUOTED_LIMIT) -> str:
    """``repr(text)`` for a message, cut to ``limit`` characters with its full length said: a 1 MB field of a
    file, or a variable of 5000 digits, is named, never echoed whole."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


def prefixed(message: str) -> str:
    """``message`` starting with ``PREFIX`` (once)."""
    return message if message.startswith(PREFIX) else PREFIX + message


def _skipped_folders() -> tuple[str, ...]:
    folders = [_OURS]
    torch = sys.modules.get("torch")
    if getattr(torch, "__file__", None):
        folders.append(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            folders.append(os.path.abspath(path) + os.sep)
    return tuple(folders)


def warn(message: str, category=UserWarning) -> None:
    """Warn with ``message`` (prefixed), shown at the user's line (see the module docstring)."""
    text = prefixed(message)
    if SKIPS_FILES:
        warnings.warn(text, category, stacklevel=2, skip_file_prefixes=_skipped_folders())
        return
    main = sys.modules.get("__main__")
    filename = getattr(main, "__file__", None) or "__main__"
    warnings.warn_explicit(text, category, filename, 0, module="__main__",
                           registry=getattr(main, "__dict__", {}).setdefault("__warningregistry__", {}))


_warned: set = set()
_warned_lock = threading.Lock()


def warn_once(key, message: str, category=RuntimeWarning) -> None:
    """``warn``, once per ``key`` per process (errors inside a compile must be visible, not noisy)."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warn(message, category)
