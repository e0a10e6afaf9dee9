"""Where the plugin's verbose output goes (``AH_PLUGIN_VERBOSE=1``): one channel for every module.

To the module's ``logging`` logger at INFO when the application configured logging (it then decides
where lines go), else to stderr; each line with the plugin's one prefix (``messages.PREFIX``). Warnings
(``messages.warn``) stay for what a user must see once per process: a skipped artifact, a bad setting, a
write that failed.
"""

from __future__ import annotations

import logging
import sys

from .messages import prefixed


def say(logger: logging.Logger, message: str) -> None:
    message = prefixed(message)
    if logger.isEnabledFor(logging.INFO) and logging.getLogger().handlers:
        logger.info(message)
    else:
        print(message, file=sys.stderr)
