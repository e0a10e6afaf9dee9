"""Every switch of the results cache, with its environment variable and Python-API twin.

The rules, written once (the same as the plugin's, ah_plugin/config/settings.py and docs/plugin.md):

- **an environment variable that is set (to a non-empty value) wins over the Python API; the API sets
  the value used while the variable is unset;**
- **a bad value of a variable warns once (naming the variable, the value and what is expected) and
  disables only what that variable governs**: here the variable is ignored and the value it would have
  unset applies (the API's, else the default), which the warning names; every other switch goes on.

Variables are read on each query (one dict lookup), so a test or launcher may change them at any time.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass

from ah_plugin.config.env_values import BadValue, SettingsWarning, ascii_int, finite_number, parse_bool, parse_int, parse_path, warn_bad

ENABLED = "AH_TUNABLE_ENABLED"
TUNING = "AH_TUNABLE_TUNING"
RECORD_UNTUNED = "AH_TUNABLE_RECORD_UNTUNED"
FILENAME = "AH_TUNABLE_FILENAME"
UNTUNED_FILENAME = "AH_TUNABLE_UNTUNED_FILENAME"
MAX_TUNING_DURATION_MS = "AH_TUNABLE_MAX_TUNING_DURATION_MS"
MAX_TUNING_ITERATIONS = "AH_TUNABLE_MAX_TUNING_ITERATIONS"
VERBOSE = "AH_TUNABLE_VERBOSE"
VERBOSE_FILENAME = "AH_TUNABLE_VERBOSE_FILENAME"
NUMERICAL_CHECK = "AH_TUNABLE_NUMERICAL_CHECK"
USE_HEURISTIC_TOP1 = "AH_TUNABLE_USE_HEURISTIC_TOP1"

DEFAULT_FILENAME = "ah_tunable_results%d.csv"
DEFAULT_UNTUNED_FILENAME = "ah_tunable_untuned%d.csv"
DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-5

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class TunableSettingsWarning(SettingsWarning):
    """A variable of the results cache holds a value that cannot be read; its unset value is used."""


@dataclass
class _ApiValues:
    """Values set through the Python API (used while the matching variable is unset)."""

    enabled: bool = False
    tuning: bool = True
    record_untuned: bool = False
    filename: str = DEFAULT_FILENAME
    untuned_filename: str = DEFAULT_UNTUNED_FILENAME
    max_tuning_duration_ms: int = 30
    max_tuning_iterations: int = 100
    verbose: int = 0
    verbose_filename: str = "err"
    numerical_check: tuple[bool, float, float] = (False, DEFAULT_ATOL, DEFAULT_RTOL)
    use_heuristic_top1: bool = False
    write_on_exit: bool = True


api = _ApiValues()


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else None


def _parsed(name: str, parse, api_value):
    """``parse`` of a set variable, else ``api_value``; a bad value warns once and ``api_value`` applies."""
    value = _env(name)
    if value is None:
        return api_value
    try:
        return parse(value)
    except BadValue as bad:
        warn_bad(name, value, bad.expected, f"ignored: {api_value!r} applies (its value when unset)",
                 TunableSettingsWarning)
        return api_value


def _bool(name: str, api_value: bool) -> bool:
    return _parsed(name, parse_bool, api_value)


def _int(name: str, api_value: int, lo: int = 0, hi: int | None = None) -> int:
    return _parsed(name, lambda text: parse_int(text, lo, hi), api_value)


def is_enabled() -> bool:
    return _bool(ENABLED, api.enabled)


def tuning_is_enabled() -> bool:
    return _bool(TUNING, api.tuning)


def record_untuned_is_enabled() -> bool:
    return _bool(RECORD_UNTUNED, api.record_untuned)


def use_heuristic_top1() -> bool:
    return _bool(USE_HEURISTIC_TOP1, api.use_heuristic_top1)


def max_tuning_duration_ms() -> int:
    return _int(MAX_TUNING_DURATION_MS, api.max_tuning_duration_ms)


def max_tuning_iterations() -> int:
    return _int(MAX_TUNING_ITERATIONS, api.max_tuning_iterations)


def verbose_level() -> int:
    return _int(VERBOSE, api.verbose, 0, 3)


def verbose_filename() -> str:
    return _parsed(VERBOSE_FILENAME, parse_path, api.verbose_filename)


def raw_filename() -> str:
    """The results file name before the device ordinal is put in (may hold `%d`)."""
    return _parsed(FILENAME, parse_path, api.filename)


def raw_untuned_filename() -> str:
    return _parsed(UNTUNED_FILENAME, parse_path, api.untuned_filename)


def tolerance(value) -> float | None:
    """A tolerance of the numerical check: a finite number >= 0 (``nan`` would fail every candidate,
    ``inf`` pass every one, a negative one fail them all), else None."""
    try:
        number = finite_number(value) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        return None
    return number if number is not None and math.isfinite(number) and number >= 0 else None


def _numerical_check(text: str) -> tuple[bool, float, float]:
    lowered = text.strip().lower()
    if lowered in _FALSE:
        return (False, api.numerical_check[1], api.numerical_check[2])
    if lowered in _TRUE:
        return (True, DEFAULT_ATOL, DEFAULT_RTOL)
    atol, sep, rtol = lowered.partition("_")
    atol, rtol = tolerance(atol), tolerance(rtol)
    if not sep or atol is None or rtol is None:
        raise BadValue("0, 1 or ATOL_RTOL, two finite numbers >= 0 (e.g. 1e-3_1e-2)")
    return (True, atol, rtol)


def numerical_check() -> tuple[bool, float, float]:
    """(enabled, atol, rtol). The variable is `0`, `1` (default tolerances) or `ATOL_RTOL`, e.g. `1e-3_1e-2`."""
    return _parsed(NUMERICAL_CHECK, _numerical_check, api.numerical_check)


def device_ordinal() -> int:
    """The device this process tunes for: the current CUDA device when CUDA is already initialised,
    else LOCAL_RANK (torchrun), else 0. Never initialises CUDA itself."""
    torch = sys.modules.get("torch")  # not imported: CUDA cannot be initialised either
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return int(torch.cuda.current_device())
    except Exception:  # a broken CUDA setup must not break a compile
        pass
    text = os.environ.get("LOCAL_RANK", "")
    rank = ascii_int(text) if text else 0
    if rank is None or rank < 0:
        warn_bad("LOCAL_RANK", text, "an integer >= 0", "device 0's files are used", TunableSettingsWarning)
        return 0
    return rank


def with_ordinal(filename: str, ordinal: int | None = None) -> str:
    """Put the device ordinal where the name holds `%d` (all occurrences)."""
    if "%d" not in filename:
        return filename
    return filename.replace("%d", str(device_ordinal() if ordinal is None else ordinal))


def insert_ordinal_placeholder(filename: str) -> str:
    """`results.csv` -> `results%d.csv` (before the extension; at the end when there is none)."""
    if "%d" in filename:
        return filename
    head, sep, ext = filename.rpartition(".")
    if sep and "/" not in ext and os.sep not in ext and head:
        return f"{head}%d.{ext}"
    return filename + "%d"
