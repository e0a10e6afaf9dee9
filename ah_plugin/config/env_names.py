"""Misspelled variables: a variable of ours that the plugin does not read, and a value that is close to
one it does, each said with the closest known word.

``warn_unknown`` looks once per process at every set variable named ``AH_PLUGIN_*``, ``AH_TUNABLE_*`` or
``TORCHINDUCTOR_AUTOHEURISTIC_*`` (the ``torch.backends`` entry point calls it when one is set, the
switch-on again): ``AH_PLUGIN_TOPK`` would otherwise do nothing, silently. ``value_hint`` is the
"did you mean" that ``env_values.warn_bad`` adds to a bad value of a variable with named values
(``AH_PLUGIN_TOP_K=qualty``, ``TORCHINDUCTOR_AUTOHEURISTIC_USE=addm``, a misspelled ``true``).
Standard library only.
"""

from __future__ import annotations

import os
import re

from . import settings
from .did_you_mean import closest, hint
from .env_values import FALSE_WORDS, TRUE_WORDS, SettingsWarning, use_value_hint

PREFIXES = ("AH_PLUGIN_", "AH_TUNABLE_", "TORCHINDUCTOR_AUTOHEURISTIC_")

# variable -> the words it takes (besides numbers); true/false variables are known by what they expect
NAMED_VALUES = {
    settings.ENV_TOP_K: settings.NAMED_MODES,
    settings.ENV_CONFIDENCE: ("never",),
    settings.ENV_TIMING: tuple(settings.TIMINGS),
    settings.ENV_NON_GEMM: tuple(settings.NON_GEMM_VALUES),
    settings.ENV_SEARCH_SPACE: settings.SEARCH_SPACES,
    settings.ENV_PADDED_CHOICE: settings.PADDED_CHOICE_VALUES,
    settings.ENV_LOG_PATH: ("DEFAULT",),
}
OPERATION_LISTS = (settings.ENV_COLLECT, settings.ENV_USE)

_said = [False]


def known_names(with_tunable: bool = True) -> set[str]:
    """Every variable the plugin reads (the results cache's with ``with_tunable``: importing its settings)."""
    names = {value for key, value in vars(settings).items() if key.startswith("ENV_") and isinstance(value, str)}
    if with_tunable:
        from ..tunable import settings as tunable_settings

        names |= {value for value in vars(tunable_settings).values()
                  if isinstance(value, str) and value.startswith(settings.TUNABLE_PREFIX)}
    return names


def unknown_names(environ=None) -> dict[str, str | None]:
    """Set variables of ours that the plugin does not read -> the closest known name (None: none close)."""
    env = os.environ if environ is None else environ
    ours = sorted(key for key in env if key.startswith(PREFIXES))
    if not ours:
        return {}
    known = known_names(with_tunable=any(key.startswith(settings.TUNABLE_PREFIX) for key in ours))
    return {key: closest(key, known, cutoff=0.8) for key in ours if key not in known}


def unknown_names_message(unknown: dict[str, str | None]) -> str:
    named = [name + (f" (did you mean {match}?)" if match else "") for name, match in unknown.items()]
    verb = "is not a variable" if len(named) == 1 else "are not variables"
    return f"{', '.join(named)} {verb} the plugin reads; ignored (docs/plugin.md lists them)"


def warn_unknown(environ=None) -> None:
    """Say once per process which set variables of ours the plugin does not read."""
    if _said[0]:
        return
    _said[0] = True
    unknown = unknown_names(environ)
    if unknown:
        from ..report import messages

        messages.warn(unknown_names_message(unknown), SettingsWarning)


def value_hint(name: str, value: str, expected: str) -> str:
    """`` (did you mean 'quality'?)`` for a bad value close to a word ``name`` takes, else ``""``."""
    text = value.strip()
    if name in OPERATION_LISTS:
        known = settings.KNOWN_OPS | settings.BUILTIN_ONLY_OPS
        items = [item for item in re.split(r"[,;:|\s]+", text) if item and not settings.is_known_op(item)]
        said = [f"{match!r} for {item!r}" for item in items if (match := closest(item, known))]
        return f" (did you mean {', '.join(said)}?)" if said else ""
    words = NAMED_VALUES.get(name) or (TRUE_WORDS + FALSE_WORDS if "true/false" in expected else ())
    return hint(text, words)


use_value_hint(value_hint)
