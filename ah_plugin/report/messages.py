"""What the plugin says to a user: one prefix on every line, and warnings shown at the user's own line.

Every message, verbose line or warning, starts with ``PREFIX`` (``prefixed``). A warning is attributed to
the first frame of the call stack outside the plugin, torch and the standard library, as ``stacklevel``
would be if its depth were known: the user's ``import torch``, ``torch.compile`` call or compiled model's
call. Python then shows that file and line and the user's source line under the message, never the
plugin's own code. Nothing global changes: the warning goes through ``warnings.warn_explicit`` with that
frame's module and registry, so the user's filters (``-W``, ``filterwarnings``) and display apply as to
any warning. A stack with no such frame (a compile worker thread) names the main script, at line 0 (no
source line shown). Standard library only.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import warnings

PREFIX = "ah_plugin: "

_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the whole package


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


def _user_frame():
    """The innermost frame outside the plugin, torch and the standard library; None when there is none."""
    skipped = _skipped_folders()
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<frozen ") and not os.path.abspath(filename).startswith(skipped):
            return frame
        frame = frame.f_back
    return None


def warn(message: str, category=UserWarning) -> None:
    """Warn with ``message`` (prefixed), shown at the user's line (see the module docstring)."""
    text = prefixed(message)
    frame = _user_frame()
    if frame is None:
        main = sys.modules.get("__main__")
        filename = getattr(main, "__file__", None) or "__main__"
        warnings.warn_explicit(text, category, filename, 0, module="__main__",
                               registry=getattr(main, "__dict__", {}).setdefault("__warningregistry__", {}))
        return
    globals_ = frame.f_globals  # as warnings.warn does for the frame it names (no loader asked for source)
    warnings.warn_explicit(text, category, frame.f_code.co_filename, frame.f_lineno,
                           module=globals_.get("__name__", "__main__"),
                           registry=globals_.setdefault("__warningregistry__", {}))
