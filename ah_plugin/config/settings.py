"""Every switch of the plugin, in one place: the environment variable and its Python-API twin.

Rules (written once, here and in docs/plugin.md):

- **a variable that is set in the environment wins over the value given to
  ``ah_plugin.install(...)``/``enabled(...)``; an unset (or empty) variable leaves the API value, and
  with neither the default applies;**
- **a bad value of a variable warns once (naming the variable, the value and what is expected) and
  disables only what that variable governs** (``env_values``): a bad ``AH_PLUGIN_TOP_K``,
  ``AH_PLUGIN_TOP_K_MASS`` or ``AH_PLUGIN_MIN_CHOICES`` turns the USE ranking off (a guessed k could
  prune the wrong choices), unknown operation names are dropped (the known ones are listed), any other
  bad variable is ignored (its unset value applies). Collection and the results cache go on.
  ``current()`` never raises; the API twins raise ``ValueError`` at the call.

Standard library only: ``_autoload`` calls ``env_requests_plugin`` on every ``import torch``.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, fields, replace

from .env_values import BadValue, parse_bool, parse_fraction, parse_int, parse_number, parse_path, warn_bad

# Upstream variables (same meaning as torch's built-in AutoHeuristic: comma-separated op names).
ENV_COLLECT = "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT"
ENV_USE = "TORCHINDUCTOR_AUTOHEURISTIC_USE"
ENV_LOG_PATH = "TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH"  # "DEFAULT" or unset: per-device file
# Ours.
ENV_TOP_K = "AH_PLUGIN_TOP_K"  # "fast" (the default), "quality", an integer, or "adaptive"
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
ENV_CONFIDENCE = "AH_PLUGIN_CONFIDENCE"  # fast mode: the share a template needs to be kept alone, or "never"
ENV_NON_GEMM = "AH_PLUGIN_NON_GEMM"  # fast/quality modes: "skip" (max-autotune tunes GEMMs only, default) | "tune"
ENV_L2_RULE = "AH_PLUGIN_L2_RULE"  # fast mode: aten alone on memory-bound GEMMs within L2 ("on", default) | "off"
# fast mode on a GPU: time a template its data do not back ("on", default) | aten alone ("off")
ENV_TIME_UNBACKED = "AH_PLUGIN_TIME_UNBACKED"
ENV_COMPILE_ONCE = "AH_PLUGIN_COMPILE_ONCE"  # a kept template reuses its autotuning's compile ("on", default) | "off"
ENV_PADDED_CHOICE = "AH_PLUGIN_PADDED_CHOICE"  # quality mode: the padded GEMM as a candidate: "off" (default) | "auto" (CUDA) | "on"
PADDED_CHOICE_VALUES = ("auto", "on", "off")
# The results cache (ah_plugin/tunable) owns the meaning of these; any of them switches the hook on.
TUNABLE_PREFIX = "AH_TUNABLE_"

_FALSE_WORDS = ("", "0", "false", "off", "no")

# Built-in AutoHeuristic decisions that are not autotunings (padding, mixed mm): they stay torch's,
# even when named in the same variables.
BUILTIN_ONLY_OPS = frozenset({"pad_mm", "mixed_mm"})
SEARCH_SPACES = ("default", "wide")
ADAPTIVE = "adaptive"
FAST = "fast"
NEVER = math.inf  # AH_PLUGIN_CONFIDENCE=never: no share is enough
QUALITY = "quality"
QUALITY_TOP_K = 3  # quality mode: the ranking's top templates benchmarked with aten
METHOD_REPLAY = "cudagraph_replay"  # replay_timing.METHOD_REPLAY (not imported: this module stays import-free)
TIMINGS = {"replay": METHOD_REPLAY, METHOD_REPLAY: METHOD_REPLAY, "per_call": None}
# On the CPU, Inductor autotunes a GEMM only as packed_linear (a constant weight under freezing): asking
# for mm covers it, so COLLECT=mm / USE=mm do on the CPU what they do on a GPU. In use mode mm also covers
# the other GEMMs of a model (linear layers with a bias, batched products): a user asking for faster GEMM
# compiles means all of them; collection keeps upstream's meaning (mm rows only).
COLLECT_ALIASES = {"mm": ("packed_linear",)}
USE_ALIASES = {"mm": ("addmm", "bmm", "baddbmm", "packed_linear")}

# Inductor's autotuning names (``autotune_select_algorithm(name, ...)``) in the torch versions this plugin
# supports; a custom op autotuned with ``torch.library`` is named ``<op>_autotuned``. A name outside these
# is a typo (``USE=mm;addmm``): refused, so that a variable never silently does nothing.
KNOWN_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "int_mm", "scaled_mm", "mm_plus_mm", "sparse_semi_structured_mm",
    "_weight_int8pack_mm", "_weight_int4pack_mm_for_cpu", "grouped_mm", "scaled_grouped_mm", "b2b_gemm",
    "packed_linear", "linear_unary", "linear_binary", "qlinear_unary", "qlinear_binary", "grouped_gemm",
    "convolution", "convolution_bwd_input", "convolution_bwd_weight",
    "flex_attention", "flex_attention_backward", "flex_decoding",
    "flex_flash_attention", "flex_flash_attention_backward",
})
_CUSTOM_OP = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*_autotuned")
# The variables whose bad value turns the USE ranking off, and the UseOptions field each one sets.
RANKING_VARIABLES = {ENV_TOP_K: "top_k", ENV_TOP_K_MASS: "mass", ENV_MIN_CHOICES: "min_choices",
                     ENV_CONFIDENCE: "confidence"}


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
    ranking_off: tuple = ()  # variables of RANKING_VARIABLES holding a bad value: the USE ranking is off
    timing: str | None = METHOD_REPLAY  # how candidates are timed on CUDA (None: Inductor's per-call events)
    aten_margin: float = 0.02  # a template replaces aten only when faster by more than this fraction
    confidence: float | None = None  # fast mode keeps a template alone from this share (None: 0.8 on a CPU,
    # never on a GPU; ranking.lone_template_share)
    tune_non_gemm: bool = False  # fast/quality: keep max-autotune's tuning of pointwise/reduction kernels
    quality: bool = False  # quality mode: the top QUALITY_TOP_K (not top_k) of a space with persistent TMA, and aten
    l2_rule: bool = True  # fast mode: aten alone on memory-bound GEMMs within L2 (l2_residency)
    time_unbacked: bool = True  # fast mode on a GPU: time an unbacked template against aten (False: aten alone)
    compile_once: bool = True  # a benchmarked template that wins compiles once (patches/compile_once.py)
    padded_choice: str = "off"  # quality mode: cuBLAS on the padded GEMM as one more candidate (inductor/padded_choice.py)

    @property
    def gemm_only(self) -> bool:
        """Fast and quality modes narrow ``mode="max-autotune"`` to GEMM autotuning (patches/mode_options.py)."""
        return bool(self.use) and (self.fast or self.quality) and not self.tune_non_gemm

    @property
    def skip_fusion_benchmark(self) -> bool:
        """Fast mode benchmarks no template fused with its epilogue (patches/mode_options.py): Inductor would
        compile and time a fused copy of each kept template, one GEMM after another."""
        return self.gemm_only and self.fast

    @property
    def fused_group_by_replay(self) -> bool:
        """Quality mode decides a template fused with its neighbour against cuBLAS plus the separate kernel by
        replay timing of both groups, the fused one winning only by the aten margin (patches/fusion_timing.py)."""
        return bool(self.use) and self.quality and self.timing == METHOD_REPLAY

    @property
    def persistent_tma(self) -> bool:
        """Quality mode offers Inductor's persistent TMA mm template (patches/mode_options.py)."""
        return bool(self.use) and self.quality

    def offers_padded(self, device_type: str) -> bool:
        """Quality mode offers the padded GEMM as a candidate on this device (``padded_choice``: "auto" on
        CUDA, where cuBLAS takes a slow path on unaligned operands; "on" on any device)."""
        if not (self.use and self.quality) or self.padded_choice == "off":
            return False
        return self.padded_choice == "on" or device_type == "cuda"

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
    """The op names of a comma-separated variable or an API list, without the built-in-only ones."""
    if text is None:
        return frozenset()
    if isinstance(text, str):
        items = text.split(",")
    else:
        items = list(text)
    names = (item.strip() for item in items if item and item.strip())
    return frozenset(name for name in names if name not in BUILTIN_ONLY_OPS)


