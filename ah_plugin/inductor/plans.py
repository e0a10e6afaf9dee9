"""What the settings ask each hook to do now: the adapter's decisions, read at every call.

The hooks stay in Inductor while the plugin is installed; whether and how each acts is read from the
settings at the moment it is called (``ah_plugin.install`` and the variables may change between compiles).
"""

from __future__ import annotations

from ..config import settings
from ..policy import PolicyChain
from ..report.messages import warn_once
from .requests import device_metadata
from .session import OFF, TUNED

_state = {"installed": False}

# wrapped lowerings that autotune under other names than their own, one per product they make: the plan
# gives them OFF or leaves them to Inductor, never TUNED (the adapter knows an autotuning by its name)
AUTOTUNED_AS = {"convolution_backward": ("convolution_bwd_weight", "convolution_bwd_input")}
# max-autotune's lowering rewrites a channels-last 1x1 convolution as an mm before any candidate exists
REWRITTEN_BEFORE_CANDIDATES = ("convolution",)


def set_installed(on: bool) -> None:
    _state["installed"] = on


def installed() -> bool:
    return _state["installed"]


def current_settings():
    """``settings.current()``; None (warned once) when a variable holds a bad value."""
    try:
        return settings.current()
    except Exception as exc:  # Inductor calls the hooks outside the plugin's guards too: never raise
        warn_once(("settings", str(exc)), f"ah_plugin: {exc}; the plugin leaves Inductor's choices alone")
        return None


def _settings():
    return current_settings() if _state["installed"] else None


def handled_ops() -> frozenset:
    """The ops the plugin takes over from torch's built-in AutoHeuristic."""
    current = _settings()
    return current.handled_ops if current is not None else frozenset()


def acting() -> bool:
    current = _settings()
    return current is not None and current.active


def timing():
    """How the plugin times candidates (``replay_timing.METHOD_REPLAY``), or None (Inductor's own)."""
    current = _settings()
    return current.timing if current is not None else None


def mode():
    """What fast or quality mode changes in ``mode="max-autotune"`` now (patches/mode_options.py); None:
    nothing."""
    current = _settings()
    if current is None or not (current.gemm_only or current.persistent_tma):
        return None
    return {"gemm_only": current.gemm_only, "persistent_tma": current.persistent_tma,
            "no_fusion_benchmark": current.skip_fusion_benchmark, "verbose": current.verbose}


def lowering(name: str, args=()):
    """How a GEMM lowering of autotuning ``name`` goes (patches/lowerings.py): ``TUNED`` where a ranking or
    the results cache may keep a template (lowered again as off when they keep aten alone), ``OFF`` in the
    modes that narrow ``mode="max-autotune"`` to GEMMs for an op no ranking covers (a convolution keeps cuDNN
    with off's lowering), None where Inductor's own lowering stands (collection, the plugin off).

    A convolution is ``OFF`` there even when the use variable names it, unless an artifact ranks
    convolutions on its device: max-autotune's lowering rewrites a channels-last 1x1 convolution as an mm
    before any candidate exists, so a lowering tried first and redone would not be off's (the mms it made
    are ranked and timed as mms)."""
    current = _settings()
    if current is None or not current.active or name in current.collect_ops:
        return None
    named_as = AUTOTUNED_AS.get(name)
    if named_as is not None:  # off's lowering in the GEMM-only modes unless one of its names is collected or used
        named = any(n in current.collect_ops or n in current.use_ops for n in named_as)
        return OFF if current.gemm_only and not named else None
    if name in current.use_ops:
        if name in REWRITTEN_BEFORE_CANDIDATES and current.gemm_only and not _ranked_on(name, args):
            return OFF
        return TUNED
    if current.gemm_only:
        return OFF
    return TUNED if PolicyChain.for_op(name) else None


def _ranked_on(name: str, args) -> bool:
    """Whether a policy ranks ``name`` on the device of the lowering's first input."""
    try:
        device = args[0].get_device()
    except Exception:  # no input with a device: nothing can rank it
        return False
    return PolicyChain.for_op(name).ranks(name, {"name": name, **device_metadata(device)})


def compile_once() -> bool:
    current = _settings()
    return current is not None and current.compile_once


def fusion_margin():
    """Quality mode with replay timing: the margin a fused template must win its group by
    (patches/fusion_timing.py); else None (Inductor's own fused-group timing)."""
    current = _settings()
    if current is None or not current.active or not current.fused_group_by_replay:
        return None
    return current.aten_margin
