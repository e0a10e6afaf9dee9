"""``torch.backends`` entry point, called at the end of ``import torch``.

With no variable of ours set it returns after a pass over ``os.environ`` and imports nothing. With one
set it names those the plugin does not read (``env_names``), and when one asks for the plugin it
switches it on (``ah_plugin.activate_from_environment``: settings read now, hooks in when torch imports
Inductor). It never raises: an error warns once and ``import torch`` carries on as if the plugin were
absent.
"""

import os

# Kept in sync with ah_plugin/config/env_names.py (not imported here: this must stay import-free).
_PREFIXES = ("AH_PLUGIN_", "AH_TUNABLE_", "TORCHINDUCTOR_AUTOHEURISTIC_")


def _named() -> bool:
    return any(key.startswith(_PREFIXES) for key in os.environ)


def autoload() -> None:
    try:
        if not _named():
            return None
        from ah_plugin.config import env_names
        from ah_plugin.config.settings import env_requests_plugin

        env_names.warn_unknown()
        if not env_requests_plugin():
            return None
        from ah_plugin import activate_from_environment

        activate_from_environment()
    except Exception as exc:  # never break `import torch`
        try:
            from ah_plugin.report import messages

            messages.warn(f"not activated ({exc!r}); torch runs without it", RuntimeWarning)
        except Exception:
            pass
    return None