def builtin_only_requested(environ=None) -> frozenset:
    """The ops of ``BUILTIN_ONLY_OPS`` the collect and use variables name (left to torch's built-in)."""
    environ = os.environ if environ is None else environ
    names = set()
    for variable in (ENV_COLLECT, ENV_USE):
        names |= {item.strip() for item in (environ.get(variable) or "").split(",")}
    return frozenset(names & BUILTIN_ONLY_OPS)


def with_aliases(ops, aliases) -> frozenset:
    """``ops`` plus the ops they cover (``COLLECT_ALIASES`` / ``USE_ALIASES``)."""
    return frozenset(ops) | frozenset(alias for name in ops for alias in aliases.get(name, ()))


def is_known_op(name: str) -> bool:
    return name in KNOWN_OPS or name in BUILTIN_ONLY_OPS or bool(_CUSTOM_OP.fullmatch(name))


def unknown_ops_message(names) -> str:
    """What is wrong with ``names`` (unknown operations) and what is known."""
    hint = "; separate operations with commas" if any(re.search(r"[;:\s|]", n) for n in names) else ""
    return (f"a comma-separated list of known operations ({', '.join(sorted(KNOWN_OPS))}, or a custom op's "
            f"'<name>_autotuned'){hint}")


def _known_ops(name: str, text: str) -> frozenset:
    """``_ops`` of a variable; unknown names are dropped with one warning that lists the known ones."""
    ops = _ops(text)
    unknown = sorted(op for op in ops if not is_known_op(op))
    if unknown:
        kept = sorted(ops.difference(unknown))
        warn_bad(name, text, unknown_ops_message(unknown),
                 f"{', '.join(map(repr, unknown))} ignored; "
                 + (f"acting on {', '.join(kept)}" if kept else f"{name} does nothing"))
    return ops.difference(unknown)


