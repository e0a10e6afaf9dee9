"""One rule for a variable that holds a bad value, shared by ``ah_plugin.settings`` and
``ah_plugin.tunable.settings``.

The rule: **a bad value of a variable warns once (naming the variable, the value and what is
expected) and disables only what that variable governs.** The warning ends with what happens
instead, which is one of two things: the part the variable configures is switched off (a USE ranking
whose k cannot be read does not prune at all), or the variable is ignored and the value it would have
unset applies (the Python API's, else the default). Nothing else changes: collection, the USE ranking
and the results cache each go on unless their own variables are bad. The Python-API twin of a
variable raises ``ValueError`` at the call instead, where a bad argument is seen at once.

Standard library only: ``settings`` is read by the ``torch.backends`` entry point on ``import torch``.
"""

from __future__ import annotations

import math
import threading

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class SettingsWarning(UserWarning):
    """A variable holds a value that cannot be used; the message says what happens instead."""


class BadValue(ValueError):
    """A value that does not parse; ``expected`` says what would."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


_warned: set = set()
_warned_lock = threading.Lock()


def warn_bad(name: str, value: str, expected: str, instead: str, category=SettingsWarning) -> None:
    """Say once per (variable, value): ``NAME='value' is not EXPECTED (did you mean ...?); INSTEAD``, shown
    at the user's line (``messages.warn``)."""
    with _warned_lock:
        if (name, value) in _warned:
            return
        _warned.add((name, value))
    from .env_names import value_hint
    from .messages import warn

    warn(f"{name}={value!r} is not {expected}{value_hint(name, value, expected)}; {instead}", category)


def parse_bool(text: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case), or an integer (non-zero: true)."""
    lowered = text.strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    try:
        return int(lowered) != 0
    except ValueError:
        raise BadValue("one of 1/0, true/false, yes/no, on/off") from None


def parse_int(text: str, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer in [minimum, maximum]."""
    bounds = f"[{minimum}, {maximum if maximum is not None else 'inf'}]"
    try:
        value = int(text.strip())
    except ValueError:
        raise BadValue(f"an integer in {bounds}") from None
    if value < minimum or (maximum is not None and value > maximum):
        raise BadValue(f"an integer in {bounds}")
    return value


def parse_fraction(text: str) -> float:
    """A number in (0, 1]."""
    try:
        value = float(text.strip())
    except ValueError:
        raise BadValue("a number in (0, 1]") from None
    if math.isnan(value) or not 0.0 < value <= 1.0:
        raise BadValue("a number in (0, 1]")
    return value


def forget_warnings() -> None:
    """Warn again about values already warned about (tests)."""
    with _warned_lock:
        _warned.clear()
