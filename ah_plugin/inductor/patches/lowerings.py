"""Where the plugin keeps aten alone, the GEMM is lowered exactly as with max-autotune off.

Under ``max_autotune_gemm`` Inductor lowers a GEMM differently from max-autotune off even when aten
ends up the only choice: a channels-last 1x1 convolution is rewritten as an mm before any candidate
exists (``autotuning_gemm and channels_last_conv()`` in the convolution lowering), extern choices get a
fixed output layout, and an addmm binds its aten kernels to other inputs. On an H200, a channels-last
ResNet-50 stepped 1.06-1.09x max-autotune off's time that way with aten as the only choice. The
lowering functions of the GEMM ops (``torch._inductor.lowering.lowerings``, looked up by the graph at
each node) are wrapped here, and each lowering follows a plan the adapter gives per autotuning name:

* ``OFF``: lowered under max-autotune off's settings straight away (an op no policy acts on, in the
  modes that narrow ``mode="max-autotune"`` to GEMMs: convolutions without a convolution ranking, their
  backward, a mixture of experts' grouped GEMMs);
* ``TUNED``: lowered as the mode says, and lowered again as off when the policies keep aten alone
  (``fall_back_to_off`` raises ``LowerAsOff`` from the adapter's hook, before any benchmark; the first
  attempt has then only realized the inputs, as off's lowering does first too);
* ``None``: left to Inductor.

The wrapped ops and their autotuning names are ``LOWERED``; the ops' lowering functions are keyed by
every overload of the op, and all of them are replaced. Checked on torch 2.11, 2.13, 2.14 and 2.15.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

import torch
from torch._inductor import config as inductor_config
from torch._inductor import lowering as inductor_lowering

from .. import contract

OFF = "off"
TUNED = "tuned"

# aten op -> the name its lowering autotunes under (``autotune_select_algorithm(name, ...)``)
LOWERED = {
    "mm": "mm",
    "addmm": "addmm",
    "bmm": "bmm",
    "baddbmm": "baddbmm",
    "_int_mm": "int_mm",
    "_scaled_mm": "scaled_mm",
    "_scaled_mm_v2": "scaled_mm",  # torch 2.13+
    "_grouped_mm": "grouped_mm",  # a mixture of experts' expert GEMMs
    "_scaled_grouped_mm": "scaled_grouped_mm",
    "_sparse_semi_structured_mm": "sparse_semi_structured_mm",
    "convolution": "convolution",
    "convolution_backward": "convolution_backward",  # its own lowering from torch 2.13 (AUTOTUNED_AS)
}
# wrapped lowerings that autotune under other names than their own, one per product they make: the plan
# gives them OFF or leaves them to Inductor, never TUNED (the adapter's hook knows an autotuning by its name)
AUTOTUNED_AS = {"convolution_backward": ("convolution_bwd_weight", "convolution_bwd_input")}
# max-autotune off's settings for one lowering (what ``mode=None`` leaves them at)
OFF_SETTINGS = {"max_autotune": False, "max_autotune_gemm": False}


class LowerAsOff(Exception):
    """Raised inside a ``TUNED`` lowering once the policies keep aten alone: lower it as off instead."""


@dataclass
class Lowering:
    """One wrapped lowering in progress: its autotuning name, its attempt, the candidates seen so far."""

    name: str
    attempt: str  # TUNED, or OFF for the lowering done as max-autotune off does it
    seen: list = field(default_factory=list)  # candidate ids offered by this lowering so far (pre-codegen)


_current: contextvars.ContextVar = contextvars.ContextVar("ah_plugin_lowering", default=None)
_saved: dict = {}  # op key -> the lowering function replaced
_counts = {"off": 0, "fell_back": 0}  # lowerings done as off straight away, and after the policies kept aten


def current() -> Lowering | None:
    """The innermost wrapped lowering in progress (a convolution's rewritten mm runs inside its conv's)."""
    return _current.get()


def as_off() -> bool:
    """Whether the innermost wrapped lowering is done as max-autotune off does it (the plugin stays out)."""
    state = _current.get()
    return state is not None and state.attempt == OFF


def fall_back_to_off(name: str) -> None:
    """Called by the adapter when the policies keep aten alone for autotuning ``name``: raises
    ``LowerAsOff`` when the innermost lowering is a first attempt of that name (else nothing)."""
    state = _current.get()
    if state is not None and state.attempt == TUNED and state.name == name:
        raise LowerAsOff(name)


def counts() -> dict:
    return dict(_counts)


def _ops():
    aten = torch.ops.aten
    for op_name, name in LOWERED.items():
        packet = getattr(aten, op_name, None)
        if packet is not None:
            yield packet, name


def install(plan) -> None:
    """Wrap the lowering of each op of ``LOWERED``; ``plan(name, args)`` gives OFF, TUNED or None per lowering
    (``args``: the lowering's inputs, for their device)."""
    if _saved:
        return
    table = inductor_lowering.lowerings
    for packet, name in _ops():
        # Inductor registers some ops by the packet (mm), others by one overload (_grouped_mm.default)
        keys = [key for key in list(table) if key is packet or getattr(key, "overloadpacket", None) is packet]
        wrapped_for: dict = {}  # one wrapper per distinct lowering function of the op
        for key in keys:
            original = table[key]
            if getattr(original, "_ah_plugin_lowering", False):
                continue
            if id(original) not in wrapped_for:
                wrapped_for[id(original)] = _wrapper(original, name, plan)
            _saved[key] = original
            table[key] = wrapped_for[id(original)]


def uninstall() -> None:
    table = inductor_lowering.lowerings
    for key, original in _saved.items():
        if getattr(table.get(key), "_ah_plugin_lowering", False):
            table[key] = original
    _saved.clear()


def _lowered(original, name: str, attempt: str, args, kwargs):
    token = _current.set(Lowering(name, attempt))
    try:
        if attempt == OFF:
            with inductor_config.patch(OFF_SETTINGS):
                return original(*args, **kwargs)
        return original(*args, **kwargs)
    finally:
        _current.reset(token)


def _wrapper(original, name: str, plan):
    def lowering(*args, **kwargs):
        contract.note("lowerings")
        try:
            decided = plan(name, args)
        except Exception:  # the plan reads the settings: never fail a lowering over them
            decided = None
        if decided == OFF:
            _counts["off"] += 1
            return _lowered(original, name, OFF, args, kwargs)
        if decided != TUNED:
            return original(*args, **kwargs)
        try:
            return _lowered(original, name, TUNED, args, kwargs)
        except LowerAsOff:
            _counts["fell_back"] += 1
            return _lowered(original, name, OFF, args, kwargs)

    lowering._ah_plugin_lowering = True
    lowering.__wrapped__ = original
    return lowering
