"""``torch.backends`` entry point, called at the end of ``import torch``.

With no plugin variable set it returns after a few ``os.environ`` lookups and imports nothing. With
one set it switches the plugin on (``ah_plugin.activate_from_environment``). It never raises: an error
warns once and ``import torch`` carries on as if the plugin were absent.
"""

import os

# Kept in sync with ah_plugin/settings.py (not imported here: this must stay import-free).
_SWITCHES = ("TORCHINDUCTOR_AUTOHEURISTIC_COLLECT", "TORCHINDUCTOR_AUTOHEURISTIC_USE")
_TUNABLE_PREFIX = "AH_TUNABLE_"


def _requested() -> bool:
    env = os.environ
    for name in _SWITCHES:
        if env.get(name):
            return True
    return any(key.startswith(_TUNABLE_PREFIX) for key in env)


def autoload() -> None:
    try:
        if not _requested():
            return None
        from ah_plugin.settings import env_requests_plugin

        if not env_requests_plugin():
            return None
        from ah_plugin import activate_from_environment

        activate_from_environment()
    except Exception as exc:  # never break `import torch`
        try:
            import warnings

            warnings.warn(f"ah_plugin: not activated ({exc!r}); torch runs without it", RuntimeWarning)
        except Exception:
            pass
    return None
