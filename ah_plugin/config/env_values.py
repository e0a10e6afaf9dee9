"""One rule for a variable that holds a bad value, shared by ``ah_plugin.config.settings`` and
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
import os
import re
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
    from ..report.messages import quoted, warn

    hint = _value_hint[0](name, value, expected) if _value_hint[0] is not None and len(value) <= 1000 else ""
    warn(f"{name}={quoted(value)} is not {expected}{hint}; {instead}", category)


# the "did you mean" of a bad value: ``env_names.value_hint``, which reads this module's words and the
# settings' names, so it hands itself over when imported (every switch-on that reads the variables does)
_value_hint: list = [None]


def use_value_hint(hint) -> None:
    """``hint(name, value, expected)`` gives the " (did you mean ...?)" of a bad value from now on."""
    _value_hint[0] = hint


_ASCII_INT = re.compile(r"[+-]?[0-9]+")
_ASCII_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
MAX_DIGITS = 18  # an integer setting longer than this means nothing (Python refuses to read 4301 digits or more)


def _digits(text: str) -> int:
    """How many digits an integer written as ``text`` has, leading zeros and sign aside."""
    return len(text.strip().lstrip("+-").lstrip("0"))


def ascii_int(text: str) -> int | None:
    """``text`` (surrounding spaces allowed) as an integer written in ASCII digits, of at most ``MAX_DIGITS``
    digits, else None: Python's ``int`` also reads ``'١'`` (an Arabic-Indic one) and ``'1_0'``, which no
    variable should mean, and raises on 4301 digits or more."""
    text = text.strip()
    if not _ASCII_INT.fullmatch(text) or _digits(text) > MAX_DIGITS:
        return None
    return int(text)


def finite_number(text: str) -> float | None:
    """``text`` as a finite number in ASCII (``1e-3``, ``0.5``), else None (``nan``, ``inf``, ``١``)."""
    text = text.strip()
    if not _ASCII_NUMBER.fullmatch(text) or len(text) > 400:  # no setting is a number of 400 characters
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_bool(text: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case), or an ASCII integer (non-zero: true)."""
    lowered = text.strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    value = ascii_int(lowered)
    if value is None:
        raise BadValue("one of 1/0, true/false, yes/no, on/off")
    return value != 0


def parse_int(text: str, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer in [minimum, maximum], in ASCII digits."""
    bounds = f"[{minimum}, {maximum if maximum is not None else 'inf'}]"
    value = ascii_int(text)
    if value is None or value < minimum or (maximum is not None and value > maximum):
        long = _ASCII_INT.fullmatch(text.strip()) and _digits(text) > MAX_DIGITS
        raise BadValue(f"an integer in {bounds}" + (f" of at most {MAX_DIGITS} digits" if long else ""))
    return value


def parse_number(text: str, minimum: float, maximum: float, low_open: bool = False) -> float:
    """A finite number in [minimum, maximum] (``(minimum, maximum]`` when ``low_open``), in ASCII."""
    value = finite_number(text)
    expected = f"a number in {'(' if low_open else '['}{minimum:g}, {maximum:g}]"
    if value is None or value < minimum or value > maximum or (low_open and value == minimum):
        raise BadValue(expected)
    return value


def parse_fraction(text: str) -> float:
    """A number in (0, 1]."""
    return parse_number(text, 0.0, 1.0, low_open=True)


PATH_EXPECTED = "a path: not blank, no spaces around it, ~ only where it names a home folder"


def parse_path(text: str) -> str:
    """A file or folder name: not blank, no leading or trailing space (a shell quoting slip), and a
    leading ``~`` expanded to the home folder (refused where it cannot be: no HOME, no such user)."""
    if not text.strip() or text != text.strip():
        raise BadValue(PATH_EXPECTED)
    path = os.path.expanduser(text) if text.startswith("~") else text
    if path.startswith("~"):
        raise BadValue(PATH_EXPECTED + f" ({text.split(os.sep)[0]} is no home folder here)")
    return path


def forget_warnings() -> None:
    """Warn again about values already warned about (tests)."""
    with _warned_lock:
        _warned.clear()