_RANKING_OFF = "the USE ranking is off (Inductor benchmarks all its choices); collection and the results cache go on"


NAMED_MODES = (ADAPTIVE, FAST, QUALITY)


def named_mode(value: str) -> dict:
    """The flags a named ``AH_PLUGIN_TOP_K`` value stands for (quality mode's k, ``QUALITY_TOP_K``, is
    applied where the ranking reads its options, so ``top_k`` keeps its own value for the other modes)."""
    return {"adaptive": value == ADAPTIVE, "fast": value == FAST, "quality": value == QUALITY}


def _top_k(text: str):
    if text.lower() in NAMED_MODES:
        return text.lower()
    try:
        return parse_int(text, 1)
    except BadValue as bad:
        digits = bad.expected.split("]", 1)[1]  # " of at most 18 digits" for a number too long to mean anything
        raise BadValue(f"'fast', 'quality', an integer >= 1{digits} or 'adaptive'") from None


def _confidence(text: str) -> float:
    if text.strip().lower() == "never":
        return NEVER
    try:
        return parse_fraction(text)
    except BadValue:
        raise BadValue("a number in (0, 1] or 'never'") from None


def _timing(text: str):
    if text.lower() not in TIMINGS:
        raise BadValue("replay or per_call")
    return TIMINGS[text.lower()]


def _margin(text: str) -> float:
    return parse_number(text, 0.0, 1.0)


