"""Every switch of the plugin, in one place: the environment variable and its Python-API twin.

Rule (written once, here and in docs/plugin.md): **a variable that is set in the environment wins over
the value given to ``ah_plugin.install(...)``/``enabled(...)``; an unset (or empty) variable leaves the
API value, and with neither the default applies.**

Standard library only: ``_autoload`` calls ``env_requests_plugin`` on every ``import torch``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

# Upstream variables (same meaning as torch's built-in AutoHeuristic: comma-separated op names).
ENV_COLLECT = "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT"
ENV_USE = "TORCHINDUCTOR_AUTOHEURISTIC_USE"
ENV_LOG_PATH = "TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH"  # "DEFAULT" or unset: per-device file
# Ours.
ENV_TOP_K = "AH_PLUGIN_TOP_K"  # an integer, or "adaptive"
ENV_TOP_K_MASS = "AH_PLUGIN_TOP_K_MASS"  # adaptive k's probability threshold; setting it means adaptive
ENV_MIN_CHOICES = "AH_PLUGIN_MIN_CHOICES"  # the USE policy never keeps fewer (when that many exist)
ENV_KEEP_ATEN = "AH_PLUGIN_KEEP_ATEN"  # always keep the aten choice besides the top k
ENV_ARTIFACT_DIR = "AH_PLUGIN_ARTIFACT_DIR"
ENV_VERBOSE = "AH_PLUGIN_VERBOSE"
ENV_SEARCH_SPACE = "AH_PLUGIN_SEARCH_SPACE"  # "default" | "wide"
ENV_SEARCH_SAMPLE = "AH_PLUGIN_SEARCH_SAMPLE"  # extra configs sampled per input in collect mode
ENV_DISABLE = "AH_PLUGIN_DISABLE"  # "1": the plugin stays off whatever else is set
ENV_TIMING = "AH_PLUGIN_TIMING"  # "replay" (CUDA-graph replay, the default) | "per_call" (Inductor's own)
ENV_ATEN_MARGIN = "AH_PLUGIN_ATEN_MARGIN"  # a template beats aten only by more than this fraction
ENV_CONFIDENCE = "AH_PLUGIN_CONFIDENCE"  # fast mode: trust a lone template when its ranking share reaches this
# The results cache (ah_plugin/tunable) owns the meaning of these; any of them switches the hook on.
TUNABLE_PREFIX = "AH_TUNABLE_"

_FALSE_WORDS = ("", "0", "false", "off", "no")

# Built-in AutoHeuristic decisions that are not autotunings (padding, mixed mm): they stay torch's,
# even when named in the same variables.
BUILTIN_ONLY_OPS = frozenset({"pad_mm", "mixed_mm"})
SEARCH_SPACES = ("default", "wide")
ADAPTIVE = "adaptive"
FAST = "fast"
TIMINGS = {"replay": "cudagraph_replay", "cudagraph_replay": "cudagraph_replay", "per_call": None}
# On the CPU, Inductor autotunes a GEMM only as packed_linear (a constant weight under freezing): asking
# for mm covers it, so COLLECT=mm / USE=mm do on the CPU what they do on a GPU. In use mode mm also covers
# the other GEMMs of a model (linear layers with a bias, batched products): a user asking for faster GEMM
# compiles means all of them; collection keeps upstream's meaning (mm rows only).
COLLECT_ALIASES = {"mm": ("packed_linear",)}
USE_ALIASES = {"mm": ("addmm", "bmm", "baddbmm", "packed_linear")}


def env_requests_plugin(environ=None) -> bool:
    """True when any variable asks for the plugin. A few dict lookups; imports nothing."""
    env = os.environ if environ is None else environ
    if env.get(ENV_DISABLE, "").strip().lower() not in _FALSE_WORDS:
        return False
    for name in (ENV_COLLECT, ENV_USE):
        if _ops(env.get(name)):
            return True
    for key in env:
        if key.startswith(TUNABLE_PREFIX) and env[key].strip().lower() not in _FALSE_WORDS:
            return True
    return False


@dataclass(frozen=True)
class Settings:
    """The effective switches. ``collect``/``use``: op names ("mm", "addmm", "bmm", "packed_linear")."""

    collect: frozenset = frozenset()
    use: frozenset = frozenset()
    log_path: str | None = None  # None: <inductor cache dir>/autoheuristic/<device>/<op>.txt
    top_k: int = 10  # with adaptive: the most choices kept besides aten
    fast: bool = True  # fast mode (the default): one choice when the ranking is sure, else aten + its top-1
    adaptive: bool = False
    top_k_mass: float = 0.9
    min_choices: int = 2
    keep_aten: bool = True
    artifact_dir: str | None = None
    verbose: bool = False
    search_space: str = "wide"  # "wide": add filtered exhaustive configs (GPU Triton mm only)
    search_sample: int = 20  # extra configs benchmarked per input in collect mode
    tunable: bool = False  # any AH_TUNABLE_* variable set (the cache decides what it means)
    timing: str | None = "cudagraph_replay"  # how candidates are timed on CUDA (None: Inductor's per-call events)
    aten_margin: float = 0.02  # a template replaces aten only when faster by more than this fraction
    confidence: float = 0.8  # fast mode keeps a lone template when its ranking share reaches this

    @property
    def collect_ops(self) -> frozenset:
        """Ops whose autotunings are logged (``collect`` with the ops it covers)."""
        return with_aliases(self.collect, COLLECT_ALIASES)

    @property
    def use_ops(self) -> frozenset:
        """Ops whose candidates the learned ranking narrows (``use`` with the ops it covers)."""
        return with_aliases(self.use, USE_ALIASES)

    @property
    def handled_ops(self) -> frozenset:
        """Ops the plugin acts on (and the built-in must leave alone)."""
        return self.collect_ops | self.use_ops

    @property
    def active(self) -> bool:
        return bool(self.collect or self.use or self.tunable)


def _ops(text) -> frozenset:
    if text is None:
        return frozenset()
    if isinstance(text, str):
        items = text.split(",")
    else:
        items = list(text)
    names = (item.strip() for item in items if item and item.strip())
    return frozenset(name for name in names if name not in BUILTIN_ONLY_OPS)


def with_aliases(ops, aliases) -> frozenset:
    """``ops`` plus the ops they cover (``COLLECT_ALIASES`` / ``USE_ALIASES``)."""
    return frozenset(ops) | frozenset(alias for name in ops for alias in aliases.get(name, ()))


def _int(name: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected an integer") from None
    if value < minimum:
        raise ValueError(f"{name}={text!r}: must be >= {minimum}")
    return value


def _mass(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a number in (0, 1]") from None
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name}={text!r}: must be in (0, 1]")
    return value


def _fraction(name: str, text: str, upper: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a number in [0, {upper:g}]") from None
    if not 0.0 <= value <= upper:
        raise ValueError(f"{name}={text!r}: must be in [0, {upper:g}]")
    return value


def _from_env(env) -> dict:
    """Fields set by the environment (only those present and non-empty)."""
    out: dict = {}
    if env.get(ENV_COLLECT, "").strip():
        out["collect"] = _ops(env[ENV_COLLECT])
    if env.get(ENV_USE, "").strip():
        out["use"] = _ops(env[ENV_USE])
    path = env.get(ENV_LOG_PATH, "").strip()
    if path:
        out["log_path"] = None if path == "DEFAULT" else path
    top_k = env.get(ENV_TOP_K, "").strip()
    if top_k.lower() == ADAPTIVE:
        out["adaptive"], out["fast"] = True, False
    elif top_k.lower() == FAST:
        out["fast"], out["adaptive"] = True, False
    elif top_k:
        out["top_k"], out["fast"] = _int(ENV_TOP_K, top_k, 1), False
    if env.get(ENV_TOP_K_MASS, "").strip():
        out["top_k_mass"] = _mass(ENV_TOP_K_MASS, env[ENV_TOP_K_MASS].strip())
        out["adaptive"], out["fast"] = True, False
    timing = env.get(ENV_TIMING, "").strip().lower()
    if timing:
        if timing not in TIMINGS:
            raise ValueError(f"{ENV_TIMING}={timing!r}: expected replay or per_call")
        out["timing"] = TIMINGS[timing]
    if env.get(ENV_ATEN_MARGIN, "").strip():
        out["aten_margin"] = _fraction(ENV_ATEN_MARGIN, env[ENV_ATEN_MARGIN].strip(), upper=1.0)
    if env.get(ENV_CONFIDENCE, "").strip():
        out["confidence"] = _mass(ENV_CONFIDENCE, env[ENV_CONFIDENCE].strip())
    if env.get(ENV_MIN_CHOICES, "").strip():
        out["min_choices"] = _int(ENV_MIN_CHOICES, env[ENV_MIN_CHOICES].strip(), 1)
    if env.get(ENV_KEEP_ATEN, "").strip():
        out["keep_aten"] = env[ENV_KEEP_ATEN].strip().lower() not in _FALSE_WORDS
    if env.get(ENV_ARTIFACT_DIR, "").strip():
        out["artifact_dir"] = env[ENV_ARTIFACT_DIR].strip()
    if env.get(ENV_VERBOSE, "").strip():
        out["verbose"] = env[ENV_VERBOSE].strip().lower() not in _FALSE_WORDS
    if env.get(ENV_SEARCH_SPACE, "").strip():
        space = env[ENV_SEARCH_SPACE].strip().lower()
        if space not in SEARCH_SPACES:
            raise ValueError(f"{ENV_SEARCH_SPACE}={space!r}: expected one of {SEARCH_SPACES}")
        out["search_space"] = space
    if env.get(ENV_SEARCH_SAMPLE, "").strip():
        out["search_sample"] = _int(ENV_SEARCH_SAMPLE, env[ENV_SEARCH_SAMPLE].strip(), 0)
    if any(k.startswith(TUNABLE_PREFIX) and v.strip().lower() not in _FALSE_WORDS for k, v in env.items()):
        out["tunable"] = True
    return out


_api_values: dict = {}


def _normalise_api(values: dict) -> dict:
    names = {f.name for f in fields(Settings)}
    out = {}
    for key, value in values.items():
        if key not in names:
            raise TypeError(f"unknown ah_plugin setting {key!r}; known: {sorted(names)}")
        if value is None and key not in ("log_path", "artifact_dir"):
            continue
        if key == "top_k" and value in (ADAPTIVE, FAST):
            out["adaptive"], out["fast"] = value == ADAPTIVE, value == FAST
            continue
        if key == "top_k":
            out["fast"] = False
        if key == "timing":
            if value not in TIMINGS:
                raise ValueError(f"timing={value!r}: expected replay or per_call")
            value = TIMINGS[value]
        if key == "aten_margin":
            value = _fraction(key, str(value), upper=1.0)
        if key == "confidence":
            value = _mass(key, str(value))
        if key in ("collect", "use"):
            value = _ops(value)
        elif key == "top_k_mass":
            value = _mass(key, str(value))
            out["adaptive"], out["fast"] = True, False  # as the variable: a threshold means adaptive k
        elif key == "search_space" and value not in SEARCH_SPACES:
            raise ValueError(f"search_space={value!r}: expected one of {SEARCH_SPACES}")
        elif key in ("top_k", "min_choices") and int(value) < 1:
            raise ValueError(f"{key}={value!r}: must be >= 1")
        out[key] = value
    return out


def set_api_values(**values) -> None:
    """Replace the API layer (``install``/``enabled`` call this). Unknown names raise TypeError."""
    global _api_values
    _api_values = _normalise_api(values)


def api_values() -> dict:
    return dict(_api_values)


def current(environ=None) -> Settings:
    """Effective settings: defaults, then the API values, then the environment on top."""
    env = os.environ if environ is None else environ
    if env.get(ENV_DISABLE, "").strip().lower() not in _FALSE_WORDS:
        return Settings()
    merged = dict(_api_values)
    merged.update(_from_env(env))
    return replace(Settings(), **merged)


def describe(settings: Settings) -> str:
    """A stable text of the settings that change what Inductor generates (for cache keys)."""
    return (
        f"collect={','.join(sorted(settings.collect))};use={','.join(sorted(settings.use))};"
        f"top_k={settings.top_k};fast={settings.fast}:{settings.confidence};"
        f"adaptive={settings.adaptive}:{settings.top_k_mass};"
        f"timing={settings.timing};margin={settings.aten_margin};"
        f"min={settings.min_choices};aten={settings.keep_aten};artifact_dir={settings.artifact_dir};"
        f"space={settings.search_space};sample={settings.search_sample};tunable={settings.tunable}"
    )


__all__ = [
    "ENV_COLLECT",
    "ENV_USE",
    "ENV_LOG_PATH",
    "ENV_TOP_K",
    "ENV_TOP_K_MASS",
    "ENV_MIN_CHOICES",
    "ENV_KEEP_ATEN",
    "ENV_ARTIFACT_DIR",
    "ENV_VERBOSE",
    "ENV_SEARCH_SPACE",
    "ENV_SEARCH_SAMPLE",
    "ENV_DISABLE",
    "ENV_TIMING",
    "ENV_ATEN_MARGIN",
    "ENV_CONFIDENCE",
    "TUNABLE_PREFIX",
    "Settings",
    "env_requests_plugin",
    "set_api_values",
    "api_values",
    "current",
    "describe",
]
