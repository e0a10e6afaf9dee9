"""Where the plugin's verbose output goes (``AH_PLUGIN_VERBOSE=1``): one channel for every module.

To the module's ``logging`` logger at INFO when the application configured logging (it then decides
where lines go), else to stderr; each line with the plugin's one prefix (``messages.PREFIX``). Warnings
(``messages.warn``) stay for what a user must see once per process: a skipped artifact, a bad setting, a
write that failed.
"""

from __future__ import annotations

import logging
import sys

from ..config import settings
from .messages import prefixed

log = logging.getLogger("ah_plugin")


def say(logger: logging.Logger, message: str) -> None:
    message = prefixed(message)
    if logger.isEnabledFor(logging.INFO) and logging.getLogger().handlers:
        logger.info(message)
    else:
        print(message, file=sys.stderr)


def verbose(message: str) -> None:
    """``say`` on the plugin's logger when ``AH_PLUGIN_VERBOSE=1`` (a bad unrelated variable says nothing)."""
    try:
        on = settings.current().verbose
    except Exception:  # a bad value must not make messages raise; it is warned about where it is read
        on = False
    if on:
        say(log, message)