NON_GEMM_VALUES = {"skip": False, "tune": True}


def _non_gemm(text: str) -> bool:
    if text.lower() not in NON_GEMM_VALUES:
        raise BadValue(f"one of {', '.join(NON_GEMM_VALUES)}")
    return NON_GEMM_VALUES[text.lower()]


def _padded_choice(text: str) -> str:
    if text.strip().lower() not in PADDED_CHOICE_VALUES:
        raise BadValue(f"one of {', '.join(PADDED_CHOICE_VALUES)}")
    return text.strip().lower()


def _search_space(text: str) -> str:
    if text.lower() not in SEARCH_SPACES:
        raise BadValue(f"one of {', '.join(SEARCH_SPACES)}")
    return text.lower()


# variable -> (Settings field, parser); a bad value of the first three turns the USE ranking off
_PARSED = {
    ENV_TOP_K: ("top_k", _top_k),
    ENV_TOP_K_MASS: ("top_k_mass", parse_fraction),
    ENV_MIN_CHOICES: ("min_choices", lambda text: parse_int(text, 1)),
    ENV_KEEP_ATEN: ("keep_aten", parse_bool),
    ENV_VERBOSE: ("verbose", parse_bool),
    ENV_SEARCH_SPACE: ("search_space", _search_space),
    ENV_SEARCH_SAMPLE: ("search_sample", parse_int),
    ENV_CONFIDENCE: ("confidence", _confidence),
    ENV_TIMING: ("timing", _timing),
    ENV_ATEN_MARGIN: ("aten_margin", _margin),
    ENV_NON_GEMM: ("tune_non_gemm", _non_gemm),
    ENV_L2_RULE: ("l2_rule", parse_bool),
    ENV_TIME_UNBACKED: ("time_unbacked", parse_bool),
    ENV_COMPILE_ONCE: ("compile_once", parse_bool),
    ENV_PADDED_CHOICE: ("padded_choice", _padded_choice),
}


def _from_env(env) -> dict:
    """Fields set by the environment (only those present and non-empty); bad values warned once."""
    out: dict = {}
    if env.get(ENV_COLLECT, "").strip():
        out["collect"] = _known_ops(ENV_COLLECT, env[ENV_COLLECT])
    if env.get(ENV_USE, "").strip():
        out["use"] = _known_ops(ENV_USE, env[ENV_USE])
    for name, key in ((ENV_LOG_PATH, "log_path"), (ENV_ARTIFACT_DIR, "artifact_dir")):
        text = env.get(name, "")
        if text == "" or (name == ENV_LOG_PATH and text.strip() == "DEFAULT"):
            if text:
                out[key] = None
            continue
        try:
            out[key] = parse_path(text)
        except BadValue as bad:
            unset = _api_values.get(key, getattr(Settings(), key))
            warn_bad(name, text, bad.expected, f"ignored: {unset!r} applies (its value when unset)")
    ranking_off = []
    for name, (key, parse) in _PARSED.items():
        text = env.get(name, "").strip()
        if not text:
            continue
        try:
            value = parse(text)
        except BadValue as bad:
            if name in RANKING_VARIABLES:
                ranking_off.append(name)
                warn_bad(name, text, bad.expected, _RANKING_OFF)
            else:
                unset = _api_values.get(key, getattr(Settings(), key))
                warn_bad(name, text, bad.expected, f"ignored: {unset!r} applies (its value when unset)")
            continue
        if value in NAMED_MODES:
            out.update(named_mode(value))
            continue
        out[key] = value
        if key == "top_k":
            out["fast"] = out["quality"] = False
        if key == "top_k_mass":
            out.update(adaptive=True, fast=False, quality=False)  # a threshold means adaptive k
    if ranking_off:
        out["ranking_off"] = tuple(ranking_off)
    if any(k.startswith(TUNABLE_PREFIX) and v.strip().lower() not in _FALSE_WORDS for k, v in env.items()):
        out["tunable"] = True
    return out


_api_values: dict = {}


def _normalise_api(values: dict) -> dict:
    """The API layer, checked: a bad argument raises ValueError naming it (the variables' rule is for
    values a program cannot see; an argument is seen at the call)."""
    names = {f.name for f in fields(Settings)} - {"ranking_off", "tunable"}
    out = {}
    # top_k first: an integer k resets the named modes, and flags given in the same call (``api_values()``
    # replayed by ``enabled``) or a threshold (top_k_mass: adaptive k) are then applied over it
    for key, value in sorted(values.items(), key=lambda item: item[0] != "top_k"):
        if key not in names:
            raise TypeError(f"unknown ah_plugin setting {key!r}; known: {sorted(names)}")
        if value is None and key not in ("log_path", "artifact_dir"):
            continue
        if key == "top_k" and value in NAMED_MODES:
            out.update(named_mode(value))
            continue
        if key == "top_k":
            out["fast"] = out["quality"] = False
        try:
            if key in ("collect", "use"):
                value = _ops(value)
                unknown = sorted(op for op in value if not is_known_op(op))
                if unknown:
                    raise BadValue(unknown_ops_message(unknown))
            elif key == "top_k_mass":
                value = parse_fraction(str(value))
                out.update(adaptive=True, fast=False, quality=False)  # as the variable: a threshold means adaptive k
            elif key == "confidence":
                value = _confidence(str(value))
            elif key == "timing":
                value = _timing(str(value))
            elif key == "aten_margin":
                value = _margin(str(value))
            elif key == "search_space":
                value = _search_space(str(value))
            elif key == "padded_choice":
                value = _padded_choice(str(value))
            elif key in ("tune_non_gemm", "l2_rule", "time_unbacked", "compile_once"):
                value = parse_bool(str(value))
            elif key in ("top_k", "min_choices"):
                value = parse_int(str(value), 1)
        except BadValue as bad:
            raise ValueError(f"{key}={values[key]!r}: expected {bad.expected}") from None
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
        try:
            parse_bool(env[ENV_DISABLE])
        except BadValue as bad:  # still off: any value but a false one asks for that
            warn_bad(ENV_DISABLE, env[ENV_DISABLE], bad.expected, "the plugin stays off (any value but 0/false/no/off "
                     "turns it off)")
        return Settings()
    merged = dict(_api_values)
    merged.update(_from_env(env))
    return replace(Settings(), **merged)


def describe(settings: Settings) -> str:
    """A stable text of the settings that change what Inductor generates (for cache keys)."""
    return (
        f"collect={','.join(sorted(settings.collect))};use={','.join(sorted(settings.use))};"
        f"top_k={settings.top_k};fast={settings.fast}:{settings.confidence};quality={settings.quality};"
        f"adaptive={settings.adaptive}:{settings.top_k_mass};timing={settings.timing};margin={settings.aten_margin};"
        f"non_gemm={settings.tune_non_gemm};l2_rule={settings.l2_rule};unbacked={settings.time_unbacked};"
        f"once={settings.compile_once};"
        f"padded={settings.padded_choice};"
        f"min={settings.min_choices};aten={settings.keep_aten};artifact_dir={settings.artifact_dir};"
        f"space={settings.search_space};sample={settings.search_sample};tunable={settings.tunable};"
        f"ranking_off={','.join(settings.ranking_off)}"
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
    "ENV_NON_GEMM",
    "ENV_L2_RULE",
    "ENV_TIME_UNBACKED",
    "ENV_COMPILE_ONCE",
    "ENV_PADDED_CHOICE",
    "ENV_CONFIDENCE",
    "TUNABLE_PREFIX",
    "KNOWN_OPS",
    "RANKING_VARIABLES",
    "Settings",
    "is_known_op",
    "env_requests_plugin",
    "set_api_values",
    "api_values",
    "current",
    "describe",
]
